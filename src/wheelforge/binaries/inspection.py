"""List the SASS and PTX that shared objects, object files, wheels and folders of them carry.

Files are memory-mapped, so only their ELF headers and fatbin headers are read. Wheel members
are inflated in memory within the caps of bounded.py, never extracted to disk (binaries/elf.py
reads both). What a path is comes from stat(2), so a FIFO or a device is named as such and never
opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.binaries import bounded
from wheelforge.binaries.elf import ELF_MAGIC, ElfImage, open_elf_file, open_wheel
from wheelforge.binaries.fatbin import FatbinEntry, fatbin_entries
from wheelforge.foundation.errors import BinaryFormatError

FileKind = Literal["elf", "wheel"]
ACCEPTS = "shared objects, object files, wheels or folders of them"


@dataclass(frozen=True)
class BinaryReport:
    """The fatbin entries of one ELF file, on disk or inside a wheel."""

    path: str
    size: int
    entries: tuple[FatbinEntry, ...]

    @property
    def sass_archs(self) -> tuple[str, ...]:
        """The SASS archs, oldest first (sm_80, sm_90, sm_90a, sm_100, sm_100f)."""
        return _sorted_archs(entry for entry in self.entries if entry.kind == "sass")

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        """The PTX archs, oldest first (compute_80, compute_90a, ...)."""
        return _sorted_archs(entry for entry in self.entries if entry.kind == "ptx")


def inspect_paths(paths: Sequence[Path]) -> list[BinaryReport]:
    """Reports for ELF files, wheels (every ELF member) and folders (recursively, sorted; files
    that are neither ELF nor wheel are skipped there). ELF files without fatbins are reported
    too, with no entries."""
    reports: list[BinaryReport] = []
    for path in paths:
        if bounded.classify(path, accepts=ACCEPTS) == "folder":
            for file in _walk(path):
                reports.extend(_inspect_file(file, _file_kind(file)))
        else:
            kind = _file_kind(path)
            if kind is None:
                raise BinaryFormatError(
                    str(path),
                    0,
                    "neither an ELF file nor a wheel; pass shared objects, object files, "
                    "wheels or folders of them",
                )
            reports.extend(_inspect_file(path, kind))
    return reports


def _sorted_archs(entries: Iterator[FatbinEntry]) -> tuple[str, ...]:
    unique = {entry.arch: (entry.sm, entry.variant) for entry in entries}
    return tuple(sorted(unique, key=lambda arch: unique[arch]))


def _walk(root: Path) -> list[Path]:
    """Regular files under ``root``, sorted; symlinks are skipped so no file is listed twice
    (``libfoo.so -> libfoo.so.1``)."""
    files = [
        Path(folder, name)
        for folder, _, names in os.walk(root, onerror=_raise_walk_error)
        for name in names
    ]
    return sorted(file for file in files if not file.is_symlink() and file.is_file())


def _raise_walk_error(error: OSError) -> None:
    raise BinaryFormatError(str(error.filename), None, f"cannot read folder: {error.strerror}")


def _inspect_file(path: Path, kind: FileKind | None) -> list[BinaryReport]:
    if kind == "elf":
        return [_inspect_elf_file(path)]
    if kind == "wheel":
        return _inspect_wheel(path)
    return []


def _file_kind(path: Path) -> FileKind | None:
    try:
        with path.open("rb") as file:
            head = file.read(4)
    except OSError as error:
        raise BinaryFormatError(str(path), None, f"cannot read: {error.strerror}") from error
    if head == ELF_MAGIC:
        return "elf"
    if path.suffix == ".whl":
        return "wheel"
    return None


def report_of(image: ElfImage) -> BinaryReport:
    """The fatbin entries of one ELF image (a file or a wheel member)."""
    return BinaryReport(path=image.name, size=image.size, entries=tuple(fatbin_entries(image)))


def _inspect_elf_file(path: Path) -> BinaryReport:
    with open_elf_file(path) as image:
        return report_of(image)


def _inspect_wheel(path: Path) -> list[BinaryReport]:
    with open_wheel(path) as wheel:
        return [report_of(image) for image in wheel.elf_members()]
