"""Read the CUDA fatbins embedded in ELF files, without cuobjdump.

A fatbin lists, per translation unit, the SASS (cubin) and PTX images that a binary carries. The
layout is not documented by NVIDIA; what follows was confirmed on nvcc 13.0 output and on the
libraries of the CUDA 13 wheels of cuBLAS, cuFFT, cuSPARSE, NCCL and PyTorch 2.14, and is
cross-checked against cuobjdump 13.5 by ``tests/integration/test_fatbin_cuobjdump.py``. All
fields are little-endian.

Sections
    ``.nv_fatbin`` holds the executable fatbin, in shared objects and in object files from
    ``nvcc -c``. Object files from ``nvcc -c -rdc=true`` carry ``__nv_relfatbin`` instead (images
    still to be device-linked); a shared object linked from them keeps that section, next to a
    ``.nv_fatbin`` when it was device-linked. Like cuobjdump by default (see its
    ``--all-fatbin``), we read ``.nv_fatbin``, and ``__nv_relfatbin`` only when there is none.
    (``.nvFatBinSegment`` holds the runtime's 24-byte pointer per container; not needed here.)

Container header (16 bytes)
    u32 magic 0xBA55ED50, u16 version (1), u16 header size (16), u64 size of the entries that
    follow. The linker puts one container per translation unit back to back; no padding was
    seen between them (every container size is a multiple of 8), but zero padding up to the next
    16-byte boundary, and zeros at the end of the section, are skipped.

Entry header (at least 64 bytes; 64, 80, 88, 96, 112 and 120 were seen: skip by the field)
    +0x00 u16 kind: 1 PTX, 2 ELF (SASS), 8 LTO IR (``code=lto_XX``; cuobjdump's ``--list-elf``
    and ``--list-ptx`` leave it out, and so do we); +0x02 u16 0x0101; +0x04 u32 header size;
    +0x08 u64 payload size as stored, padded to 8; +0x10 u32 compressed size (exact; 0 when
    uncompressed); +0x14 u32 (0x40 in headers longer than 64 bytes); +0x18 u16 minor and +0x1A
    u16 major version (1.8 for cubins, the PTX ISA for PTX, e.g. 9.0); +0x1C u32 sm number;
    +0x20 u32 name offset and +0x24 u32 name length (always 0 seen); +0x28 u64 flags;
    +0x30 u64 (0 seen); +0x38 u64 decompressed size (0 when uncompressed).

Flags
    0x1 64-bit, 0x10 Linux, 0x2000 LZ4 (``-Xfatbin=-compress-mode=speed``), 0x8000 zstd,
    0x100000 the ``a`` variant (sm_90a), 0x200000 the ``f`` variant (sm_100f); 0x1000000 is set
    on the cubins with 88- and 112-byte headers (sm_100 and newer), 0x10000 on LTO IR. LZ4
    payloads are raw LZ4 blocks, zstd payloads zstd frames; PTX is NUL-terminated text. nvcc 13
    compresses PTX by default and leaves cubins raw; ``-Xfatbin=-compress-all`` compresses both,
    as the CUDA 13 library wheels do.

cuobjdump's ``--list-elf`` names an ``f`` cubin after the cubin's own ELF header, without the
``f`` (``sm_100``); its ``--dump-elf`` header, like this module, says ``sm_100f``.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Literal, NamedTuple

from wheelforge.binaries.elf import SHT_NOBITS, Buffer, ElfImage, SectionHeader
from wheelforge.configuration.archs import ArchSuffix
from wheelforge.foundation.errors import BinaryFormatError

EXECUTABLE_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"

CONTAINER_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
# kind, -, header size, payload size, compressed size, -, minor, major, sm,
# name offset, name length, flags, -, decompressed size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_CONTAINER_ALIGN = 16
# A fatbin lives in a section of a small-code-model ELF file, so no image reaches 2 GiB; a larger
# decompressed size is corruption, and must not become an allocation.
_MAX_PAYLOAD = 1 << 31

_KIND_PTX = 1
_KIND_ELF = 2
_FLAG_LZ4 = 0x2000
_FLAG_ZSTD = 0x8000
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY_SPECIFIC = 0x200000

Compression = Literal["none", "lz4", "zstd"]


# Slots, and its strings interned: a fatbin may hold a million entries (about 150 bytes each
# held, 330 before; issue 32).
@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One SASS or PTX image in a fatbin."""

    kind: Literal["sass", "ptx"]
    arch: str  # sm_90, sm_90a, sm_100f for SASS; compute_90, compute_90a, compute_100f for PTX
    sm: int
    variant: ArchSuffix  # the a/f suffix (named as in `inspect --json`)
    container: int  # index of the fatbin container (one per translation unit) in the section
    offset: int  # file offset of the entry header
    stored_size: int  # payload bytes as stored (padded to 8)
    size: int  # decompressed payload size; stored_size when uncompressed
    compression: Compression
    version: str | None  # "major.minor" from the header: the PTX ISA for PTX, 1.8 for cubins


