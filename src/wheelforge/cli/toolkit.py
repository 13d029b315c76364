"""``wheelforge toolkit list`` and ``toolkit install``: parse and dispatch (the work is in
toolchain/catalog.py, the screens in cli/toolkit_screen.py)."""

from __future__ import annotations

from pathlib import Path

import click

from wheelforge.cli.options import cache_dir_option, tool_verbose_option


@click.group(name="toolkit")
def toolkit_group() -> None:
    """CUDA toolkits: the ones found, and provisioning more into the cache."""


@toolkit_group.command(name="list")
@cache_dir_option
@tool_verbose_option
def toolkit_list(cache_dir: Path | None) -> None:
    """Toolkits found on this machine and in the cache, and the ones wheelforge can provision."""
    from wheelforge.cli.toolkit_screen import print_toolkits
    from wheelforge.configuration import settings
    from wheelforge.toolchain.catalog import list_toolkits

    listed = list_toolkits(settings.cache_dir(cache_dir))
    print_toolkits(listed.found, listed.provisionable)


@toolkit_group.command(name="install")
@click.argument("release")
@cache_dir_option
@tool_verbose_option
def toolkit_install(release: str, cache_dir: Path | None) -> None:
    """Provision CUDA RELEASE, for example 11.8 or 13.1, into the cache."""
    from wheelforge.cli.toolkit_screen import print_installed
    from wheelforge.configuration import settings
    from wheelforge.toolchain.catalog import install

    print_installed(install(release, settings.cache_dir(cache_dir)))
