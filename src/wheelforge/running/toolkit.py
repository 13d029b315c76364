"""``wheelforge toolkit``: the CUDA toolkits found on this machine and in the cache (``list``),
and a release provisioned into the cache (``install``, toolchain/provision.py's recipes)."""

from __future__ import annotations

from pathlib import Path

from wheelforge.toolchain import provision, toolkit
from wheelforge.toolchain.toolkit import Toolkit


def list_toolkits(cache: Path) -> tuple[Toolkit, ...]:
    """The toolkits found ($CUDA_HOME, the PATH, the usual folders, *cache*)."""
    return tuple(toolkit.discover(cache=cache))


def install(release: str, cache: Path) -> Toolkit:
    """Provision CUDA *release* into *cache* (nothing is done when it is there already) and
    return the toolkit as a build finds it."""
    return toolkit.load_provisioned(provision.install_release(release, cache))