class _EntryHeader(NamedTuple):
    kind: int
    header_size: int
    stored_size: int
    compressed_size: int
    version: str
    sm: int
    flags: int
    decompressed_size: int


def read_fatbin_entries(data: Buffer, *, path: str) -> list[FatbinEntry]:
    """The SASS and PTX entries of an ELF file's fatbin; [] when it has none."""
    with ElfImage(path, data) as image:
        return fatbin_entries(image)


def fatbin_entries(image: ElfImage) -> list[FatbinEntry]:
    """The SASS and PTX entries of an ELF image's fatbin; [] when it has none. A streamed wheel
    member's entry headers were read on the way (fatscan.py): they are taken when they fill the
    section exactly; otherwise the section is read and parsed here."""
    bounds = _fatbin_section_bounds(image)
    if bounds is None:
        return []
    return _section_entries(image, *bounds)


def _section_entries(image: ElfImage, start: int, size: int) -> list[FatbinEntry]:
    if image.scan is not None:
        found: list[FatbinEntry] | None = image.scan.entries_for(start, size, image.name)
        if found is not None:
            return found
    if image.kept is not None:
        return parse_fatbin_section(image.read(start, size), path=image.name, file_offset=start)
    with image.view[start : start + size] as section:
        return parse_fatbin_section(section, path=image.name, file_offset=start)


def linked_ptx_archs(image: ElfImage) -> tuple[str, ...]:
    """The PTX archs of a device-linked shared object's relocatable images (``__nv_relfatbin``
    beside its ``.nv_fatbin``), which fatbin_entries leaves out as cuobjdump does. nvlink puts
    no PTX into the device-linked image (CMake's CUDA_SEPARABLE_COMPILATION, ``-rdc=true``):
    the PTX an arch set asks for stays in the relocatable images, registered with the linked
    one, for the driver to JIT-link where no SASS fits. () for any other file."""
    names = {header.name: header for header in image.section_headers}
    header = names.get(RELOCATABLE_SECTION)
    if EXECUTABLE_SECTION not in names or header is None or header.type == SHT_NOBITS:
        return ()
    if header.offset + header.size > image.size:
        return ()  # fatbin_entries refuses the .nv_fatbin of such a file; this adds nothing
    entries = _section_entries(image, header.offset, header.size)
    unique = {e.arch: (e.sm, e.variant) for e in entries if e.kind == "ptx"}
    return tuple(sorted(unique, key=lambda arch: unique[arch]))


