"""What a run produced, as data: the build's results per variant. Rendering (terminal, JSON)
lives in the interface layer and only reads these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: reading results needs no ELF reader
    from wheelforge.binaries.abicheck import BinaryCheck
    from wheelforge.binaries.inspection import BinaryReport
    from wheelforge.configuration.archs import ArchSet
    from wheelforge.toolchain.compilecache import CacheStats


@dataclass(frozen=True, kw_only=True)
class VariantResult:
    variant_id: str
    arch_set: ArchSet
    toolkit: str
    wheel: Path
    wheel_size: int
    compiled: tuple[str, ...]  # the compile steps ninja ran (empty: everything was up to date)
    reused: bool  # the wheel in the output folder was already made from these inputs
    binaries: tuple[BinaryReport, ...]
    abi_checks: tuple[BinaryCheck, ...]
    seconds: float
    compile_cache: CacheStats | None = None  # None: no cache, or nothing was compiled


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    matrix: Path
    target_version: tuple[int, int]
    built_against: str
    variants: tuple[VariantResult, ...]
