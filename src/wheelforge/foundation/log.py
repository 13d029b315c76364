"""The one logger: steps with timing, verbose command echo, warnings, errors (details first,
the verdict last), and in GitHub Actions its log groups and annotations; compile progress is
progress.py's, on this console. Output goes to stderr through rich, which honours NO_COLOR and
plain (non-terminal) output; stdout is kept for machine-readable results such as ``--json``
and ``--report -``."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.markup import escape

from wheelforge.foundation.diagnostics import Diagnostic, relative_to
from wheelforge.foundation.errors import WheelforgeError

CiMode = Literal["github"]

console = Console(stderr=True, highlight=False, soft_wrap=True)
_verbosity = 0
_quiet = False
_ci: CiMode | None = None


def set_verbosity(level: int) -> None:
    global _verbosity  # noqa: PLW0603 - one process-wide setting, set once by the CLI
    _verbosity = level


def verbosity() -> int:
    return _verbosity


def set_quiet(quiet: bool) -> None:
    """--quiet: only warnings and errors."""
    global _quiet  # noqa: PLW0603 - one process-wide setting, set once by the CLI
    _quiet = quiet


def quiet() -> bool:
    return _quiet


def set_ci(mode: CiMode | None) -> None:
    """``github``: log groups and workflow-command annotations (GitHub Actions)."""
    global _ci  # noqa: PLW0603 - one process-wide setting, set once by the CLI
    _ci = mode


def ci() -> CiMode | None:
    return _ci


def detect_ci(env: dict[str, str] | os._Environ[str]) -> CiMode | None:
    """GitHub Actions sets GITHUB_ACTIONS=true in every step (as cibuildwheel reads it)."""
    return "github" if env.get("GITHUB_ACTIONS") == "true" else None


def live_display() -> bool:
    """Redraw in place only at an interactive terminal, never in CI logs."""
    return (
        console.is_terminal
        and not console.is_dumb_terminal
        and not _ci
        and not os.environ.get("CI")
    )


def info(message: str) -> None:
    if not _quiet:
        console.print(escape(message))


def detail(message: str) -> None:
    """Shown with -v."""
    if _verbosity >= 1:
        console.print(f"[dim]{escape(message)}[/dim]")


def warning(message: str) -> None:
    if _ci == "github":
        # The runner shows the annotation as a "Warning:" line in the log and on the run's page.
        annotate(Diagnostic(file="", severity="warning", message=message))
    else:
        console.print(f"[yellow]warning:[/yellow] {escape(message)}")


def error(message: str, details: str | None = None) -> None:
    """The details first, the verdict last: however many lines of compiler output a failure
    brings, the screen ends with the ``error:`` line (which names the log when there is one)."""
    if details:
        for line in details.splitlines():
            console.print(f"  {escape(line)}", style="dim")
    console.print(f"[bold red]error:[/bold red] {escape(message)}")


def command(argv: Sequence[str]) -> None:
    """Echo a command about to run (with -v)."""
    if _verbosity >= 1:
        console.print(f"[dim]$ {escape(shlex.join(argv))}[/dim]")


def _escape_data(text: str) -> str:
    # The workflow-command escaping of @actions/core (toolkit/packages/core/src/command.ts).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workspace() -> Path:
    """The folder annotation paths are relative to: GITHUB_WORKSPACE, else the current one."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())


def annotation(diag: Diagnostic) -> str:
    """A ``::error file=…,line=…::message`` workflow command for *diag*."""
    props = []
    if diag.file:
        props.append(f"file={_escape_property(relative_to(diag.file, workspace()))}")
        if diag.line is not None:
            props.append(f"line={diag.line}")
        if diag.column is not None:
            props.append(f"col={diag.column}")
    head = f"::{diag.severity}" + (" " + ",".join(props) if props else "")
    return f"{head}::{_escape_data(diag.message)}"


def annotate(diag: Diagnostic) -> None:
    """Print an annotation (GitHub Actions reads workflow commands from stdout and stderr)."""
    if _ci == "github":
        console.print(annotation(diag), markup=False, soft_wrap=True)


def annotate_error(exc: WheelforgeError) -> None:
    """An ``::error`` annotation per place the error points at (matrix.yaml lines, compiler
    errors), else one for its message; nothing outside GitHub Actions."""
    errors = [d for d in exc.diagnostics if d.severity == "error"]
    for diag in errors or [Diagnostic(file="", message=exc.message)]:
        annotate(diag)


@contextmanager
def group(title: str) -> Iterator[None]:
    """A collapsible log group in GitHub Actions; nothing elsewhere. Groups do not nest."""
    if _ci != "github":
        yield
        return
    console.print(f"::group::{title}", markup=False, soft_wrap=True)
    try:
        yield
    finally:
        console.print("::endgroup::", markup=False)


@contextmanager
def step(title: str) -> Iterator[None]:
    """A named step: prints its start and, when it ends, how long it took."""
    if not _quiet:
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
