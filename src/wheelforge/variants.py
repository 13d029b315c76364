"""Variants: the matrix expanded into what is built. One variant per (arch set × toolkit) for the
stable ABI; torch versions don't multiply variants, since one binary serves them all."""

from __future__ import annotations

from dataclasses import dataclass

from .archs import ArchSet
from .matrix import Matrix
from .toolkit import Toolkit


@dataclass(frozen=True, kw_only=True)
class Variant:
    id: str  # stable and readable: "<arch set>-<toolkit>", e.g. "default-cu130"
    arch_set: ArchSet
    toolkit: Toolkit


def expand(matrix: Matrix, toolkit: Toolkit) -> tuple[Variant, ...]:
    return tuple(
        Variant(id=f"{arch_set.name}-{toolkit.short}", arch_set=arch_set, toolkit=toolkit)
        for arch_set in matrix.arch_sets
    )
