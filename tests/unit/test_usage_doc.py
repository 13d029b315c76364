"""docs/usage.md lists every flag of every command, and no flag a command does not have: the
flags are read from click's own parameters, so a flag added or removed without its line fails
here (issue 33: --memory-limit, --dist-scheduler, check --abi and every flag of matrix, toolkit
and inspect were missing)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from wheelforge.cli.app import cli

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
_HEADING_RE = re.compile(r"^(#+) (.*)$")
_COMMAND_RE = re.compile(r"`wheelforge ([a-z][a-z -]*)")
_CELL_FLAG_RE = re.compile(r"`([^`]*)`")
_FLAG_RE = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def commands(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


COMMANDS = dict(commands())


def click_flags(command: click.Command) -> set[str]:
    flags = {
        flag
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
    }
    return flags - {"-h", "--help"}


def command_of(heading: str) -> str | None:
    """The command a heading names (its first `wheelforge ...` span), the longest that fits."""
    found = _COMMAND_RE.search(heading)
    if found is None:
        return None
    words = found[1].split()
    for n in range(len(words), 0, -1):
        if " ".join(words[:n]) in COMMANDS:
            return " ".join(words[:n])
    return None


def documented(text: str) -> dict[str, set[str]]:
    """Per command, the flags in the first cells of the tables under its headings (until the
    next heading of any level)."""
    found: dict[str, set[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if heading := _HEADING_RE.match(line):
            current = command_of(heading[2])
            if current is not None:
                found.setdefault(current, set())
            continue
        if current is None or not line.startswith("|") or set(line) <= set("|- :"):
            continue
        first = re.split(r"(?<!\\)\|", line)[1]  # a cell's \| is no column
        if first.strip() in ("flag", "variable"):
            continue
        for span in _CELL_FLAG_RE.findall(first):
            found[current].update(_FLAG_RE.findall(span))
    return found


DOCUMENTED = documented(USAGE.read_text())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_usage_lists_exactly_the_flags_of_each_command(name: str) -> None:
    assert name in DOCUMENTED, f"docs/usage.md has no heading naming `wheelforge {name}`"
    have = click_flags(COMMANDS[name])
    listed = DOCUMENTED[name]
    assert not have - listed, f"wheelforge {name}: not in docs/usage.md: {sorted(have - listed)}"
    assert not listed - have, f"wheelforge {name}: in docs/usage.md only: {sorted(listed - have)}"


def test_the_reader_finds_flags_in_a_table_under_a_heading() -> None:
    """The test's own reader, on a page it writes: a table row's first cell, this heading only."""
    page = (
        "## `wheelforge cache prune [NAME]...`\n\n| flag | meaning |\n| --- | --- |\n"
        "| `--unused-for DAYS` | x `--not-this` |\n| `-v, --verbose` | y |\n"
        "## Exit codes\n| `--nor-this` | z |\n"
    )
    assert documented(page) == {"cache prune": {"--unused-for", "-v", "--verbose"}}
