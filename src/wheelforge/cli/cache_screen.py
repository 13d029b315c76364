"""`wheelforge cache list` and `cache prune`: the cache's table, and what a prune removed (or
would remove); their JSON documents are documents/cache_schema.py."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from rich.console import Console
from rich.markup import escape as _escape
from rich.table import Table
from rich.text import Text

from wheelforge.build.caches import CacheEntry, CacheListing, PruneResult
from wheelforge.cli.console import output_console, print_whole
from wheelforge.configuration.bytesizes import format_size
from wheelforge.foundation.log import printable


def last_used(when: float, now: float) -> str:
    """``2026-10-21 (40 days ago)``: the local date, and how long ago."""
    ago = max(0.0, now - when)
    if ago < 3600:
        how = f"{int(ago // 60)} min ago"
    elif ago < 2 * 86400:
        how = f"{int(ago // 3600)} h ago"
    else:
        how = f"{int(ago // 86400)} days ago"
    return f"{datetime.fromtimestamp(when).strftime('%Y-%m-%d')} ({how})"  # local time


def escape(text: str) -> str:
    """A name or path from the cache folder as text: no markup, no escape sequences (a folder
    named with ESC in it recoloured the terminal in `cache list`)."""
    return _escape(printable(text))


def entries_table(entries: Sequence[CacheEntry], *, title: str, now: float) -> Table:
    """One row per entry, and the total in the footer."""
    table = Table(title=Text(printable(title)), title_justify="left", show_footer=len(entries) > 1)
    table.add_column("kind", footer="total")
    table.add_column("name")
    table.add_column("size", justify="right", footer=format_size(sum(e.size for e in entries)))
    table.add_column("last used")
    table.add_column("path", overflow="fold")
    for e in entries:
        table.add_row(
            e.kind,
            escape(e.name),
            format_size(e.size),
            last_used(e.last_used, now),
            escape(str(e.path)),
        )
    return table


def print_listing(listing: CacheListing, console: Console | None = None) -> None:
    console = console or output_console()
    if not listing.exists or not listing.entries:
        what = "no cache at" if not listing.exists else "the cache is empty:"
        console.print(f"{what} {escape(str(listing.root))}", soft_wrap=True)
        return
    print_whole(
        entries_table(listing.entries, title=f"cache {listing.root}", now=time.time()), console
    )


def print_prune(result: PruneResult, console: Console | None = None) -> None:
    """What was removed (or would be), the entries skipped because they are in use, the space."""
    console = console or output_console()
    if not result.exists:
        console.print(f"no cache at {escape(str(result.root))}; nothing to remove", soft_wrap=True)
        return
    verb = "would remove" if result.dry_run else "removed"
    age = (
        "as named"
        if result.names
        else "all"
        if result.unused_for_days is None
        else f"unused for {result.unused_for_days} days"
    )
    if result.names:
        # The entries asked for: a line each, which fits any width (a table would fold the path).
        for e in result.removed:
            console.print(
                f"{verb} {e.kind} {escape(e.name)}: {format_size(e.size)}", soft_wrap=True
            )
    elif result.removed:
        title = f"{verb} ({age}) from {result.root}"
        print_whole(entries_table(result.removed_pooled, title=title, now=time.time()), console)
    else:
        console.print(f"nothing to remove ({age}) in {escape(str(result.root))}", soft_wrap=True)
    for e in result.busy:
        console.print(
            f"skipped {escape(e.name)}: in use by another wheelforge (its lock is held); "
            f"prune again once it has finished",
            soft_wrap=True,
        )
    for e in result.foreign:
        console.print(
            f"skipped {escape(str(e.path))}: not made by wheelforge "
            f"({escape(e.name.split(': ', 1)[1])}); wheelforge removes only what it made",
            soft_wrap=True,
        )
    freed = "would free" if result.dry_run else "freed"
    console.print(f"{freed} {format_size(result.freed)}", soft_wrap=True)
