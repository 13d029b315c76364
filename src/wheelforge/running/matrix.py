"""``wheelforge matrix``: the variants a matrix expands to, each with the toolkit it would be
built with (one found on this machine or in the cache, else a release to provision) and as
``--only`` keeps them; nothing is downloaded or built."""

from __future__ import annotations

from wheelforge.configuration.settings import BuildSettings
from wheelforge.planning.variants import Variant


def list_variants(settings: BuildSettings) -> tuple[Variant, ...]:
    """The variants ``wheelforge build`` with *settings* would build (running/build/prepare.py
    selects them, as for a build), against the toolkits found now."""
    from wheelforge.running.build.prepare import selected
    from wheelforge.toolchain import toolkit

    found = toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    return tuple(selected(settings, found))
