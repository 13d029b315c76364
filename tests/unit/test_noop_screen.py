"""The no-op build's "is up to date" line: the wheel's name and its folder each whole on a line
at 80 and 100 columns, never folded mid-name (issue 33)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from wheelforge.build.variant import say_up_to_date
from wheelforge.foundation import log

NAME = "wheelforge_kernels-0.1.0+cu130.sm80-cp310-abi3-manylinux_2_34_x86_64.whl"
FOLDER = "/work/scratch/someone/projects/kernels/dist"


@pytest.mark.parametrize("width", [80, 100])
def test_up_to_date_at_a_terminal_keeps_the_name_and_the_folder_whole(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(log, "console", console)
    say_up_to_date(Path(FOLDER, NAME))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)  # the terminal folds nothing
    assert lines[0].split()[0] == NAME  # whole, after the indent
    assert f"  in {FOLDER}" in lines
    assert " ".join(out.getvalue().split()) == f"{NAME} is up to date in {FOLDER}"


def test_up_to_date_into_a_pipe_is_two_whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(log, "console", Console(file=out, width=80, color_system=None))
    say_up_to_date(Path(FOLDER, NAME))
    assert out.getvalue().splitlines() == [f"  {NAME} is up to date", f"  in {FOLDER}"]


def test_a_name_longer_than_the_screen_is_folded_only_by_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name too long for any line gets one of its own: no newline inside it."""
    out = io.StringIO()
    monkeypatch.setattr(log, "console", Console(file=out, width=40, force_terminal=True))
    say_up_to_date(Path(FOLDER, NAME))
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert f"  {NAME}\n" in text
    assert "is up to date" in text
