"""Where two builds of one wheel differ: the members, and inside an ELF member the sections, and
inside its fatbin the entries (arch and translation unit). ``build --verify-reproducible`` reads
two wheels built from the same inputs with this, so a difference names its cause's neighbourhood
(``.rodata``: a ``__DATE__`` or a path; ``.symtab``: a temporary file name; ``.nv_fatbin``
``sm_80``: the device code) instead of "the wheels differ"."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge.binaries.elf import ELF_MAGIC, ElfImage, member_name
from wheelforge.binaries.fatbin import (
    EXECUTABLE_SECTION,
    FatbinEntry,
    entry_payload,
    read_fatbin_entries,
)
from wheelforge.foundation import fsutil
from wheelforge.foundation.errors import BinaryFormatError, VerificationError, first_and_rest

if TYPE_CHECKING:  # pyelftools loads in ~0.05 s: the functions that parse import it
    from elftools.elf.elffile import ELFFile


@dataclass(frozen=True, kw_only=True)
class MemberDifference:
    member: str
    kind: str  # "only in the first", "only in the second", "content", "zip entry"
    sections: tuple[str, ...] = ()  # ELF sections whose bytes differ
    fatbin_entries: tuple[str, ...] = ()  # e.g. "sm_80 (container 2)"

    def describe(self) -> str:
        where = f" in section(s) {', '.join(self.sections)}" if self.sections else ""
        if self.fatbin_entries:
            where += f"; fatbin entries {', '.join(self.fatbin_entries)}"
        return f"{self.member}: {self.kind}{where}"


def _sections(elf: ELFFile) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for index, section in enumerate(elf.iter_sections()):
        if section["sh_type"] == "SHT_NOBITS":
            continue
        out[section.name or f"#{index}"] = section.data()
    return out


def _entry_key(entry: FatbinEntry) -> tuple[int, str, str]:
    return (entry.container, entry.kind, entry.arch)


def _fatbin_differences(a: bytes, b: bytes, path: str) -> tuple[str, ...]:
    """The fatbin entries whose (decompressed) images differ, or that only one side has."""
    first = {_entry_key(e): e for e in read_fatbin_entries(a, path=path)}
    second = {_entry_key(e): e for e in read_fatbin_entries(b, path=path)}
    out = []
    for key in sorted(first.keys() | second.keys()):
        container, _, arch = key
        label = f"{arch} (container {container})"
        if key not in first or key not in second:
            out.append(f"{label} only in one build")
        elif entry_payload(a, first[key], path=path) != entry_payload(b, second[key], path=path):
            out.append(label)
    return tuple(out)


def diff_elf(a: bytes, b: bytes, *, path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(sections that differ, fatbin entries that differ) of two ELF files. Sections present in
    one only count as differing; equal sections with unequal files mean the headers differ."""
    from elftools.common.exceptions import ELFError

    try:
        with ElfImage(path, a) as image_a, ElfImage(path, b) as image_b:
            sa = _sections(image_a.elf)
            sb = _sections(image_b.elf)
    except (ELFError, ValueError) as exc:
        raise BinaryFormatError(path, None, f"not a readable ELF file: {exc}") from None
    names = list(sa) + [n for n in sb if n not in sa]
    sections = tuple(n for n in names if sa.get(n) != sb.get(n))
    if not sections and a != b:
        sections = ("(ELF headers or layout)",)
    entries = _fatbin_differences(a, b, path) if EXECUTABLE_SECTION in sections else ()
    return sections, entries


def _zip_meta(info: zipfile.ZipInfo) -> tuple[object, ...]:
    return (info.date_time, info.external_attr, info.compress_type, info.create_system)


def diff_wheels(first: Path, second: Path) -> list[MemberDifference]:
    """Every member that differs between two wheels, in the first wheel's order."""
    try:
        with zipfile.ZipFile(first) as za, zipfile.ZipFile(second) as zb:
            infos_a = {i.filename: i for i in za.infolist()}
            infos_b = {i.filename: i for i in zb.infolist()}
            out: list[MemberDifference] = []
            for name in [*infos_a, *(n for n in infos_b if n not in infos_a)]:
                if name not in infos_b:
                    out.append(MemberDifference(member=name, kind="only in the first"))
                    continue
                if name not in infos_a:
                    out.append(MemberDifference(member=name, kind="only in the second"))
                    continue
                a, b = za.read(name), zb.read(name)
                if a == b:
                    if _zip_meta(infos_a[name]) != _zip_meta(infos_b[name]):
                        out.append(MemberDifference(member=name, kind="zip entry"))
                    continue
                if a.startswith(ELF_MAGIC) and b.startswith(ELF_MAGIC):
                    sections, entries = diff_elf(a, b, path=member_name(first, name))
                    out.append(
                        MemberDifference(
                            member=name, kind="content", sections=sections, fatbin_entries=entries
                        )
                    )
                else:
                    out.append(MemberDifference(member=name, kind="content"))
            if not out and list(infos_a) != list(infos_b):
                out.append(MemberDifference(member="(member order)", kind="zip entry"))
    except (zipfile.BadZipFile, OSError) as exc:
        raise BinaryFormatError(str(first), None, f"not a readable wheel: {exc}") from None
    return out


def require_identical(first: Path, second: Path, *, what: str) -> None:
    """Raise, naming every difference, unless the two wheels are the same bytes."""
    if fsutil.sha256(first) == fsutil.sha256(second):  # streamed: wheels of 100s of MB
        return
    found = diff_wheels(first, second)
    if first.name != second.name:
        found.insert(
            0, MemberDifference(member="(wheel file name)", kind=f"{first.name} vs {second.name}")
        )
    if not found:  # same members, same bytes each: the zip's own layout differs
        found = [MemberDifference(member="(zip layout)", kind="content")]
    message, details = first_and_rest(
        [d.describe() for d in found],
        prefix=f"{what} is not reproducible: a rebuild in another folder differs in ",
    )
    raise VerificationError(
        message + "; see docs/reproducibility.md for what makes builds differ", details=details
    )
