"""Tables printed into a pipe or a CI log come out whole, not folded to rich's 80 columns."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from wheelforge.cli.console import print_whole

CELL = "162 passed, 0 failed, 0 skipped"


def wide_table() -> Table:
    table = Table(title="wheelforge test")
    for name in ("torch", "GPU", "default-cu130", "sm80-cu130", "sm90-cu130"):
        table.add_column(name)
    table.add_row("2.14.1+cu130", "yes", CELL, CELL, CELL)
    return table


def printed(console: Console) -> list[str]:
    print_whole(wide_table(), console)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


def test_a_pipe_gets_the_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = printed(Console(file=io.StringIO(), width=80))
    assert sum(line.count(CELL) for line in lines) == 3
    assert max(map(len, lines)) > 80


def test_a_terminal_keeps_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = printed(Console(file=io.StringIO(), width=80, force_terminal=True, no_color=True))
    assert sum(line.count(CELL) for line in lines) < 3  # folded to the terminal's width


def test_columns_never_cuts_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS=80 into a pipe (issue 33): the table comes out whole, wider than 80 where it must,
    never a cell cut or folded mid-name."""
    monkeypatch.setenv("COLUMNS", "80")
    lines = printed(Console(file=io.StringIO(), width=80))
    assert sum(line.count(CELL) for line in lines) == 3
    assert max(map(len, lines)) > 80


def test_a_line_into_a_pipe_is_never_folded(capsys: pytest.CaptureFixture[str]) -> None:
    """The build summary's sentences, written to a file: one line each, whatever their length
    (rich folds at 80 columns where it sees no terminal: "... no\\nlibtorch C++ symbols")."""
    from wheelforge.cli.console import output_console

    sentence = (
        "stable ABI ok: 62 shim functions, the newest from torch 2.10 (target 2.10), no "
        "libtorch C++ symbols, 1 limited-API Python symbols"
    )
    output_console().print(sentence)
    assert capsys.readouterr().out == sentence + "\n"
