"""Size budgets: sizes as written (--size-budget, matrix.yaml's size-budget), what each arch
costs in the wheel, the compression levers, and the over-budget verdict. (tests/unit/test_sizes.py
is another matter: the source's module and function lengths.)"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.binaries.sizecheck import check_size, contributions, levers
from wheelforge.configuration.bytesizes import SIZE_PATTERN, parse_size
from wheelforge.configuration.matrix import schema
from wheelforge.foundation.errors import ConfigError

DATA = Path(__file__).parents[1] / "data" / "fatbin"


@pytest.mark.parametrize(
    ("text", "size"),
    [("100MiB", 100 * 1024**2), ("450MB", 450 * 1000**2), ("100KiB", 102400), ("1.5 GiB", 1610612736),
     ("2000", 2000), ("10kb", 10000)],
)  # fmt: skip
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text, where="--size-budget") == size


@pytest.mark.parametrize("text", ["100 MiBs", "ten MB", "", "-5MB", "0"])
def test_parse_size_refuses_with_the_fix(text: str) -> None:
    with pytest.raises(ConfigError, match="--size-budget: .*(like 100MiB|larger than 0)"):
        parse_size(text, where="--size-budget")


@pytest.mark.parametrize(
    "text", ["100MiB", "450MB", "100KiB", "1.5 GiB", "2000", "10kb", "100 MiBs", "ten MB", "1k"]
)
def test_schema_pattern_accepts_what_parse_size_reads(text: str) -> None:
    """matrix.schema.json's size-budget (for editors) and the reader agree on the grammar."""
    try:
        parse_size(text, where="size-budget")
        readable = True
    except ConfigError:
        readable = False
    assert bool(re.match(SIZE_PATTERN, text)) is readable
    key = schema.matrix_schema()["properties"]["size-budget"]
    assert {"type": "string", "pattern": SIZE_PATTERN} in key["anyOf"]


def test_matrix_size_budget_errors_name_the_line(project) -> None:  # type: ignore[no-untyped-def]
    from tests.unit.conftest import GOOD_MATRIX
    from wheelforge.configuration.matrix.load import load_matrix

    assert load_matrix(project(GOOD_MATRIX + "size-budget: 450MB\n")).size_budget == 450 * 1000**2
    assert load_matrix(project()).size_budget == 100 * 1024**2
    with pytest.raises(
        ConfigError, match=r"matrix.yaml:13: size-budget: '4 parsecs' is not a size"
    ):
        load_matrix(project(GOOD_MATRIX + "size-budget: 4 parsecs\n"))


def test_contributions_of_a_real_binary_largest_first() -> None:
    [report] = inspect_paths([DATA / "sm80_sm90a_ptx90.so"])
    parts = contributions([report])
    assert {(c.kind, c.arch) for c in parts} == {
        ("sass", "sm_80"),
        ("sass", "sm_90a"),
        ("ptx", "compute_90"),
    }
    assert [c.stored for c in parts] == sorted((c.stored for c in parts), reverse=True)
    assert sum(c.stored for c in parts) == sum(e.stored_size for e in report.entries)


def _entry(arch: str, stored: int, compression: str = "none") -> FatbinEntry:
    sm = int("".join(ch for ch in arch if ch.isdigit()))
    return FatbinEntry(kind="sass", arch=arch, sm=sm, variant="", container=0, offset=0,
                       stored_size=stored, size=stored * 2, compression=compression, version="1.8")  # type: ignore[arg-type]  # fmt: skip


def test_levers_measure_dropping_an_arch_and_family_targets() -> None:
    binary = BinaryContents(path="x.whl!p/_C.so", size=1, entries=(
        _entry("sm_100", 5000), _entry("sm_103", 4000), _entry("sm_90", 3000, "lz4")))  # fmt: skip
    found = {lv.change: lv for lv in levers(contributions([binary]), (13, 0), ())}
    assert found["drop SASS sm_100 from the arch set"].saves == 5000
    assert found["build 10.0f instead of sm_100 sm_103"].saves == 4000
    assert found["nvcc-flags: [-Xfatbin=-compress-all]"].saves is None  # two entries stored raw
    assert "nvcc-flags: [--compress-mode=size]" in found
    old = {
        lv.change for lv in levers(contributions([binary]), (12, 4), ("-Xfatbin=-compress-all",))
    }
    assert "nvcc-flags: [--compress-mode=size]" not in old  # nvcc 12.4 has no --compress-mode
    assert "nvcc-flags: [-Xfatbin=-compress-all]" not in old  # already asked for


def test_check_size_over_budget() -> None:
    [report] = inspect_paths([DATA / "sm80_sm90a_ptx90.so"])
    assert (
        check_size(
            wheel_size=10, budget=100, binaries=[report], toolkit=(13, 0), nvcc_flags=()
        ).over
        is False
    )
    over = check_size(wheel_size=101, budget=100, binaries=[report], toolkit=(13, 0), nvcc_flags=())
    assert over.over and over.levers[0].saves == over.contributions[0].stored


def test_over_budget_measures_the_wheel(tmp_path: Path) -> None:
    """Over budget, each entry's cost in the wheel (deflated like the zip) and the compression
    levers are measured on the wheel's own bytes."""
    wheel = tmp_path / "demo-1.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(DATA / "sm80_sm90a_ptx90.so", "demo/_C.abi3.so")
    binaries = [b for b in inspect_paths([wheel]) if b.entries]
    size = check_size(wheel_size=wheel.stat().st_size, budget=1, binaries=binaries, toolkit=(13, 0),
                      nvcc_flags=(), wheel=wheel)  # fmt: skip
    assert size.over
    for c in size.contributions:
        assert c.in_wheel is not None and 0 < c.in_wheel <= c.stored
        if c.compression == "none":  # a raw cubin deflates, as it does in the zip
            assert c.in_wheel < c.stored
    found = {lv.change: lv for lv in size.levers}
    sm80 = next(c for c in size.contributions if c.arch == "sm_80")
    assert found["drop SASS sm_80 from the arch set"].saves == sm80.in_wheel
    assert found["nvcc-flags: [--compress-mode=size]"].saves is not None