def parse_fatbin_section(section: Buffer, *, path: str, file_offset: int) -> list[FatbinEntry]:
    """Decode the containers of a fatbin section that starts at ``file_offset`` in ``path``."""
    entries: list[FatbinEntry] = []
    with memoryview(section) as view:
        end = len(view)
        pos = 0
        container = 0
        while pos < end:
            padding = _zero_padding(view, pos)
            if padding:
                pos += padding
                continue
            if end - pos < _CONTAINER.size:
                raise BinaryFormatError(
                    path,
                    file_offset + pos,
                    f"truncated fatbin container header ({end - pos} bytes)",
                )
            magic, version, header_size, body_size = _CONTAINER.unpack_from(view, pos)
            if magic != CONTAINER_MAGIC:
                raise BinaryFormatError(
                    path,
                    file_offset + pos,
                    f"bad fatbin container magic {magic:#010x} (expected {CONTAINER_MAGIC:#x})",
                )
            if version != 1:
                raise BinaryFormatError(
                    path, file_offset + pos, f"unsupported fatbin container version {version}"
                )
            if header_size < _CONTAINER.size:
                raise BinaryFormatError(
                    path, file_offset + pos, f"fatbin container header size {header_size} < 16"
                )
            body_start = pos + header_size
            body_end = body_start + body_size
            if body_end > end:
                raise BinaryFormatError(
                    path,
                    file_offset + pos,
                    f"fatbin container of {header_size} + {body_size} bytes runs past the end "
                    f"of the section ({end - pos} bytes left)",
                )
            entries.extend(
                _parse_container(
                    view,
                    body_start,
                    body_end,
                    container=container,
                    path=path,
                    file_offset=file_offset,
                )
            )
            pos = body_end
            container += 1
    return entries


def entry_payload(data: Buffer, entry: FatbinEntry, *, path: str) -> bytes:
    """The payload of ``entry`` (a cubin or PTX text), decompressed; ``data`` is the whole file."""
    with memoryview(data) as view:
        header = _entry_header(view, entry.offset, len(view), path)
        start = entry.offset + header.header_size
        if start + header.stored_size > len(view):
            raise BinaryFormatError(path, entry.offset, "fatbin entry payload runs past the end")
        if entry.compression == "none":
            return bytes(view[start : start + header.stored_size])
        with view[start : start + header.compressed_size] as stored:
            payload = _decompress(stored, entry.compression, entry.size, path, start)
    if len(payload) != entry.size:
        raise BinaryFormatError(
            path,
            start,
            f"{entry.compression} payload decompressed to {len(payload)} bytes, "
            f"the entry header says {entry.size}",
        )
    return payload


def ptx_target(data: Buffer, entry: FatbinEntry, *, path: str) -> str:
    """The ``.target`` of a PTX entry, e.g. ``sm_90a``."""
    if entry.kind != "ptx":
        raise ValueError(f"ptx_target() needs a PTX entry, not {entry.kind} {entry.arch}")
    text = entry_payload(data, entry, path=path).split(b"\0", 1)[0]
    for line in text.splitlines():
        directive = line.split(b"//", 1)[0].strip()
        if directive.startswith(b".target"):
            targets = directive[len(b".target") :].split(b",")
            target = targets[0].strip().decode("ascii", errors="replace")
            if target:
                return target
    raise BinaryFormatError(path, entry.offset, "PTX entry has no .target directive")


def _parse_container(
    view: memoryview, pos: int, end: int, *, container: int, path: str, file_offset: int
) -> list[FatbinEntry]:
    entries = []
    while pos < end:
        header = _entry_header(view, pos, end, path, file_offset)
        if header.kind in (_KIND_ELF, _KIND_PTX):
            entries.append(_make_entry(header, container, file_offset + pos, path))
        pos += header.header_size + header.stored_size
    return entries


def _entry_header(
    view: memoryview, pos: int, end: int, path: str, file_offset: int = 0
) -> _EntryHeader:
    where = file_offset + pos
    if end - pos < _ENTRY.size:
        raise BinaryFormatError(path, where, f"truncated fatbin entry header ({end - pos} bytes)")
    fields = _ENTRY.unpack_from(view, pos)
    kind, _, header_size, stored_size, compressed_size, _, minor, major, sm = fields[:9]
    flags, _, decompressed_size = fields[11:]
    if header_size < _ENTRY.size:
        raise BinaryFormatError(path, where, f"fatbin entry header size {header_size} < 64")
    if pos + header_size + stored_size > end:
        raise BinaryFormatError(
            path,
            where,
            f"fatbin entry of {header_size} + {stored_size} bytes runs past the end of its "
            f"container ({end - pos} bytes left)",
        )
    return _EntryHeader(
        kind=kind,
        header_size=header_size,
        stored_size=stored_size,
        compressed_size=compressed_size,
        version=f"{major}.{minor}",
        sm=sm,
        flags=flags,
        decompressed_size=decompressed_size,
    )


