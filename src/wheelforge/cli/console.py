"""The console results are printed on, and printing a table whole (never cut or folded into a
pipe). Its own module, apart from the screens (build_screen.py and the others), so a command
that prints one table (``inspect``) loads rich and nothing of the other screens."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console, RenderableType
from rich.measure import Measurement

from wheelforge.foundation import log


def output_console(*, stderr: bool = False) -> Console:
    """The console results are printed on (stdout, or stderr when stdout carries a JSON
    document). Into a pipe or a file, rich would fold lines at 80 columns, inside a sentence
    ("... no\nlibtorch C++ symbols"): there a line is never folded (tables: print_whole). No
    emoji codes: wheelforge writes none, a name like ``:100:`` in a path stays text, and rich
    loads its table of codes (~0.01 s) for the first string it prints otherwise."""
    console = Console(stderr=stderr, emoji=False, _environ=log.console_environ())
    console.soft_wrap = not console.is_terminal
    return console


def print_whole(renderable: RenderableType, console: Console | None = None) -> None:
    """Print a table on *console* (stdout's by default) whole: on a terminal at its width; into
    a pipe or a CI log, where rich would fold or cut cells at 80 columns (or COLUMNS), at the
    table's own width when it is wider: a piped line is never cut, nor a path in it folded
    mid-name (``xformers/flash_attn_`` / ``3/_C.so``); COLUMNS only widens it."""
    console = console or output_console()
    if console.is_terminal:
        console.print(renderable)
        return
    unbounded = console.options.update(max_width=1 << 16)
    natural = Measurement.get(console, unbounded, renderable).maximum
    width = console.width
    console.width = max(width, natural)  # print(width=) only ever narrows
    try:
        console.print(renderable)
    finally:
        console.width = width


def shown_path(path: Path) -> str:
    """A path as a result line names it: relative to the working folder when it lies inside it
    (``dist/x.whl``: shorter, so at 80 columns it fits beside its label and is copied whole,
    and still a path pip and a shell take from here), else as it is. The folder is compared
    by its real path, so a working folder reached through a link still shortens."""
    try:
        here = Path(os.path.realpath(Path.cwd()))
        inside = Path(os.path.realpath(path)).relative_to(here)
    except (OSError, ValueError):
        return str(path)
    return str(inside) if inside.parts else str(path)
