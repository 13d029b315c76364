"""What a download shows while a person waits (toolchain/downloads.py): pip's lines read for
what it fetches, the bytes from the file growing in pip's temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from wheelforge.toolchain import downloads

# What pip 23-25 print for `pip install torch==2.12.0` where stdout is no terminal.
PIP_LINES = [
    "Looking in indexes: https://pypi.org/simple",
    "Collecting torch==2.12.0",
    "  Downloading torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl (900.1 MB)",
    "     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 900.1/900.1 MB 45.0 MB/s eta 0:00:00",
    "Processing /opt/pypi/files/mpmath-1.3.0-py3-none-any.whl (from sympy->torch==2.12.0)",
    "  Using cached filelock-3.16.1-py3-none-any.whl (16 kB)",
    "Installing collected packages: mpmath, filelock, torch",
    "Successfully installed filelock-3.16.1 mpmath-1.3.0 torch-2.12.0",
]


def test_without_a_terminal_each_download_is_a_line_with_its_size_and_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    progress = downloads.PipProgress(tmp_path)
    assert progress.live is None  # no terminal in a test
    for line in PIP_LINES:
        progress.line(line)
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "    downloaded torch 2.12.0: 900.1/900.1 MB at 45.0 MB/s",
        "    cached filelock 3.16.1 (16 kB)",
        "    installing 3 packages",
        "    installed 3 packages",
    ]


def test_a_long_download_is_reported_from_the_file_pip_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(downloads, "REPORT_EVERY_S", 0.0)
    monkeypatch.setattr(downloads, "TICK_S", 0.0)
    (tmp_path / "earlier.whl").write_bytes(b"e" * 1000)  # there before: not this download's
    progress = downloads.PipProgress(tmp_path)
    progress.line(PIP_LINES[2])
    (tmp_path / "pip-unpack-x").mkdir()
    (tmp_path / "pip-unpack-x" / "torch.whl").write_bytes(b"t" * 2_000_000)
    progress.tick()
    progress.close()
    err = capsys.readouterr().err
    assert "… torch 2.12.0: 2.0 MB of 900.1 MB in 0:00" in err


def test_sizes_are_pips_si_units() -> None:
    assert downloads.si(900_100_000) == "900.1 MB" and downloads.si(1_200_000_000) == "1.2 GB"
    assert downloads._size("900.1", "M") == 900_100_000
    assert downloads._size("16", "k") == 16_000
    assert downloads._size("1.2", "G") == 1_200_000_000


def test_the_install_is_measured_in_the_folder_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(downloads, "REPORT_EVERY_S", 0.0)
    monkeypatch.setattr(downloads, "INSTALL_TICK_S", 0.0)
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    progress = downloads.PipProgress(tmp_path / "pip", env)
    progress.line("Installing collected packages: mpmath, filelock, torch")
    (env / "lib" / "torch.so").write_bytes(b"t" * 3_000_000)
    progress.tick()
    progress.line("Successfully installed filelock-3.16.1 mpmath-1.3.0 torch-2.12.0")
    progress.close()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("    … installing 3 packages: 3.0 MB written in 0:00")
    assert err[1].startswith("    installed 3 packages: 3.0 MB in 0:0")
