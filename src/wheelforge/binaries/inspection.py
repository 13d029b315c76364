"""List the SASS and PTX that shared objects, object files, wheels and folders of them carry.

Files are memory-mapped, so only their ELF headers and fatbin headers are read. Wheel members
are inflated in memory within the caps of bounded.py, never extracted to disk (binaries/elf.py
reads both; reader.py walks a wheel). What a path is comes from stat(2), so a FIFO or a device
is named as such and never opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from wheelforge.binaries import bounded
from wheelforge.binaries.elf import ELF_MAGIC, ElfImage, open_elf_file
from wheelforge.binaries.facts import FATBINS, BinaryContents
from wheelforge.binaries.fatbin import fatbin_entries, linked_ptx_archs
from wheelforge.foundation import readers
from wheelforge.foundation.errors import BinaryFormatError

FileKind = Literal["elf", "wheel"]
ACCEPTS = "shared objects, object files, wheels or folders of them"


def inspect_paths(paths: Sequence[Path]) -> list[BinaryContents]:
    """Reports for ELF files, wheels (every ELF member) and folders (recursively, sorted; files
    that are neither ELF nor wheel are skipped there). ELF files without fatbins are reported
    too, with no entries."""
    reports: list[BinaryContents] = []
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


def _walk(root: Path) -> list[Path]:
    """Regular files under ``root``, sorted, each read once: a symlink to a file under
    ``root`` is skipped (``libfoo.so -> libfoo.so.1`` is listed as the file it names), a
    symlink to a file elsewhere is read under the link's name (``dist/x.whl ->
    ~/Downloads/x.whl``: the user named the folder that holds it, and every read stays within
    bounded.py's caps). Linked folders are not entered (os.walk's default), so no loop; a
    dangling link is no file and is skipped."""
    files = [
        Path(folder, name)
        for folder, _, names in os.walk(root, onerror=_raise_walk_error)
        for name in names
    ]
    regular = {file for file in files if not file.is_symlink() and file.is_file()}
    seen = {file.resolve() for file in regular}
    for link in sorted(file for file in files if file.is_symlink()):
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, or a loop of links
            continue
        if target.is_file() and target not in seen:
            seen.add(target)
            regular.add(link)
    return sorted(regular)


def _raise_walk_error(error: OSError) -> None:
    raise BinaryFormatError(str(error.filename), None, f"cannot read folder: {error.strerror}")


def _inspect_file(path: Path, kind: FileKind | None) -> list[BinaryContents]:
    if kind == "elf":
        return [_inspect_elf_file(path)]
    if kind == "wheel":
        return _inspect_wheel(path)
    return []


def _file_kind(path: Path) -> FileKind | None:
    try:
        with readers.open_regular(path) as file:
            head = file.read(4)
    except OSError as error:
        raise BinaryFormatError(str(path), None, f"cannot read: {error.strerror}") from error
    if head == ELF_MAGIC:
        return "elf"
    if path.suffix == ".whl":
        return "wheel"
    return None


def contents_of(image: ElfImage) -> BinaryContents:
    """The fatbin entries of one ELF image (a file or a wheel member): what the walk
    (reader.read_binary) reads of it for FATBINS, without loading the walk's other readers
    (symbols, roles), which an ``inspect`` of shared objects never needs."""
    return BinaryContents(
        path=image.name,
        size=image.size,
        entries=tuple(fatbin_entries(image)),
        linked_ptx=linked_ptx_archs(image),
    )


def _inspect_elf_file(path: Path) -> BinaryContents:
    with open_elf_file(path) as image:
        return contents_of(image)


def _inspect_wheel(path: Path) -> list[BinaryContents]:
    from wheelforge.binaries.reader import read_wheel

    return list(read_wheel(path, FATBINS).contents())
