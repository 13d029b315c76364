from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.sizecheck import check_size
from wheelforge.binaries.verify import check_binary
from wheelforge.build.results import BuildReport, VariantResult
from wheelforge.cli.build_screen import print_build
from wheelforge.configuration.archs import ArchSet, parse_arch_list


def _summary(abi: str, built_against: str) -> str:
    report = BuildReport(
        matrix=Path("matrix.yaml"),
        abi=abi,  # type: ignore[arg-type]
        target_version=(2, 11),
        built_against=built_against,
        variants=(),
    )
    out = io.StringIO()
    print_build(report, Console(file=out, width=200))
    return out.getvalue()


def test_an_unstable_build_is_not_summed_up_as_stable() -> None:
    text = _summary("unstable", "2.13.0+cpu, 2.14.1+cu130")
    assert "stable-ABI target" not in text
    assert "unstable ABI: each wheel pinned to the torch it was built against" in text
    assert "2.13.0+cpu, 2.14.1+cu130" in text
    assert "stable-ABI target torch 2.11" in _summary("stable", "2.13.0+cpu")


def _variant(binaries: tuple[BinaryContents, ...], owed: ArchSet | None) -> VariantResult:
    arch_set = ArchSet("default", parse_arch_list("8.0 9.0", source="test"))
    return VariantResult(
        variant_id="default-cu130", arch_set=arch_set, toolkit="13.0.88", torch="2.13.0+cpu",
        wheel=Path("dist/demo-1.0-cp310-abi3-linux_x86_64.whl"), wheel_size=4000, sha256="0" * 64,
        sources=1, compiled=("CXX",), reused=False, binaries=binaries,
        arch_checks=tuple(check_binary(b, owed) for b in binaries), abi_checks=(),
        size=check_size(wheel_size=4000, budget=10**8, binaries=binaries, toolkit=(13, 0), nvcc_flags=()),
        stages=(), seconds=1.0,
    )  # fmt: skip


def test_a_cpp_only_extension_is_not_shown_missing_its_archs() -> None:
    """No .cu source: the arch set is owed by nobody (verify.link_archs), so the
    screen says so instead of listing every arch MISSING above "1 wheel(s) built"."""
    cpp_only = BinaryContents(path="x.whl!demo/_C.abi3.so", size=100, entries=())
    report = BuildReport(matrix=Path("matrix.yaml"), target_version=(2, 10), built_against="2.13.0+cpu",
                         variants=(_variant((cpp_only,), None),))  # fmt: skip
    out = io.StringIO()
    print_build(report, Console(file=out, width=200))
    text = out.getvalue()
    assert "MISSING" not in text
    assert "no device code: the extension compiles no .cu source, so arch set default" in text
    # The same binary where device code was owed: every arch is missing, as before.
    owed = ArchSet("default", parse_arch_list("8.0 9.0", source="test"))
    report = BuildReport(matrix=Path("matrix.yaml"), target_version=(2, 10), built_against="2.13.0+cpu",
                         variants=(_variant((cpp_only,), owed),))  # fmt: skip
    out = io.StringIO()
    print_build(report, Console(file=out, width=200))
    assert out.getvalue().count("MISSING") == 2


def test_a_binary_table_keeps_its_title_on_one_line() -> None:
    """An unstable build's module name is long (grouped_gemm_backend.cpython-311-x86_64-linux-
    gnu.so): as a rich table title it was folded to the table's width, mid-name, at 80 and 100
    columns and in a file alike. It is a line of its own above the table now."""
    so = BinaryContents(path="x.whl!grouped_gemm_backend.cpython-311-x86_64-linux-gnu.so",
                        size=100, entries=())  # fmt: skip
    owed = ArchSet("default", parse_arch_list("9.0", source="test"))
    report = BuildReport(matrix=Path("matrix.yaml"), target_version=(2, 10), built_against="2.13.0+cpu",
                         variants=(_variant((so,), owed),))  # fmt: skip
    title = "default-cu130: grouped_gemm_backend.cpython-311-x86_64-linux-gnu.so"
    for console in (
        Console(file=io.StringIO(), width=80),  # a file or a CI log
        Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None),
        Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None),
    ):
        print_build(report, console)
        lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
        assert title in lines, lines[:4]
        assert "MISSING" in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_wheel_line_names_a_wheel_below_the_working_folder_relatively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary's wheel line at 80 columns: `/home/me/project/dist/<long name>.whl` did not
    fit beside its label, so it took a line of its own; named from the working folder
    (`dist/<name>.whl`) it fits, and pip takes it from here. A wheel elsewhere keeps its
    absolute path; the working folder is compared by its real path."""
    real = tmp_path / "real"
    (real / "dist").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path / "link")
    name = "wheelforge_kernels-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
    inside = dataclasses.replace(_variant((), None), wheel=real / "dist" / name)
    report = BuildReport(matrix=Path("matrix.yaml"), target_version=(2, 10), built_against="2.13.0+cpu",
                         variants=(inside,))  # fmt: skip
    out = io.StringIO()
    terminal = Console(file=out, width=80, force_terminal=True, color_system=None)
    print_build(report, terminal)
    assert f"wheel dist/{name}\n" in out.getvalue()
    assert out.getvalue().count(f"dist/{name}") == 2  # and the next step's pip install
    elsewhere = dataclasses.replace(inside, wheel=tmp_path / "out" / name)
    report = dataclasses.replace(report, variants=(elsewhere,))
    out = io.StringIO()
    print_build(report, Console(file=out, width=200))
    assert f"wheel {tmp_path / 'out' / name}\n" in out.getvalue()
