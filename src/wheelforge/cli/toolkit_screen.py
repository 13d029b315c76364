"""``wheelforge toolkit``'s screens: the toolkits found and those wheelforge can provision
(list), and the one provisioned (install). Reads result data; decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wheelforge.cli.console import output_console, print_whole
from wheelforge.configuration.archs import sm_range
from wheelforge.foundation import log
from wheelforge.foundation.log import printable

if TYPE_CHECKING:
    from wheelforge.toolchain.provision import Recipe
    from wheelforge.toolchain.toolkits import Toolkit


def toolkits_table(found: Sequence[Toolkit], provisionable: Sequence[Recipe]) -> Table:
    """Fits 80 columns: no folder and no command in a cell, where rich would cut or fold them
    (print_toolkits prints them whole below the table)."""
    table = Table(title="CUDA toolkits", title_justify="left")
    for column in ("CUDA", "archs", "host g++ up to", "how"):
        table.add_column(column)
    for t in found:
        table.add_row(str(t.version), t.describe_range(), str(t.gcc_max or "-"), t.origin)
    for r in provisionable:
        table.add_row(r.release, sm_range(r.sass), "-", f"[dim]to provision ({r.download})[/dim]")
    return table


def print_toolkits(
    found: Sequence[Toolkit], provisionable: Sequence[Recipe], console: Console | None = None
) -> None:
    """The toolkits' table (*provisionable*: the releases wheelforge can provision that none
    found is, toolchain/catalog.list_toolkits), then where each found one is and how to provision
    the others: a line each, the folder and the command whole (log.say), so they can be copied."""
    console = console or output_console()
    print_whole(toolkits_table(found, provisionable), console)
    for t in found:
        # The folder comes from $CUDA_HOME, the PATH or the cache: text, never markup or ESC.
        log.say(
            f"CUDA {t.version} ({escape(t.origin)}): {escape(printable(str(t.root)))}", on=console
        )
    if provisionable:
        log.say("provision one: [bold]wheelforge toolkit install RELEASE[/bold]", on=console)


def print_installed(found: Toolkit) -> None:
    """The toolkit ``toolkit install`` provisioned (or found there already), on one line."""
    log.info(found.describe() + (f", host compiler {found.host_cxx}" if found.host_cxx else ""))
