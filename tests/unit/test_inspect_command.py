"""``inspect``'s quick path (cli/inspect.quick, asked by entry.py before click):
it prints what the CLI prints, exits as the CLI exits, and leaves to the CLI every command line
that is more than paths and ``--json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wheelforge.cli import app as cli
from wheelforge.cli.entry import main
from wheelforge.cli.inspect import quick
from wheelforge.foundation.errors import BinaryFormatError

DATA = Path(__file__).resolve().parent.parent / "data" / "fatbin"
LIBRARY = DATA / "sm80_sm90a_ptx90.so"


def _both(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int, str, str], ...]:
    """(exit code, stdout, stderr) of the quick path, then of the CLI, on *args*."""
    runs = []
    for run in (lambda: quick(args), lambda: cli.main(["inspect", *args])):
        code = run()
        out, err = capsys.readouterr()
        runs.append((code, out, err))
    return tuple(runs)


@pytest.mark.parametrize(
    "args",
    [
        [str(LIBRARY)],
        ["--json", str(LIBRARY)],
        [str(LIBRARY), "--json"],
        [str(DATA)],  # a folder of them
        [str(DATA / "no_cuda.so"), str(LIBRARY)],
    ],
)
def test_the_quick_path_prints_what_the_cli_prints(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fast, full = _both(args, capsys)
    assert fast == full
    assert fast[0] == 0 and fast[1]
    if "--json" in args:
        assert json.loads(fast[1])["files"]


def test_a_wheel_and_its_members(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    wheel = tmp_path / "demo-1.0-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(LIBRARY, "demo/_C.abi3.so")
        archive.write(DATA / "sm75_lz4.so", "demo/libextra.so")
        archive.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\n")
    fast, full = _both([str(wheel)], capsys)
    assert fast == full
    assert "demo/_C.abi3.so" in fast[1] and "where its 2 CUDA binaries load" in fast[1]


@pytest.mark.parametrize(
    "name", ["missing.so", "not-elf.txt", "folder-link"], ids=["missing", "not-elf", "dangling"]
)
def test_bad_paths_fail_as_the_cli_fails(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    if name == "not-elf.txt":
        path.write_text("hello\n")
    elif name == "folder-link":
        path.symlink_to(tmp_path / "gone")
    fast, full = _both([str(path)], capsys)
    assert fast == full
    code, out, err = fast
    assert code == (BinaryFormatError.exit_code if name == "not-elf.txt" else 2)
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [[], ["-v", "x.so"], ["--help"], ["--", "x.so"], ["--jsn", "x.so"], ["-"], ["--json"]],
)
def test_anything_but_paths_and_json_is_the_clis(args: list[str]) -> None:
    assert quick(args) is None


def test_entry_answers_inspect_without_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(_argv: object) -> int:
        raise AssertionError("cli.main ran")

    monkeypatch.setattr(cli, "main", refuse)
    assert main(["inspect", str(LIBRARY)]) == 0
    assert "sm_90a" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"cli\.main ran"):
        main(["inspect", "-v", str(LIBRARY)])


def test_an_interrupt_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from wheelforge.binaries import inspection

    def interrupted(_paths: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(inspection, "inspect_paths", interrupted)
    assert quick([str(LIBRARY)]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_a_path_named_like_an_emoji_code_stays_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ":thumbs_up:.so"
    shutil.copy(LIBRARY, path)
    assert quick([str(path)]) == 0
    assert ":thumbs_up:.so" in capsys.readouterr().out