def _make_entry(header: _EntryHeader, container: int, offset: int, path: str) -> FatbinEntry:
    flags = header.flags
    compression: Compression = "none"
    size = header.stored_size
    if flags & _FLAG_LZ4 and flags & _FLAG_ZSTD:
        raise BinaryFormatError(path, offset, f"fatbin entry flags {flags:#x} name two codecs")
    if flags & (_FLAG_LZ4 | _FLAG_ZSTD):
        compression = "lz4" if flags & _FLAG_LZ4 else "zstd"
        size = header.decompressed_size
        if not 0 < size < _MAX_PAYLOAD:
            raise BinaryFormatError(path, offset, f"implausible decompressed size {size}")
        if not 0 < header.compressed_size <= header.stored_size:
            raise BinaryFormatError(
                path,
                offset,
                f"compressed size {header.compressed_size} does not fit the stored payload "
                f"of {header.stored_size} bytes",
            )
    if flags & _FLAG_ARCH_SPECIFIC and flags & _FLAG_FAMILY_SPECIFIC:
        raise BinaryFormatError(path, offset, f"fatbin entry flags {flags:#x} name two variants")
    variant: ArchSuffix = ""
    if flags & _FLAG_ARCH_SPECIFIC:
        variant = "a"
    elif flags & _FLAG_FAMILY_SPECIFIC:
        variant = "f"
    kind: Literal["sass", "ptx"] = "sass" if header.kind == _KIND_ELF else "ptx"
    prefix = "sm" if kind == "sass" else "compute"
    return FatbinEntry(
        kind=kind,
        arch=sys.intern(f"{prefix}_{header.sm}{variant}"),
        sm=header.sm,
        variant=variant,
        container=container,
        offset=offset,
        stored_size=header.stored_size,
        size=size,
        compression=compression,
        version=sys.intern(header.version),
    )


def _zero_padding(view: memoryview, pos: int) -> int:
    """How many bytes of zero padding start at ``pos``: up to the next 16-byte boundary, or at a
    boundary, a zero tail to the end of the section."""
    if view[pos] != 0:
        return 0
    stop = -(-pos // _CONTAINER_ALIGN) * _CONTAINER_ALIGN
    stop = len(view) if stop == pos else min(stop, len(view))
    with view[pos:stop] as run:
        return len(run) if run.tobytes().count(0) == len(run) else 0


def _decompress(
    stored: memoryview, compression: Compression, size: int, path: str, offset: int
) -> bytes:
    if compression == "zstd":
        try:
            import zstandard
        except ImportError:
            raise BinaryFormatError(
                path, offset, "the payload is zstd-compressed; pip install zstandard to read it"
            ) from None
        try:
            return zstandard.ZstdDecompressor().decompress(stored, max_output_size=size)
        except (zstandard.ZstdError, MemoryError) as error:
            raise BinaryFormatError(path, offset, f"corrupt zstd payload: {error}") from error
    try:
        import lz4.block  # type: ignore[import-untyped]
    except ImportError:
        raise BinaryFormatError(
            path, offset, "the payload is LZ4-compressed; pip install lz4 to read it"
        ) from None
    try:
        payload: bytes = lz4.block.decompress(stored, uncompressed_size=size)
    except (lz4.block.LZ4BlockError, MemoryError) as error:
        raise BinaryFormatError(path, offset, f"corrupt LZ4 payload: {error}") from error
    return payload


def _fatbin_section_bounds(image: ElfImage) -> tuple[int, int] | None:
    """File offset and size of the fatbin section that cuobjdump would list by default."""
    found: dict[str, SectionHeader] = {}
    for header in image.section_headers:
        if header.name in (EXECUTABLE_SECTION, RELOCATABLE_SECTION):
            found.setdefault(header.name, header)
    for name in (EXECUTABLE_SECTION, RELOCATABLE_SECTION):
        if name not in found:
            continue
        header = found[name]
        if header.type == SHT_NOBITS or header.offset + header.size > image.size:
            raise BinaryFormatError(
                image.name,
                header.where,
                f"section {name} ({header.size} bytes at {header.offset:#x}) is not in the file "
                f"of {image.size} bytes",
            )
        return header.offset, header.size
    return None
