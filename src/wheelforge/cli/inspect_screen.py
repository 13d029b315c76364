"""``inspect``'s screen: one table per binary, its archs grouped by kind with their sizes, the
"loads on" lines below it, and a wheel's binaries together; the table of variant wheels. Apart
from build's so that ``inspect`` loads only what this screen needs (cli/inspect.py).

The "loads on" lines: per GPU generation whether its kernels run as SASS, are JIT-compiled from
PTX, or have no kernel image (binaries/loadson.py decides); the PTX ISA and the driver its JIT
needs; the a/f targets that give no forward compatibility."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from wheelforge.binaries.elf import split_member
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.loadson import LoadsOn
from wheelforge.cli.console import output_console, print_whole
from wheelforge.configuration.bytesizes import format_size as human_size
from wheelforge.foundation import log
from wheelforge.foundation.log import printable

if TYPE_CHECKING:  # the table of variant wheels is shown only when a wheel was given
    from wheelforge.packaging.wheel_variants import VariantCheck


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
        print_whole(table, console)
        if found := binary.loads_on:
            # Below the table, which keeps its 80 columns, as lines of their own: folded at the
            # terminal's width at spaces (a table's caption folded at the table's width, 66
            # columns, on a wider screen too), whole in a pipe.
            for line in loads_on_lines(found):
                log.say(Text(line), on=console)
            if container:
                by_wheel.setdefault(container, []).append(found)
    _wheel_loads(by_wheel.pop(shown or "", []), shown, console)


def _wheel_loads(found: list[LoadsOn], container: str | None, console: Console) -> None:
    """After a wheel's binaries, where they load together (when there are two or more)."""
    if container and len(found) > 1:
        print_whole(wheel_table(container, found), console)


_SAID = (
    ("sass", "runs SASS on"),
    ("ptx", "JIT-compiles PTX on"),
    ("partial", "some kernels only on"),
    ("none", "no kernel image on"),
)


def loads_on_lines(found: LoadsOn) -> list[str]:
    """What *found* says, one line per kind of verdict and fact."""
    lines = []
    for verdict, words in _SAID:
        gpus = [g for g in found.gpus if g.verdict == verdict]
        if not gpus:
            continue
        if verdict == "partial":
            shown = ", ".join(f"{g.gpu} ({g.units} of {g.of} units)" for g in gpus)
        else:
            shown = " ".join(g.gpu for g in gpus)
        lines.append(f"{words}: {shown}")
    for isa in found.ptx_isa:
        if isa.release is None:
            lines.append(f"PTX ISA {isa.version}: no release in the table writes it")
        elif isa.driver:
            lines.append(
                f"PTX ISA {isa.version} (CUDA {isa.release}): JIT needs driver >= {isa.driver}"
            )
        else:
            lines.append(f"PTX ISA {isa.version} (CUDA {isa.release})")
    if found.no_forward:
        lines.append(
            f"no forward compatibility: {', '.join(found.no_forward)} (no plain PTX in their "
            "translation units: newer GPUs get no image from them)"
        )
    return lines


def wheel_table(container: str, found: Sequence[LoadsOn]) -> Table:
    """A wheel's binaries together, one row per GPU generation: how many run SASS there, JIT
    PTX, run only some kernels, have no kernel image (the names when few)."""
    title = f"{Path(container).name}: where its {len(found)} CUDA binaries load"
    table = Table(title=Text(printable(title)), title_justify="left")
    for column in ("GPU", "SASS", "PTX JIT", "partial", "no image"):
        table.add_column(column, justify="left" if column in ("GPU", "no image") else "right")
    for row, gpu in enumerate(found[0].gpus):
        verdicts = [f.gpus[row].verdict for f in found]
        missing = [
            Path(f.path.rsplit("!", 1)[-1]).name for f in found if f.gpus[row].verdict == "none"
        ]
        names = ", ".join(missing)
        if not missing or len(names) > 40:  # a count keeps the table within 80 columns
            names = str(len(missing))
        counts = (str(verdicts.count(v)) for v in ("sass", "ptx", "partial"))
        table.add_row(gpu.gpu, *counts, Text(printable(names)))
    return table


def variant_checks_table(checks: Sequence[VariantCheck]) -> Table:
    """Variant wheels: what variant.json declares, what the binaries carry, what disagrees."""
    table = Table(title="PEP 825 variant wheels (experimental)", title_justify="left")
    for column in ("wheel", "label", "variant.json", "binaries carry", "status"):
        table.add_column(column)
    for c in checks:
        status = (
            "[green]ok[/green]" if not c.problems else "[red]" + "\n".join(c.problems) + "[/red]"
        )
        name = c.wheel.rsplit("/", 1)[-1]
        declared = "\n".join(c.properties) or "(none: null variant)"
        table.add_row(name, c.label, declared, "\n".join(c.derived_sm_arch) or "-", status)
    return table
