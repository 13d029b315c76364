"""``wheelforge toolkit``: the CUDA toolkits found on this machine and in the cache, with the
releases wheelforge can provision that none of them is (``list``), and a release provisioned
into the cache (``install``, toolchain/provision.py's recipes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelforge.toolchain import provision
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.provision import Recipe
from wheelforge.toolchain.toolkits import Toolkit


@dataclass(frozen=True)
class ToolkitListing:
    """What ``toolkit list`` shows: the toolkits found, and the releases to provision."""

    found: tuple[Toolkit, ...]
    provisionable: tuple[Recipe, ...]  # provision.not_found(found)


def list_toolkits(cache: Path) -> ToolkitListing:
    """The toolkits found ($CUDA_HOME, the PATH, the usual folders, *cache*), and the releases
    wheelforge can provision that none of them is."""
    found = tuple(toolkit.discover(cache=cache))
    return ToolkitListing(found=found, provisionable=provision.not_found(found))


def install(release: str, cache: Path) -> Toolkit:
    """Provision CUDA *release* into *cache* (nothing is done when it is there already) and
    return the toolkit as a build finds it."""
    return toolkit.load_provisioned(provision.install_release(release, cache))
