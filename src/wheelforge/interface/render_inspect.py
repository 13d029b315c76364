"""``inspect``'s screen: one table per binary, its archs grouped by kind with their sizes, the
"loads on" lines below it (render_loadson.py), and a wheel's binaries together. Apart from
render.py so that ``inspect`` loads only what this screen needs (interface/inspect_command.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from wheelforge.binaries.elf import split_member
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.loadson import LoadsOn
from wheelforge.configuration.bytesizes import format_size as human_size
from wheelforge.foundation.log import printable
from wheelforge.interface.console import output_console, print_whole
from wheelforge.interface.render_loadson import loads_on_lines, wheel_table


def print_inspect(reports: Sequence[BinaryContents], console: Console | None = None) -> None:
    """One table per binary: its archs grouped by kind, with sizes (on stdout's console by
    default)."""
    console = console or output_console()
    if not reports:
        console.print(
            "no ELF files found: the files, wheels and folders given hold no shared objects or "
            "object files"
        )
        return
    shown = None
    by_wheel: dict[str, list[LoadsOn]] = {}
    for binary in reports:
        container, member = split_member(binary.path)
        if container and container != shown:
            _wheel_loads(by_wheel.pop(shown or "", []), shown, console)
            # A wheel's name on a line of its own (it fits 80 columns), its members below it.
            console.print(Text(printable(Path(container).name), style="bold", overflow="fold"))
            console.print(
                Text(printable(f"in {Path(container).parent}"), style="dim", overflow="fold")
            )
            shown = container
        title = f"{member if container else binary.path} ({human_size(binary.size)})"
        # Text, not a string: a member's name is data, never markup or escape sequences.
        table = Table(title=Text(printable(title)), title_justify="left")
        for column in ("kind", "arch", "entries", "stored", "decompressed", "compression"):
            table.add_column(
                column,
                justify="right" if column in ("entries", "stored", "decompressed") else "left",
            )
        for s in binary.by_arch:
            table.add_row(
                s.kind.upper() if s.kind == "ptx" else "SASS",
                s.arch,
                str(s.entries),
                human_size(s.stored),
                human_size(s.size),
                ", ".join(s.compressions),
            )
        if not binary.entries:
            table.add_row("-", "no CUDA code", "0", "-", "-", "-")
        if found := binary.loads_on:  # below the table, which keeps its 80 columns
            table.caption = "\n".join(loads_on_lines(found))
            table.caption_justify = "left"
            if container:
                by_wheel.setdefault(container, []).append(found)
        print_whole(table, console)
    _wheel_loads(by_wheel.pop(shown or "", []), shown, console)


def _wheel_loads(found: list[LoadsOn], container: str | None, console: Console) -> None:
    """After a wheel's binaries, where they load together (when there are two or more)."""
    if container and len(found) > 1:
        print_whole(wheel_table(container, found), console)
