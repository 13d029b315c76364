"""Source distributions: pyproject.toml, the matrix, and every file the matrix names (extension
sources, include folders, Python packages, tests), plus PKG-INFO, in a ``.tar.gz`` named per
PEP 625. Reproducible: members sorted, one timestamp (SOURCE_DATE_EPOCH, else 1980-01-01),
owner root:root, modes 0644/0755, and a gzip header without a time or a file name."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from wheelforge.configuration import abi
from wheelforge.configuration.matrix.keys import GENERATED_RE
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import fsutil, readers, writers
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging.wheel import core_metadata, followed, source_date_epoch

_SKIP_DIRS = {"__pycache__", ".git", ".venv"}
# Beside the matrix: wheelforge's own build folder and output (defaults), never sources.
_OUTPUT_DIRS = ("build", "dist")
_SKIP_SUFFIXES = {".pyc", ".pyo", ".so", ".o"}
# Beside pyproject.toml, taken when present: what a source release is expected to carry.
_PROJECT_FILES = (
    "README.md",
    "README.rst",
    "README.txt",
    "README",
    "LICENSE",
    "LICENSE.txt",
    "NOTICE",
)


def sdist_name(matrix: Matrix) -> str:
    """``{name}-{version}`` with the name normalized as in wheel names (PEP 625)."""
    return f"{matrix.package.wheel_name}-{matrix.package.version}"


def _tree(folder: Path, outputs: set[Path]) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIP_DIRS and not d.endswith(".egg-info") and Path(root, d) not in outputs
        )
        for name in sorted(names):
            path = Path(root, name)
            if path.suffix not in _SKIP_SUFFIXES and path.is_file():
                yield path  # a link leading out of the project is refused: sdist_files()


def sdist_files(matrix: Matrix, root: Path) -> list[tuple[str, Path]]:
    """(name in the sdist, file) for everything a wheel build from the sdist needs, sorted.
    Every file must lie under *root*, the folder of pyproject.toml."""
    root = root.resolve()
    wanted: set[Path] = {root / "pyproject.toml", matrix.path}
    wanted |= {root / n for n in _PROJECT_FILES if (root / n).is_file()}
    for ext in matrix.extensions:
        for spec in ext.sources:  # a generate step's outputs are made by the build
            if not GENERATED_RE.match(spec.pattern):
                wanted |= {p.resolve() for p in matrix.root.glob(spec.pattern) if p.is_file()}
    for step in matrix.generate:
        for pattern in step.inputs:
            if not GENERATED_RE.match(pattern):
                wanted |= {p.resolve() for p in matrix.root.glob(pattern) if p.is_file()}
    wanted |= set(matrix.package.modules) | set(matrix.package.license_files)
    folders = [d for ext in matrix.extensions for d in ext.include_dirs if d.is_absolute()]
    _refuse_outside_libraries(matrix, root)
    folders += [
        lib.path / d for lib in matrix.header_libraries if lib.path is not None for d in lib.include
    ]
    folders += matrix.package.packages
    if matrix.tests is not None:
        folders.append(matrix.tests.path)
    outputs = {matrix.root / d for d in _OUTPUT_DIRS}
    for folder in folders:
        wanted |= set(_tree(folder, outputs))
    files = []
    for path in sorted(wanted):
        try:
            # Named where it is found (a link by its own name), the folders on the way resolved.
            where = fsutil.resolved(path.parent) / path.name
            name = where.relative_to(root).as_posix()
        except ValueError:
            raise ConfigError(
                f"{path} lies outside {root}, the folder of pyproject.toml, so an sdist cannot "
                f"carry it; move it (and {matrix.path.name}'s path to it) under {root}"
            ) from None
        files.append((name, followed(path, root, what=f"sdist member {name}")))
    return sorted(files)


def _refuse_outside_libraries(matrix: Matrix, root: Path) -> None:
    """A header library above the sdist's folder (FlashAttention-3's ``hopper/`` includes the
    repository's ``../csrc/cutlass``): a build reads it there, an sdist cannot carry it."""
    for i, lib in enumerate(matrix.header_libraries):
        if lib.path is not None and not lib.path.resolve().is_relative_to(root):
            raise ConfigError(
                f"header-libraries[{i}] ({lib.name}): {lib.path} lies outside {root}, the folder of "
                "pyproject.toml, so an sdist cannot carry it; build wheels from the checkout, or put "
                "pyproject.toml and matrix.yaml at the repository's top (where the library lies "
                "inside), or take the headers from PyPI (header-libraries[].pypi)"
            )


def _member(name: str, size: int, executable: bool, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = 0o755 if executable else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_sdist(matrix: Matrix, root: Path, dest_dir: Path) -> Path:
    """Write the sdist into *dest_dir* (atomically) and return it."""
    base = sdist_name(matrix)
    pkg_info = core_metadata(
        matrix.package,
        matrix.requires_python,
        version=matrix.package.version,
        torch_requirement=abi.of(matrix.abi).requirement(matrix.torch),
        metadata_version="2.2",
    ).encode()
    members = [(f"{base}/{name}", path) for name, path in sdist_files(matrix, root)]
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(
        prefix=".sdist-", dir=dest_dir if dest_dir.is_dir() else None
    ) as tmp:
        target = Path(tmp) / f"{base}.tar.gz"
        with (
            target.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            entries = [(f"{base}/PKG-INFO", None), *members]
            for name, path in sorted(entries, key=lambda e: e[0]):
                data = (
                    pkg_info if path is None else readers.read_bytes(path, cap=readers.PACKED_CAP)
                )
                executable = path is not None and os.access(path, os.X_OK)
                tar.addfile(_member(name, len(data), executable, epoch), io.BytesIO(data))
        return writers.publish(target, dest_dir)
