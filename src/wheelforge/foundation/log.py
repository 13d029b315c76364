"""The one logger: steps with timing, verbose command echo, warnings, errors (details first,
the verdict last), and in GitHub Actions its log groups and annotations; compile progress is
progress.py's, on this console. Output goes to stderr through rich, which honours NO_COLOR and
plain (non-terminal) output; stdout is kept for machine-readable results such as ``--json``
and ``--report -``."""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from wheelforge.foundation.diagnostics import Diagnostic, relative_to
from wheelforge.foundation.errors import WheelforgeError

CiMode = Literal["github"]


class Held:
    """What one variant built beside others printed, kept to be printed whole when it is done
    (build/together.py): its lines stay together, in the order it printed them."""

    def __init__(self) -> None:
        self.kept: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self._lock = threading.Lock()

    def keep(self, objects: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        with self._lock:
            self.kept.append((objects, kwargs))

    def release(self) -> None:
        """Print what was kept, as one write (the console's buffer: a block no other thread's
        line cuts), above a live line if one is shown."""
        with self._lock:
            kept, self.kept = self.kept, []
        with console:
            for objects, kwargs in kept:
                Console.print(console, *objects, **kwargs)


_holding = threading.local()


class _Console(Console):
    """The logger's console; a thread in held() has its prints kept (Held), not printed."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        held: Held | None = getattr(_holding, "held", None)
        if held is not None:
            held.keep(objects, kwargs)
            return
        super().print(*objects, **kwargs)


# The fewest columns a screen is laid out for: a terminal that says fewer folds the lines itself.
MIN_COLUMNS = 20


def console_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a rich Console reads its width from, with COLUMNS made sane: rich takes
    COLUMNS=0 as a width of 0 and prints nothing at all, not even the error (issue 39); 0 is
    no width (the terminal's own size then), and a width under MIN_COLUMNS is MIN_COLUMNS."""
    env = dict(os.environ if environ is None else environ)
    columns = env.get("COLUMNS", "")
    if columns.isdigit():
        if int(columns) == 0:
            del env["COLUMNS"]
        elif int(columns) < MIN_COLUMNS:
            env["COLUMNS"] = str(MIN_COLUMNS)
    return env


console = _Console(stderr=True, highlight=False, soft_wrap=True, _environ=console_environ())


@contextmanager
def held(kept: Held) -> Iterator[Held]:
    """Within this block what this thread prints on the console is kept in *kept*."""
    before = getattr(_holding, "held", None)
    _holding.held = kept
    try:
        yield kept
    finally:
        _holding.held = before


@contextmanager
def unheld() -> Iterator[None]:
    """Within this block this thread's prints go out at once, held() or not (a live line
    started or stopped: rich prints its control codes)."""
    before = getattr(_holding, "held", None)
    _holding.held = None
    try:
        yield
    finally:
        _holding.held = before


def holding() -> Held | None:
    """What this thread's prints are kept in now (held()), if anything."""
    found: Held | None = getattr(_holding, "held", None)
    return found


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


# What a terminal would act on instead of showing: C0 and C1 control characters and DEL (an
# ESC in a wheel member's name cleared the screen or recoloured it; 0x9b is CSI to a terminal
# that reads 8-bit controls), a newline too (one line); and the invisible format characters
# that reorder or hide what it shows: bidirectional marks, embeddings, overrides and isolates
# (Trojan Source, CVE-2021-42574), zero-width characters, line and paragraph separators, the BOM.
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


# A run of characters without a space longer than this is shown cut in its middle: a wheel
# member's name can be 65,535 characters, a literal in setup.py 400 kB; no command argument or
# path is this long.
RUN_CAP = 1000
_RUN_RE = re.compile(rf"\S{{{RUN_CAP + 1},}}")


def printable(text: str) -> str:
    """*text* with every control character written as ``\\xNN`` and every invisible format
    character as ``\\uNNNN``, so names that come from files (wheel members, paths) reach the
    terminal as text, never as escape sequences or reordered; a run of over RUN_CAP characters
    without a space is cut in its middle, its length said."""
    return _RUN_RE.sub(_cut, _CONTROL_RE.sub(_escaped, text))


def _cut(match: re.Match[str]) -> str:
    run = match[0]
    return f"{run[:120]}…{run[-60:]} ({len(run):,} characters)"


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _shown(message: str) -> str:
    return escape(printable(message))


_WORD_RE = re.compile(r"\S+\s*")
_INDENT_RE = re.compile(r"^ *(?:- )?")  # a list item's continuation aligns with its text


def words_wrapped(text: Text, width: int) -> Text:
    """*text* folded at its spaces to *width* columns and never inside a word, so a path or a
    command in it stays whole on one line (rich folds a word that does not fit at the
    terminal's width, mid-path; a word wider than the screen gets a line of its own, which the
    terminal folds as it must). A line's continuation keeps the line's own indentation."""
    out = Text(end=text.end)
    for n, line in enumerate(text.split("\n", allow_blank=True)):
        if n:
            out.append("\n")
        plain = line.plain
        lead = _INDENT_RE.match(plain)[0]  # type: ignore[index]  # always matches
        indent = " " * len(lead) if len(lead) * 2 < width else ""
        breaks: list[int] = []
        column = len(plain) - len(plain.lstrip(" "))  # where the first word starts
        for word in _WORD_RE.finditer(plain):
            if column > len(indent) and column + cell_len(word[0].rstrip()) > width:
                breaks.append(word.start())
                column = len(indent)
            column += cell_len(word[0])
        for i, piece in enumerate(line.divide(breaks)):
            piece.rstrip()
            if i:
                out.append("\n" + indent)
            out.append_text(piece)
    return out


def say(markup: str | Text, *, on: Console | None = None, style: str | None = None) -> None:
    """Print one message on the console *on* (the logger's by default): at a terminal folded at
    its spaces to the terminal's width (words_wrapped), elsewhere (a pipe, a file, a CI log)
    on one line, never folded."""
    target = on or console
    text = target.render_str(markup, highlight=False) if isinstance(markup, str) else markup
    if style:
        text.stylize(style)
    if target.is_terminal and not target.is_dumb_terminal:
        text = words_wrapped(text, target.width)
    target.print(text, soft_wrap=True, highlight=False)


def info(message: str) -> None:
    if not _quiet:
        say(_shown(message))


def detail(message: str) -> None:
    """Shown with -v."""
    if _verbosity >= 1:
        console.print(f"[dim]{_shown(message)}[/dim]")


def warning(message: str) -> None:
    if _ci == "github":
        # The runner shows the annotation as a "Warning:" line in the log and on the run's page.
        annotate(Diagnostic(file="", severity="warning", message=message))
    else:
        say(f"[yellow]warning:[/yellow] {_shown(message)}")


def error(message: str, details: str | None = None, problems: Sequence[str] = ()) -> None:
    """The details first, the verdict last: however many lines of compiler output a failure
    brings, the screen ends with the ``error:`` line (which names the log when there is one).
    *problems* (several errors of one file, in its line order) are each an ``error:`` line of
    their own, before the verdict that counts them (in place of *details*, which repeat them)."""
    if details and not problems:
        for line in details.splitlines():
            console.print(f"  {_shown(line)}", style="dim")
    for problem in problems:
        say(f"[bold red]error:[/bold red] {_shown(problem)}")
    say(f"[bold red]error:[/bold red] {_shown(message)}")


def failed(exc: WheelforgeError) -> None:
    """*exc* on the screen (error()) and, in GitHub Actions, as annotations; with -v, the
    traceback of an error that is a bug of wheelforge's (errors.RuleBug), first."""
    if exc.traceback and _verbosity >= 1:
        for line in exc.traceback.splitlines():
            console.print(f"  {_shown(line)}", style="dim")
    error(exc.message, exc.details, exc.problems)
    annotate_error(exc)


def command(argv: Sequence[str]) -> None:
    """Echo a command about to run (with -v)."""
    if _verbosity >= 1:
        console.print(f"[dim]$ {_shown(shlex.join(argv))}[/dim]")


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
        say(f"[bold cyan]▸[/bold cyan] {_shown(title)}")
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        say(f"  [red]✗[/red] {_shown(title)} failed after {time.perf_counter() - start:.1f}s")
        raise
    detail(f"  {title}: {time.perf_counter() - start:.1f}s")
