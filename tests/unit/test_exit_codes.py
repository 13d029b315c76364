"""Exit codes by class (docs/usage.md "Exit codes"); the integration tests produce 3 (a compile
error) and 4 (a missing arch, an ABI violation, a size budget) from real builds."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from tests.unit import fakes
from wheelforge.binaries import checkwheels as running_check
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.cli.app import main
from wheelforge.cli.check_screen import check_table
from wheelforge.cli.matrix_screen import variants_table
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import errors
from wheelforge.planning import variants
from wheelforge.planning.plan import wheel_version

Project = Callable[..., Path]
WHEEL = "wheelforge_kernels-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"


@pytest.mark.parametrize(
    ("cls", "code"),
    [(errors.ConfigError, 2), (errors.ToolError, 3), (errors.BuildError, 3), (errors.VerificationError, 4),
     (errors.SizeBudgetError, 4), (errors.BinaryFormatError, 4), (errors.EnvironmentProblem, 5), (errors.RuleBug, 70)],
)  # fmt: skip
def test_exit_code_is_a_class_attribute(cls: type[errors.WheelforgeError], code: int) -> None:
    assert cls.exit_code == code


def test_no_toolkit_is_an_environment_problem_exit_5(
    capsys: pytest.CaptureFixture[str], project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("wheelforge.toolchain.toolkits.discover", lambda cache, pythons=(): [])
    assert main(["build", "--matrix", str(project()), "--offline"]) == 5
    err = capsys.readouterr().err
    assert "which is not installed (found: none)" in err and "wheelforge toolkit install" in err


def test_interrupted_exit_130(
    capsys: pytest.CaptureFixture[str], project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(settings: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("wheelforge.build.orchestration.run_build", interrupted)
    assert main(["build", "--matrix", str(project())]) == 130
    assert "error: interrupted" in capsys.readouterr().err


def test_bad_size_budget_flag_exit_2(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    assert main(["build", "--matrix", str(project()), "--size-budget", "lots"]) == 2
    assert (
        "error: --size-budget: 'lots' is not a size; write it like 100MiB"
        in capsys.readouterr().err
    )


def _render(renderable: object) -> str:
    console = Console(width=80, file=io.StringIO(), force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_check_table_fits_80_columns_without_cutting() -> None:
    wheel = f"/home/runner/work/project/project/dist/{WHEEL}"
    checks = [BinaryCheck(path=f"{wheel}!wheelforge_kernels/_C.abi3.so", shims=("a", "b"), newest_shim=(2, 10),
                          python_symbols=("PyInit",), violations=())]  # fmt: skip
    text = _render(check_table(running_check.result_of(checks)))
    assert "…" not in text
    assert WHEEL in text  # the wheel's name on one line, not wrapped inside
    assert "wheelforge_kernels/_C.abi3.so" in text
    assert max(len(line) for line in text.splitlines() if WHEEL not in line) <= 80


def test_matrix_table_fits_80_columns_without_cutting(project: Project) -> None:
    matrix = load_matrix(project())
    default = ArchSet("default", parse_arch_list("7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX", source="t"))
    matrix = dataclasses.replace(matrix, arch_sets=(default,))
    listed = variants.expand(matrix, [fakes.toolkit()])
    versions = [wheel_version(matrix, v) for v in listed]
    text = _render(variants_table(listed, matrix, versions=versions))
    assert "…" not in text and "default-cu130" in text and "13.0.88" in text
    assert "12.0+PTX" in text  # archs wrap between archs, never inside one
    assert max(len(line) for line in text.splitlines()[1:]) <= 80


def test_inspect_tables_fit_80_columns(tmp_path: Path) -> None:
    import zipfile

    from wheelforge.binaries.inspection import inspect_paths
    from wheelforge.cli.inspect_screen import print_inspect

    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(
            Path(__file__).parents[1] / "data" / "fatbin" / "sm80_sm90a_ptx90.so",
            "wheelforge_kernels/_C.abi3.so",
        )
    console = Console(width=80, file=io.StringIO(), force_terminal=False)
    print_inspect(inspect_paths([wheel]), console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in text and WHEEL in text and "wheelforge_kernels/_C.abi3.so (" in text
    assert max(len(line) for line in text.splitlines()) <= 80
