"""foundation/document.from_document: the one reader from a JSON document back to its frozen
dataclass, checked against the same shape to_document writes and schemagen describes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from wheelforge.foundation import cachefiles
from wheelforge.foundation.document import (
    DocumentError,
    from_document,
    schema_version,
    to_document,
)


@dataclass(frozen=True, kw_only=True)
class Inner:
    name: str
    size: int


@dataclass(frozen=True, kw_only=True)
class Outer:
    schema_version: int = schema_version(2)
    kind: Literal["a", "b"]
    ratio: float
    requires_python: str = field(default="", metadata={"key": "requires-python"})
    items: tuple[Inner, ...] = ()
    pair: tuple[int, int] | None = None
    stats: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    path: Path | None = field(default=None, metadata={"omit_if_none": True})
    derived: int = field(default=0, metadata={"internal": True})


def test_a_document_reads_back_as_its_model() -> None:
    value = Outer(
        kind="b",
        ratio=0.5,
        requires_python=">=3.10",
        items=(Inner(name="x", size=3),),
        pair=(1, 2),
        stats={"/a": (1, 2), "/b": None},
        path=Path("/tmp/x"),
    )
    text = json.dumps(to_document(value))
    assert from_document(Outer, json.loads(text)) == value
    # Absent keys take their defaults (None for omit_if_none); an int is a number.
    assert from_document(Outer, {"schema_version": 2, "kind": "a", "ratio": 1}) == Outer(
        kind="a", ratio=1.0
    )


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"kind": "a"}, "ratio"),  # missing
        ({"kind": "c", "ratio": 1}, "kind"),  # not one of the Literal's
        ({"kind": "a", "ratio": True}, "ratio"),  # a bool is no number
        ({"kind": "a", "ratio": 1, "items": [{"name": "x", "size": "3"}]}, "items[0].size"),
        (
            {"kind": "a", "ratio": 1, "items": [{"name": "x", "size": 3, "more": 1}]},
            "items[0].more",
        ),
        ({"kind": "a", "ratio": 1, "pair": [1]}, "pair"),
        ({"kind": "a", "ratio": 1, "stats": {"/a": "big"}}, "stats./a"),
        ({"kind": "a", "ratio": 1, "derived": 3}, "derived"),  # internal: not a document key
        ({"kind": "a", "ratio": 1, "schema_version": 1}, "schema_version"),  # another version
        ([], ""),
    ],
)
def test_a_document_of_another_shape_names_where(data: object, where: str) -> None:
    with pytest.raises(DocumentError) as caught:
        from_document(Outer, data)
    assert caught.value.where == where


def test_a_stored_entry_of_another_shape_is_removed_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "entry.json"
    path.write_text(json.dumps({"name": "x", "size": "3"}))
    assert cachefiles.load(path, Inner, what="the entry", within=tmp_path) is None
    err = capsys.readouterr().err
    assert "the entry" in err and "size" in err
    assert not path.exists()
    path.write_text(json.dumps({"name": "x", "size": 3}))
    assert cachefiles.load(path, Inner, what="the entry", within=tmp_path) == Inner(
        name="x", size=3
    )


def _stored_models() -> list[tuple[type, dict[str, object]]]:
    """Each stored model with an entry as the writer before it (a plain dict) wrote it."""
    from wheelforge.build.freshness import FreshnessStamp
    from wheelforge.build.reuse import StoredProvenance
    from wheelforge.packaging.stamp import StampFile
    from wheelforge.planning.jobcosts import CostHistory, JobCost
    from wheelforge.toolchain.envs import Marker
    from wheelforge.toolchain.probecache import ProbeEntry
    from wheelforge.toolchain.toolkits import ToolkitFile

    cost = {"seconds": 1.5, "cpu_seconds": 2.0, "peak": 1 << 30, "largest": 1 << 29, "threads": 2}
    assert from_document(JobCost, cost).measured  # the history holds measurements only
    return [
        (StampFile, {"digest": "d", "wheel": "x.whl", "sha256": "s", "index": "cu130"}),
        (StampFile, {"wheel": "", "failed": "compile error"}),
        (ProbeEntry, {"key": {"nvcc": "/x"}, "watch": {"/x": [1, 2], "/y": None}, "value": {}}),
        (
            ToolkitFile,
            {
                "release": "13.0",
                "source": "pypi",
                "nvcc": "bin/nvcc",
                "host_cxx": None,
                "files": [{"file": "a.whl", "sha256": "0" * 64}],
            },
        ),
        (
            Marker,
            {
                "spec": "2.13.0",
                "made_from": "/usr/bin/python3",
                "requires": ["numpy"],
                "torch": "2.13.0+cpu",
                "cuda_build": None,
                "cuda": False,
                "python": "3.11",
            },
        ),
        (FreshnessStamp, {"ninja": "h", "files": {"/a.cu": [10, 20]}, "read": ["/a.cu"]}),
        (CostHistory, {"entries": {"k": cost}}),
        (StoredProvenance, {"key": ["0.1.0", 1, 0, None], "files": [["a", "b"]], "inputs": "x"}),
    ]


@pytest.mark.parametrize(
    ("model", "stored"), _stored_models(), ids=lambda v: getattr(v, "__name__", "")
)
def test_what_the_writers_stored_reads_through_the_models(
    model: type, stored: dict[str, object]
) -> None:
    """The entries already in users' caches read back, and are written as they were (the same
    keys in the same order): a cache is not invalidated by the models."""
    written = to_document(from_document(model, stored))
    assert {k: written[k] for k in stored} == stored
    assert [k for k in written if k in stored] == list(stored)
    assert all(written[k] in ("", None, []) for k in written if k not in stored)  # defaults
