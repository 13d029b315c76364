"""``wheelforge matrix``: the variants a matrix expands to, each with the toolkit it would be
built with (one found on this machine or in the cache, else a release to provision) and its
wheel's version, as ``--only`` keeps them; nothing is downloaded or built."""

from __future__ import annotations

from dataclasses import dataclass

from wheelforge.configuration.settings import BuildSettings
from wheelforge.planning.variants import Variant


@dataclass(frozen=True)
class MatrixListing:
    """The variants, and each one's wheel version (planning/plan.wheel_version), in one order."""

    variants: tuple[Variant, ...]
    versions: tuple[str, ...]


def list_variants(settings: BuildSettings) -> MatrixListing:
    """The variants ``wheelforge build`` with *settings* would build (build/prepare.py
    selects them, as for a build), against the toolkits found now."""
    from wheelforge.build.prepare import selected
    from wheelforge.planning.plan import wheel_version
    from wheelforge.toolchain import toolkits as toolkit

    found = toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    chosen = tuple(selected(settings, found))
    return MatrixListing(
        variants=chosen, versions=tuple(wheel_version(settings.matrix, v) for v in chosen)
    )
