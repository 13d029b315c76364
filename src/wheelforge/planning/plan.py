"""The plan of one variant: every path, flag and step decided up front (planning/planner.py
makes it), in an immutable object that the ninja writer, the packer and the report read."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.configuration import abi as abis
from wheelforge.configuration.archs import ArchSet
from wheelforge.configuration.matrix import Matrix
from wheelforge.planning import reproducible
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.torchprobe import TorchEnv

Rule = Literal["cxx", "cc", "nvcc"]


@dataclass(frozen=True, kw_only=True)
class CompileStep:
    source: Path
    object: Path
    rule: Rule
    arch_set: ArchSet | None = None  # for a source with arch limits: what it is compiled for
    gencode: str | None = None  # its own -gencode flags then; else the plan's (the arch set's)
    flags: str = ""  # per-source flags: the source's path-free name for seeds (reproducible.py)


@dataclass(frozen=True, kw_only=True)
class GeneratedFile:
    path: Path
    text: str


@dataclass(frozen=True, kw_only=True)
class VariantPlan:
    variant: Variant
    matrix: Matrix
    torch: TorchEnv
    build_dir: Path
    out_dir: Path
    cxx: str
    cc: str
    # Compiler launchers (ccache, sccache, distcc): words run in front of the compiler.
    cxx_launcher: tuple[str, ...]
    cc_launcher: tuple[str, ...]
    cuda_launcher: tuple[str, ...]
    nvcc_host: str  # the host compiler nvcc runs (-ccbin): one the toolkit accepts
    cxx_flags: str
    cc_flags: str
    nvcc_flags: str
    gencode: str  # the arch set's -gencode flags; a limited source has its own
    ldflags: str
    compile_steps: tuple[CompileStep, ...]
    left_out: tuple[Path, ...]  # limited sources with no arch in common with the arch set
    generated: tuple[GeneratedFile, ...]
    library: Path  # the linked extension module in the build dir
    export_map: Path  # the linker version script (export_map())
    wheel_library_path: str  # where it goes inside the wheel, e.g. pkg/_C.abi3.so
    abi_tag: str  # e.g. cp310-abi3
    version: str  # the wheel's version: the package's, plus the variant's local label if any
    torch_requirement: str  # stable: torch>=target; unstable: the torch it was built against
    # nvcc before CUDA 12.9: the fixed-pid library it runs with (reproducible.py); None: none
    nvcc_preload: Path | None = None
    # every folder the compiles read from, and its path-free name (reproducible.prefix_maps)
    input_folders: tuple[tuple[Path, str], ...] = ()
    nvcc_threads: int | None = None  # nvcc --threads, given through NVCC_APPEND_FLAGS (ninja.py)
    abi: AbiFlavour

    def command_path(self, path: Path) -> str:
        """*path* as the compile commands name it (reproducible.spelling): relative to the build
        folder (where ninja runs them) when it lies in the build folder, or in the project while
        the build folder does too; absolute for nvcc before CUDA 12.9, which runs from /."""
        return self._spelling(path)

    @functools.cached_property
    def _spelling(self) -> Callable[[Path], str]:
        root = self.matrix.root.resolve()
        return reproducible.spelling(self.build_dir, root, self.variant.toolkit.version)


@dataclass(frozen=True, kw_only=True)
class AbiFlavour:
    """What the ABI decides about a build: how sources see torch and Python, what the link adds,
    and how the module and wheel are named and pinned; *kind* is what it decides before torch is
    probed (configuration/abi.py)."""

    kind: abis.Abi
    target: tuple[int, int]  # the matrix's torch target version (its lowest torch)
    defines: tuple[str, ...]
    includes: tuple[str, ...]
    force_include: tuple[str, ...]  # -include of the weak-shims header (stable only)
    generated: tuple[GeneratedFile, ...]
    extra_ldflags: tuple[str, ...]
    abi_tag: str  # cp310-abi3, or cp311-cp311
    module_suffix: str  # .abi3.so, or CPython's extension suffix
    torch_requirement: str
