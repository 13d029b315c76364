"""The one logger: steps with timing, verbose command echo, warnings. Output goes to stderr
through rich, which honours NO_COLOR and plain (non-terminal) output; stdout is kept for
machine-readable results such as ``--json``."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape

console = Console(stderr=True, highlight=False, soft_wrap=True)
_verbosity = 0


def set_verbosity(level: int) -> None:
    global _verbosity  # noqa: PLW0603 - one process-wide setting, set once by the CLI
    _verbosity = level


def verbosity() -> int:
    return _verbosity


def info(message: str) -> None:
    console.print(escape(message))


def detail(message: str) -> None:
    """Shown with -v."""
    if _verbosity >= 1:
        console.print(f"[dim]{escape(message)}[/dim]")


def warning(message: str) -> None:
    console.print(f"[yellow]warning:[/yellow] {escape(message)}")


def error(message: str, details: str | None = None) -> None:
    console.print(f"[bold red]error:[/bold red] {escape(message)}")
    if details:
        for line in details.splitlines():
            console.print(f"  {escape(line)}", style="dim")


def command(argv: Sequence[str]) -> None:
    """Echo a command about to run (with -v)."""
    if _verbosity >= 1:
        console.print(f"[dim]$ {escape(shlex.join(argv))}[/dim]")


@contextmanager
def step(title: str) -> Iterator[None]:
    """A named step: prints its start and, when it ends, how long it took."""
    console.print(f"[bold cyan]▸[/bold cyan] {escape(title)}")
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        console.print(
            f"  [red]✗[/red] {escape(title)} failed after {time.perf_counter() - start:.1f}s"
        )
        raise
    detail(f"  {title}: {time.perf_counter() - start:.1f}s")
