"""Every JSON output is one model (documents/): written by to_document, its schema
generated from the same model and shipped in wheelforge/data. These tests fail while a shipped
schema differs from its model, and check that the documents of real results validate against
their schemas and keep the keys users read (docs/usage.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest

from wheelforge.binaries import checkwheels as checking
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.binaries.rule import Violation
from wheelforge.build.caches import CacheEntry, CacheListing, PruneResult
from wheelforge.cli.app import cli, main
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.documents import schemas
from wheelforge.documents.cache_schema import list_document, prune_document
from wheelforge.documents.check_schema import check_document
from wheelforge.documents.inspect_schema import inspect_document
from wheelforge.documents.kinds import DocumentKind, document_text
from wheelforge.documents.test_schema import torch_tests_document
from wheelforge.documents.variants_schema import github_matrix, variants_document
from wheelforge.foundation.document import to_document
from wheelforge.packaging.testwheels import Outcome
from wheelforge.packaging.wheel_variants import VariantCheck
from wheelforge.planning import variants

from . import fakes

DATA = Path(__file__).parents[1] / "data" / "fatbin"
REGENERATE = "run `python -m wheelforge.documents.schemas` and commit the result"
KINDS = {kind.name: kind for kind in schemas.KINDS}
Project = Callable[..., Path]


def _valid(kind: DocumentKind, document: object) -> dict[str, Any]:
    """The document as printed, parsed back and validated against its shipped schema."""
    data: dict[str, Any] = json.loads(document_text(document))
    jsonschema.validate(data, kind.packaged_schema(), cls=jsonschema.Draft202012Validator)
    return data


def test_every_kind_has_its_own_name() -> None:
    assert len(KINDS) == len(schemas.KINDS)
    assert "matrix" not in KINDS  # matrix.schema.json is matrix.yaml's


@pytest.mark.parametrize("kind", schemas.KINDS, ids=lambda k: k.name)
def test_shipped_schema_is_the_generated_one(kind: DocumentKind) -> None:
    assert kind.packaged_schema() == kind.schema(), REGENERATE
    jsonschema.Draft202012Validator.check_schema(kind.packaged_schema())


@pytest.mark.parametrize("kind", schemas.KINDS, ids=lambda k: k.name)
def test_every_document_starts_with_its_schema_version(kind: DocumentKind) -> None:
    schema = kind.schema()
    assert next(iter(schema["properties"])) == "schema_version"
    assert schema["properties"]["schema_version"]["const"] == kind.version
    assert "schema_version" in schema["required"]
    assert schema["$id"] == f"wheelforge/{kind.name}/{kind.version}"


def _json_options(group: click.Group, path: str = "wheelforge") -> list[tuple[str, str]]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _json_options(command, f"{path} {name}")
            continue
        for param in command.params:
            if isinstance(param, click.Option) and "--json" in param.opts:
                found.append((f"{path} {name}", param.help or ""))
    return found


def test_every_json_option_names_its_schema() -> None:
    options = _json_options(cli)
    assert len(options) == 6  # inspect, matrix, check, test, cache list, cache prune
    for command, help_text in options:
        named = [k for k in schemas.KINDS if f"wheelforge/data/{k.schema_file}" in help_text]
        assert len(named) == 1, (command, help_text)


def test_inspect_document() -> None:
    reports = inspect_paths([DATA / "sm75_lz4.so", DATA / "no_cuda.so"])
    data = _valid(KINDS["inspect"], inspect_document(reports))
    assert list(data) == ["schema_version", "files"]  # no variant wheel: no "variants"
    # loads_on added by issue 23 (compatible); null for a file without CUDA code.
    assert [list(f) for f in data["files"]] == [["path", "size", "fatbins", "loads_on"]] * 2
    assert data["files"][0]["fatbins"][0]["arch"] == "sm_75"
    assert data["files"][1]["loads_on"] is None
    check = VariantCheck(
        wheel="w.whl",
        label="abc",
        properties=("nvidia :: sm_arch :: 75_real",),
        derived_sm_arch=("75_real",),
        problems=(),
    )
    with_variants = _valid(KINDS["inspect"], inspect_document(reports, [check]))
    assert with_variants["variants"] == [
        {
            "wheel": "w.whl",
            "label": "abc",
            "properties": ["nvidia :: sm_arch :: 75_real"],
            "derived_sm_arch": ["75_real"],
            "problems": [],
        }
    ]


def test_check_document_keeps_its_keys() -> None:
    bad = Violation(
        binary="x.so", rule="libtorch-symbol", symbol="_ZN2at6Tensor", message="uses at::Tensor"
    )
    checks = [
        BinaryCheck(
            path="w.whl!p/_C.abi3.so",
            shims=("aoti_torch_a",),
            newest_shim=(2, 10),
            python_symbols=("PyModule_Create2",),
            violations=(bad,),
            python_floor=(3, 2),
            declared_torch=(2, 10),
            declared_python=(3, 10),
        )
    ]
    data = _valid(KINDS["check"], check_document(checking.result_of(checks)))
    # The keys it had keep their values; issue 23 added keys (compatible: no version bump).
    [binary] = data["binaries"]
    assert data["schema_version"] == 1 and data["wheels"] == []
    assert {k: binary[k] for k in KEPT_CHECK_KEYS} == {
        "path": "w.whl!p/_C.abi3.so",
        "shims": ["aoti_torch_a"],
        "newest_shim": "2.10",
        "torch_floor": {"inferred": "2.10", "declared": "2.10"},
        "python_symbols": ["PyModule_Create2"],
        "python_floor": {"inferred": "3.2", "declared": "3.10"},
        "violations": [
            {
                "rule": "libtorch-symbol",
                "symbol": "_ZN2at6Tensor",
                "message": "uses at::Tensor",
                "severity": "error",
                "kind": None,  # issue 33: the class that groups its line (None: its own)
            }
        ],
    }
    assert set(binary) - set(KEPT_CHECK_KEYS) == {
        "role",
        "role_reason",
        "verdict",
        "torch_abi",
        "stable_shim_count",
        "unstable_symbols",
        "unstable_symbol_count",
        "allows",
        "abi",  # issue 20: which ABI's rules judged it, and which rules
        "rules",
        "load",  # issue 38: what loading it said (check --torch-from)
    }


KEPT_CHECK_KEYS = (
    "path",
    "shims",
    "newest_shim",
    "torch_floor",
    "python_symbols",
    "python_floor",
    "violations",
)


def test_variants_document_and_the_github_matrix(project: Project) -> None:
    matrix = load_matrix(project())
    arch_sets = (
        ArchSet("default", parse_arch_list("8.0 9.0+PTX", source="t")),
        ArchSet("big", parse_arch_list("10.0", source="t")),
    )
    listed = variants.expand(dataclasses.replace(matrix, arch_sets=arch_sets), [fakes.toolkit()])
    data = _valid(KINDS["variants"], variants_document(listed))
    assert data["variants"][0] == {
        "id": "default-cu130",
        "arch_set": "default",
        "archs": "8.0 9.0+PTX",
        "cuda": "13.0",
        "provisioned": False,
        "local_label": "default.cu130",
        "index": None,  # one CUDA major: the output folder itself
    }
    github = to_document(github_matrix(listed))
    assert github == {
        "include": [
            {"variant": "default-cu130", "archs": "8.0 9.0+PTX", "cuda": "13.0", "index": ""},
            {"variant": "big-cu130", "archs": "10.0", "cuda": "13.0", "index": ""},
        ]
    }


def test_the_test_document_writes_each_outcome() -> None:
    ran = Outcome(
        env="torch 2.13.0",
        torch="2.13.0+cpu",
        cuda=False,
        variant="v",
        status="passed",
        passed=3,
        seconds=1.5,
    )
    data = _valid(KINDS["test"], torch_tests_document([ran]))
    assert data["runs"] == [
        {
            "env": "torch 2.13.0",
            "torch": "2.13.0+cpu",
            "cuda": False,
            "variant": "v",
            "status": "passed",
            "passed": 3,
            "failed": 0,
            "skipped": 0,
            "errors": 0,
            "detail": None,
            "seconds": 1.5,
        }
    ]


def test_cache_documents_keep_their_keys(tmp_path: Path) -> None:
    entry = CacheEntry(
        kind="toolkit",
        name="CUDA 13.0",
        path=tmp_path / "toolkits" / "13.0",
        size=2048,
        last_used=0.0,
    )
    listing = CacheListing(root=tmp_path, exists=True, entries=(entry,))
    listed = _valid(KINDS["cache-list"], list_document(listing))
    assert listed == {
        "schema_version": 4,  # 2: "torch env" (issue 24); 3: "not wheelforge's" (32); 4: issue 39
        "cache": str(tmp_path),
        "exists": True,
        "entries": [
            {
                "kind": "toolkit",
                "name": "CUDA 13.0",
                "path": str(entry.path),
                "size": 2048,
                "last_used": "1970-01-01T00:00:00+00:00",
            }
        ],
        "total": 2048,
    }
    pruned = PruneResult(
        root=tmp_path, exists=True, dry_run=True, unused_for_days=None, removed=(entry,), busy=()
    )
    data = _valid(KINDS["cache-prune"], prune_document(pruned))
    assert list(data) == [
        "schema_version",
        "cache",
        "exists",
        "dry_run",
        "unused_for_days",
        "names",  # prune NAME... (issue 24)
        "removed",
        "busy",
        "foreign",  # skipped: no marker of wheelforge's (issue 32)
        "freed",
    ]
    assert (data["unused_for_days"], data["freed"], data["removed"]) == (
        None,
        2048,
        listed["entries"],
    )


def test_cache_list_json_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cache", "list", "--json", "--cache-dir", str(tmp_path / "none")]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, KINDS["cache-list"].packaged_schema())
    assert (data["exists"], data["entries"]) == (False, [])
