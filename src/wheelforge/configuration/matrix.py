"""The matrix.yaml model: frozen dataclasses for what a matrix says (matrixreader.py reads and
validates the file into them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from wheelforge.configuration.archs import ArchSet, ArchSpec
from wheelforge.configuration.torchspec import TorchSpec

DEFAULT_TEST_COMMAND: tuple[str, ...] = (
    "{python}",
    "-m",
    "pytest",
    "-q",
    "-rs",
    "-p",
    "no:cacheprovider",
    "--junitxml={junitxml}",
    "{path}",
)


@dataclass(frozen=True, kw_only=True)
class PackageConfig:
    name: str
    version: str
    summary: str
    license: str | None
    requires_python: str | None
    dependencies: tuple[str, ...]
    packages: tuple[Path, ...]  # absolute folders of Python packages copied into the wheel

    @property
    def wheel_name(self) -> str:
        """The distribution name as it appears in a wheel's file name."""
        return canonicalize_name(self.name).replace("-", "_")


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """A glob of sources, optionally limited to some archs (a Hopper-only kernel: 9.0a)."""

    pattern: str  # relative to the matrix's folder
    archs: tuple[ArchSpec, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class ExtensionConfig:
    name: str  # dotted module name, e.g. wheelforge_kernels._C
    sources: tuple[SourceSpec, ...]
    include_dirs: tuple[Path, ...]
    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    module_init: bool  # generate PyInit_<name> so the module imports from Python

    @property
    def leaf(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def package_path(self) -> str:
        """Folder of the module inside the wheel, e.g. ``wheelforge_kernels``."""
        return self.name.rsplit(".", 1)[0].replace(".", "/")


@dataclass(frozen=True, kw_only=True)
class TestsConfig:
    """The payload's test suite, which ``wheelforge test`` runs against each torch."""

    path: Path
    requires: tuple[str, ...]  # installed beside the wheel (pytest, numpy, ...)
    torch: tuple[str, ...]  # torch versions to install and test
    command: tuple[str, ...]  # with {python}, {path} and {junitxml} filled in


@dataclass(frozen=True, kw_only=True)
class Matrix:
    path: Path
    root: Path  # the folder matrix.yaml is in; relative paths start here
    package: PackageConfig
    extension: ExtensionConfig
    abi: Literal[
        "stable", "unstable"
    ]  # unstable: torch's full C++ API, one build per torch version
    python_abi: str  # e.g. cp310
    torch: TorchSpec
    cuda: tuple[str, ...]  # toolkit releases ("13.0") or "auto", crossed with the arch sets
    arch_sets: tuple[ArchSet, ...]
    tests: TestsConfig | None
    compile_cache: str | None = None  # auto, sccache, ccache, none; None: not given

    @property
    def limited_api_macro(self) -> str:
        """``Py_LIMITED_API`` for the python-abi floor: 0x030a0000 for cp310."""
        minor = int(self.python_abi[3:])
        return f"0x03{minor:02x}0000"

    @property
    def requires_python(self) -> str:
        return self.package.requires_python or f">=3.{self.python_abi[3:]}"

    def with_arch_sets(self, arch_sets: tuple[ArchSet, ...]) -> Matrix:
        return dataclasses.replace(self, arch_sets=arch_sets)
