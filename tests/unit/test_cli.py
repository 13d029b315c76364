from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge import __version__
from wheelforge.cli.app import main

Project = Callable[..., Path]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and __version__ in out


def test_bad_archs_flag_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], project: Project
) -> None:
    code, _, err = run(capsys, "build", "--matrix", str(project()), "--archs", "7.5 sm_90")
    assert code == 2
    lines = err.strip().splitlines()
    assert lines == ["error: --archs: 'sm_90' is not a CUDA arch; did you mean '9.0'?"]


def test_bad_env_archs(
    capsys: pytest.CaptureFixture[str], project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;Hoper")
    code, _, err = run(capsys, "build", "--matrix", str(project()))
    assert code == 2
    assert "error: TORCH_CUDA_ARCH_LIST: 'Hoper' is not a CUDA arch; did you mean 'Hopper'?" in err


def test_missing_matrix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "build", "--matrix", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml was not found" in err


def test_matrix_errors_are_listed(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    path = project("package: 3\nextension: {}\ntorch: '>=2.10'\narch-sets: '9.0'\nextra: 1\n")
    code, _, err = run(capsys, "build", "--matrix", str(path))
    assert code == 2
    assert err.splitlines()[-1].startswith("error: ")  # the verdict last, its details above
    assert "package must be a mapping" in err
    assert "unknown key 'extra'" in err
    assert "extension needs 'name'" in err


@pytest.mark.parametrize(
    "argv",
    [("build", "--jobs", "0"), ("build", "--no-such-flag"), ("frobnicate",), ("inspect",)],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and "--help" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("cache", "list"),
        ("cache", "prune", "--all"),
        ("toolkit", "list"),
        ("toolkit", "install", "13.0"),
        ("matrix",),
        ("test",),
        ("build",),
    ],
)
def test_every_cache_dir_refuses_a_file_the_same_way(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """--cache-dir is one shared option (cli/options.py): a file is one line, exit 2,
    before anything is read or written."""
    (tmp_path / "a-file").write_text("")
    code, _, err = run(capsys, *argv, "--cache-dir", str(tmp_path / "a-file"))
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith("error: Invalid value for '--cache-dir': ")
    assert f"{tmp_path / 'a-file'} is a file, not a folder; pass --cache-dir a folder" in line
