"""packaging/inspectwheels.py: what ``inspect`` finds, as data (each binary's fatbin entries, each
variant wheel's check against its binaries), and its verdict, which only a variant wheel that
disagrees with its binaries fails."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import pytest

from wheelforge.foundation.errors import VerificationError
from wheelforge.packaging import wheel_variants as wv
from wheelforge.packaging.inspectwheels import require_agree, run_inspect

LIBRARY = Path(__file__).resolve().parent.parent / "data" / "fatbin" / "sm80_sm90a_ptx90.so"
PLAIN = "demo_ops-1.2.0-cp310-abi3-manylinux_2_28_x86_64.whl"


def _plain_wheel(folder: Path) -> Path:
    """A wheel holding the fatbin test library as its extension."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PLAIN
    members = {"demo_ops/__init__.py": b"", "demo_ops/_C.abi3.so": LIBRARY.read_bytes()}
    record = "".join(f"{n},sha256=x,{len(d)}\n" for n, d in members.items())
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr(
            "demo_ops-1.2.0.dist-info/RECORD", record + "demo_ops-1.2.0.dist-info/RECORD,,\n"
        )
    return path


def _variant_wheel(folder: Path, sm_arch: tuple[str, ...]) -> Path:
    props = wv.properties(wv.VariantFacts(sm_arch=sm_arch, cuda="13.0", torch=None))
    text = wv.variant_json("default_cu130", props, unstable_abi=False)
    return wv.make_variant_wheel(_plain_wheel(folder), "default_cu130", text, folder / "out")


def test_a_shared_object_is_its_entries_and_no_variant_check() -> None:
    found = run_inspect([LIBRARY])
    [binary] = found.reports
    assert binary.path == str(LIBRARY) and found.checks == ()
    assert {(e.kind, e.arch) for e in binary.entries} >= {("sass", "sm_80"), ("sass", "sm_90a")}
    require_agree(found)  # nothing to disagree with
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.checks = ()  # type: ignore[misc]


def test_a_plain_wheel_has_no_variant_check(tmp_path: Path) -> None:
    found = run_inspect([_plain_wheel(tmp_path)])
    assert [r.path for r in found.reports] == [f"{tmp_path / PLAIN}!demo_ops/_C.abi3.so"]
    assert found.checks == ()


def test_a_variant_wheel_is_checked_and_its_disagreement_is_the_verdict(tmp_path: Path) -> None:
    agreeing = _variant_wheel(tmp_path / "a", wv.sm_arch_values(run_inspect([LIBRARY]).reports))
    [check] = run_inspect([agreeing]).checks
    assert check.problems == ()
    require_agree(run_inspect([agreeing]))
    wrong = run_inspect([_variant_wheel(tmp_path / "b", ("75_real",))])
    [check] = wrong.checks
    assert any("75_real" in p for p in check.problems)
    with pytest.raises(VerificationError):
        require_agree(wrong)
