"""Verifying a built wheel: one pass over its ELF members (each inflated and parsed once, shared
by the fatbin reader and the stable-ABI rules), the arch checks kept for rendering."""

from __future__ import annotations

import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from elftools.elf import elffile

from wheelforge.binaries import bounded, elf, registry, verify
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import VerificationError
from wheelforge.toolchain import shims

from .fakes import plan_for, with_record

FATBIN = Path(__file__).resolve().parents[1] / "data" / "fatbin"
WHEEL = "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"


def make_wheel(folder: Path) -> Path:
    path = folder / WHEEL
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo_ops/_C.abi3.so", (FATBIN / "sm80_sm90a_ptx90.so").read_bytes())
        zf.writestr("demo_ops/__init__.py", "")
        zf.writestr(
            "demo_ops-1.2.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo-ops\nVersion: 1.2.0\nRequires-Dist: torch>=2.10\n",
        )
    return with_record(path)  # a whole wheel: the layout rule reads RECORD (issue 21)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts wheel members inflated (by name) and ELF headers parsed."""
    counts: Counter[str] = Counter()
    real_read = bounded.read_member
    real_elf = elffile.ELFFile

    def read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bytearray:
        counts[info.filename] += 1  # the one full inflation of a member (bounded.py)
        return real_read(zf, info, display)

    def parse(stream: Any) -> Any:
        counts["ELFFile"] += 1
        return real_elf(stream)

    real_chunks = bounded.member_chunks

    def chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> Iterator[bytes]:
        counts[info.filename] += 1  # ... or its one streamed inflation (stream.py)
        return real_chunks(zf, info, display)

    monkeypatch.setattr(bounded, "read_member", read)
    monkeypatch.setattr(bounded, "member_chunks", chunks)
    monkeypatch.setattr(elffile, "ELFFile", parse)  # elf.py imports it when it parses
    monkeypatch.setattr(shims, "header_guards", lambda _include: {})
    # The fatbin sample is no Python module (no PyInit__C); that rule has its own tests.
    others = tuple(r for r in registry.all_rules() if r.id != "module-init")
    monkeypatch.setattr(registry, "all_rules", lambda: others)
    return counts


def test_one_pass_inflates_and_parses_each_member_once(
    project: Callable[..., Path], tmp_path: Path, counted: Counter[str]
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path, archs="8.0 9.0a")
    found = verify.verify_wheel(make_wheel(tmp_path), plan)
    assert counted["demo_ops/_C.abi3.so"] == 1
    assert counted["ELFFile"] == 1
    [binary] = found.binaries
    [abi] = found.abi_checks
    [arch] = found.arch_checks
    assert (
        binary.path
        == abi.path
        == arch.binary
        == elf.member_name(tmp_path / WHEEL, "demo_ops/_C.abi3.so")
    )
    assert binary.sass_archs == ("sm_80", "sm_90a")
    # The sample links no CUDA runtime: its __cuda* calls bind only to the one torch loads
    # globally, a warning (issue 38), nothing that fails
    assert [v.rule for v in abi.violations if v.blocking] == []
    assert arch.ok and arch.extra_ptx == ("compute_90",) and arch.missing_sass == ()


def test_missing_arch_fails_and_names_it(
    project: Callable[..., Path], tmp_path: Path, counted: Counter[str]
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path, archs="8.0 9.0+PTX")
    with pytest.raises(
        VerificationError, match=r"lacks SASS sm_90 asked for by arch set 'default'"
    ):
        verify.verify_wheel(make_wheel(tmp_path), plan)


def test_moved_renames_every_finding(
    project: Callable[..., Path], tmp_path: Path, counted: Counter[str]
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path, archs="8.0")
    staged = make_wheel(tmp_path)
    published = tmp_path / "dist" / WHEEL
    moved = verify.verify_wheel(staged, plan).moved(staged, published)
    name = elf.member_name(published, "demo_ops/_C.abi3.so")
    assert [b.path for b in moved.binaries] == [name]
    assert [c.binary for c in moved.arch_checks] == [name]
    assert [c.path for c in moved.abi_checks] == [name]


def test_member_naming() -> None:
    name = elf.member_name("dist/x.whl", "pkg/_C.abi3.so")
    assert name == "dist/x.whl!pkg/_C.abi3.so"
    assert elf.member_path(name) == "pkg/_C.abi3.so"
    assert elf.member_path("lib/_C.so") == "lib/_C.so"
    assert elf.is_member(name, "pkg/_C.abi3.so") and not elf.is_member(name, "_C.abi3.so")
    assert elf.rename_wheel(name, "dist/x.whl", "out/x.whl") == "out/x.whl!pkg/_C.abi3.so"


class _Runs:
    """A pickle payload: unpickled, it would create the file *flag* (a crafted build folder's
    'shell command')."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.flag), "w"))


def test_stored_findings_are_a_document_and_tampering_verifies_again(
    project: Callable[..., Path], tmp_path: Path, counted: Counter[str]
) -> None:
    """Issue 39 item 2: what verifying found is stored as a document of its model, read back
    equal for the same wheel; a crafted or edited entry (a pickle that runs code, another
    shape, another wheel's sha256) is never run and only means verifying again."""
    import json
    import pickle

    from wheelforge.build import reuse

    plan = plan_for(load_matrix(project()), tmp_path, archs="8.0 9.0a")
    built = make_wheel(tmp_path)
    found = verify.verify_wheel(built, plan)
    plan.build_dir.mkdir(parents=True, exist_ok=True)
    reuse.remember_verification(built, plan, found, ("demo_ops._C",))
    stored = plan.build_dir / reuse.VERIFIED
    assert json.loads(stored.read_text())["found"]["binaries"][0]["entries"]
    assert reuse.verified_before(built, plan) == (found, ("demo_ops._C",))

    document = json.loads(stored.read_text())
    flag = tmp_path / "ran"
    for tampered in (
        pickle.dumps(("0", "x", _Runs(flag), None)),  # the old store's form, crafted
        b"{",
        json.dumps({**document, "imported": "demo_ops._C"}).encode(),
        json.dumps({**document, "found": {"binaries": "x"}}).encode(),
        json.dumps({**document, "sha256": "0" * 64}).encode(),
        json.dumps({**document, "extra": 1}).encode(),
    ):
        stored.write_bytes(tampered)
        assert reuse.verified_before(built, plan) is None
    (plan.build_dir / "wheel-verified.pickle").write_bytes(pickle.dumps(_Runs(flag)))
    assert reuse.verified_before(built, plan) is None
    assert not flag.exists()


def test_nothing_stored_is_unpickled_or_run() -> None:
    """No module of wheelforge reads a stored file as code: no pickle, marshal or shelve."""
    import re

    src = Path(verify.__file__).resolve().parents[1]
    code = re.compile(r"^\s*(import|from)\s+(pickle|marshal|shelve|dill|cloudpickle)\b", re.M)
    found = [p.name for p in src.rglob("*.py") if code.search(p.read_text(encoding="utf-8"))]
    assert found == []
