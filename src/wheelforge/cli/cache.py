"""`wheelforge cache list` and `wheelforge cache prune`: parse and dispatch (the work is in
build/caches.py, the tables in cli/cache_screen.py, the JSON documents in
documents/cache_schema.py). Registered on the cli group by cli/app.py."""

from __future__ import annotations

from pathlib import Path

import click

from wheelforge.cli.options import WholeNumber, cache_dir_option, json_option
from wheelforge.cli.options import verbose_option as verbose_option_of

verbose_option = verbose_option_of("Show more detail.")


@click.group(name="cache")
def cache_group() -> None:
    """The user cache: torch environments, provisioned toolkits, kept repairs, probes."""


@cache_group.command(name="list")
@cache_dir_option
@json_option("cache-list")
@verbose_option
def cache_list(cache_dir: Path | None, as_json: bool) -> None:
    """What the cache holds: each entry's size on disk and when it was last used."""
    from wheelforge.build.caches import list_cache
    from wheelforge.cli.cache_screen import print_listing
    from wheelforge.configuration import settings
    from wheelforge.documents import kinds
    from wheelforge.documents.cache_schema import list_document

    listing = list_cache(settings.cache_dir(cache_dir))
    if as_json:
        kinds.echo(list_document(listing))
    else:
        print_listing(listing)


@cache_group.command(name="prune")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@cache_dir_option
@click.option(
    "--unused-for",
    type=WholeNumber(low=-100_000, high=100_000),  # negative: prune says how to write it
    default=30,
    show_default=True,
    metavar="DAYS",
    help=(
        "Remove torch environments and toolkits not used for DAYS days, and older probes and "
        "repairs."
    ),
)
@click.option("--all", "remove_all", is_flag=True, help="Remove every entry not in use.")
@click.option("--dry-run", is_flag=True, help="Show what would be removed; remove nothing.")
@json_option("cache-prune")
@verbose_option
def cache_prune(
    *,
    names: tuple[str, ...],
    cache_dir: Path | None,
    unused_for: int,
    remove_all: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Remove what has not been used for a while, or the entries NAME... (a folder name as
    'cache list' shows it, 'repairs', 'probes', or a path); an entry another wheelforge is
    using or creating is skipped."""
    from wheelforge.build.caches import prune
    from wheelforge.cli.cache_screen import print_prune
    from wheelforge.configuration import settings
    from wheelforge.documents import kinds
    from wheelforge.documents.cache_schema import prune_document

    result = prune(
        settings.cache_dir(cache_dir),
        unused_for=unused_for,
        every=remove_all,
        dry_run=dry_run,
        names=names,
    )
    if as_json:
        kinds.echo(prune_document(result))
    else:
        print_prune(result)
