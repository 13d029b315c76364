"""The one reader of ELF files and wheel members: files on disk are memory-mapped, wheel members
inflated in memory (never extracted), each once; its ELF headers are parsed once and shared by
the fatbin reader (fatbin.py) and the rules (rules/ and initexport.py, applied by abicheck.py
and verify.py). A wheel member is named ``x.whl!pkg/_C.abi3.so`` (member_name) wherever it is
shown."""

from __future__ import annotations

import bisect
import io
import mmap
import os
import re
import struct
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from wheelforge.binaries import bounded
from wheelforge.foundation import readers
from wheelforge.foundation.errors import BinaryFormatError

if TYPE_CHECKING:  # pyelftools loads in ~0.05 s: the functions that parse import it
    from elftools.elf.elffile import ELFFile

Buffer = bytes | bytearray | memoryview | mmap.mmap

ELF_MAGIC = b"\x7fELF"
# A shared object by its name: ``_C.abi3.so``, ``libfoo.so``, ``libfoo.so.12.4``.
SHARED_OBJECT_RE = re.compile(r"\.so(?:\.[0-9]+)*$")
MEMBER_SEPARATOR = "!"

SHT_NOBITS = 8  # a section that takes no room in the file (.bss)
_SHN_XINDEX = 0xFFFF  # e_shstrndx: the index is in section 0's sh_link
_SHT_STRTAB = 3  # the section name table's type
# Per ELF class (1: 32-bit, 2: 64-bit): where e_shoff lies and its format, where e_shentsize,
# e_shnum and e_shstrndx start, and a section header's sh_name, sh_type, sh_flags, sh_addr,
# sh_offset, sh_size and sh_link (the System V ABI's layout).
_LAYOUTS = {1: (0x20, "I", 0x2E, "IIIIIII"), 2: (0x28, "Q", 0x3A, "IIQQQQI")}
_NAME_CAP = 256  # bytes of a section's name read; longer names are not the sections read here


class SectionHeader(NamedTuple):
    """One entry of an ELF file's section header table."""

    name: str
    type: int  # sh_type: SHT_NOBITS and the others
    offset: int  # sh_offset: where its bytes lie in the file
    size: int  # sh_size
    where: int  # the file offset of this header itself, for error messages


def member_name(wheel: Path | str, member: str) -> str:
    """How a wheel member is named: ``x.whl!pkg/_C.abi3.so``."""
    return f"{wheel}{MEMBER_SEPARATOR}{member}"


def member_path(name: str) -> str:
    """The path inside the wheel of a member's name (``pkg/_C.abi3.so``); a plain file's name
    is returned as it is."""
    return name.rsplit(MEMBER_SEPARATOR, 1)[-1]


def split_member(name: str) -> tuple[str, str]:
    """A member's name as (wheel, path inside it); a plain file's name as ("", name)."""
    wheel, _, member = name.rpartition(MEMBER_SEPARATOR)
    return wheel, member


def is_member(name: str, member: str) -> bool:
    """Whether *name* names the wheel member *member* (of any wheel)."""
    return name.endswith(MEMBER_SEPARATOR + member)


def is_grafted(member: str) -> bool:
    """Whether a wheel member is a library auditwheel grafted into ``.libs`` (not the wheel's
    own)."""
    return ".libs/" in member


def rename_wheel(name: str, old: Path | str, new: Path | str) -> str:
    """A member's name after its wheel moved (staging copy → published wheel)."""
    return name.replace(str(old), str(new), 1)


class ViewStream:
    """A read-only file over a buffer, so pyelftools reads the headers of a large mapped file
    without a copy of it; remembers where the last read started, for error messages."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0
        self.last_read = 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:
            raise ValueError(f"seek to negative offset {base + offset}")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        self.last_read = self._pos
        stop = len(self._view) if size < 0 else self._pos + size
        data = self._view[self._pos : stop].tobytes()
        self._pos += len(data)
        return data


class NotRetained(BaseException):
    """A reader asked for bytes the stream did not keep. A BaseException: pyelftools' parser
    wraps every Exception raised by a read into its own (construct's FieldError)."""

    def __init__(self, offset: int, size: int) -> None:
        super().__init__(f"{size} bytes at {offset:#x} were not kept")
        self.offset, self.size = offset, size


@dataclass
class Retained:
    """The kept byte ranges of a member of *size* bytes, by offset, not overlapping."""

    size: int
    sha256: bytes | None = None  # of all its bytes, when the stream was asked for it
    starts: list[int] = field(default_factory=list)
    pieces: list[bytes | bytearray] = field(default_factory=list)

    def add(self, offset: int, data: bytes | bytearray) -> None:
        i = bisect.bisect(self.starts, offset)
        self.starts.insert(i, offset)
        self.pieces.insert(i, data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(
                f"{size} bytes at {offset:#x} lie outside the file ({self.size} bytes)"
            )
        i = bisect.bisect(self.starts, offset) - 1
        if i >= 0 and offset + size <= self.starts[i] + len(self.pieces[i]):
            rel = offset - self.starts[i]
            return bytes(self.pieces[i][rel : rel + size])
        raise NotRetained(offset, size)


class Prescanned(Protocol):
    """A streamed member's fatbin entry headers, read on the way (fatscan.FatbinScan)."""

    def entries_for(self, start: int, size: int, path: str) -> list[Any] | None: ...


class RetainedStream(ViewStream):
    """A read-only file over the parts of a member the stream kept (stream.py): a read of a part
    it did not keep raises stream.NotRetained, and the walk reads the member again whole."""

    def __init__(self, kept: Retained) -> None:
        self._kept = kept
        self._pos = 0
        self.last_read = 0
        self._size = kept.size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"seek to negative offset {base + offset}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        self.last_read = self._pos
        size = max(0, min(self._size - self._pos, size if size >= 0 else self._size))
        data = self._kept.read(self._pos, size)
        self._pos += len(data)
        return data


class ElfImage:
    """One ELF file's bytes (a mapped file, an inflated wheel member, or the parts of a streamed
    member that were kept, with its fatbin's entry headers read on the way) and its headers,
    parsed on first use and then shared. Use it as a context manager: the view it holds must be
    released before a mapped file is closed."""

    def __init__(
        self,
        name: str,
        data: Buffer | Retained,
        *,
        member: str | None = None,
        scan: Prescanned | None = None,
    ) -> None:
        self.name = name  # the path, or x.whl!member
        self.member = member  # the path inside the wheel, for a wheel member
        self.kept = data if isinstance(data, Retained) else None
        self._view = memoryview(b"" if isinstance(data, Retained) else data)
        self.size = data.size if isinstance(data, Retained) else len(self._view)
        self.scan = scan  # the fatbin entry headers read from the stream (streamed members)

    def __enter__(self) -> ElfImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self._view.release()

    @property
    def view(self) -> memoryview:
        """All its bytes; a streamed member has only the parts it kept, so asking for all of
        them reads it whole (NotRetained: the walk's fallback)."""
        if self.kept is not None:
            raise NotRetained(0, self.size)
        return self._view

    @cached_property
    def stream(self) -> ViewStream:
        return RetainedStream(self.kept) if self.kept is not None else ViewStream(self._view)

    def read(self, offset: int, size: int) -> bytes:
        """*size* bytes at *offset*; a range outside the file is the file's corruption."""
        if self.kept is not None:
            return self.kept.read(offset, size)
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(
                f"{size} bytes at {offset:#x} lie outside the file ({self.size} bytes)"
            )
        return self._view[offset : offset + size].tobytes()

    @cached_property
    def section_headers(self) -> tuple[SectionHeader, ...]:
        """The section header table and the sections' names, read with struct: the only ELF
        structure the fatbin reader needs, and pyelftools (``elf``) loads in ~0.04 s, most of
        an ``inspect`` of a small library (issue 33). Nonsense is BinaryFormatError."""
        if self.size < 4 or self.read(0, 4) != ELF_MAGIC:
            raise BinaryFormatError(self.name, 0, "not an ELF file (no \\x7fELF magic)")
        try:
            elf_class, data = self.read(4, 2)
            if elf_class not in _LAYOUTS or data not in (1, 2):
                raise BinaryFormatError(
                    self.name, 4, f"corrupt ELF headers (class {elf_class}, data encoding {data})"
                )
            order = "<" if data == 1 else ">"
            shoff_at, shoff_format, counts_at, layout = _LAYOUTS[elf_class]
            (shoff,) = struct.unpack(
                order + shoff_format, self.read(shoff_at, struct.calcsize(shoff_format))
            )
            entsize, count, names_index = struct.unpack(order + "HHH", self.read(counts_at, 6))
        except ValueError as error:  # a file shorter than its ELF header
            raise BinaryFormatError(self.name, 0, f"corrupt ELF headers ({error})") from None
        entry = struct.Struct(order + layout)
        if not shoff:
            return ()
        if entsize < entry.size:
            raise BinaryFormatError(
                self.name, counts_at, f"corrupt ELF headers (e_shentsize {entsize})"
            )

        def header(index: int) -> tuple[int, ...]:
            where = shoff + index * entsize
            try:
                return entry.unpack(self.read(where, entry.size))
            except ValueError as error:
                raise BinaryFormatError(
                    self.name, where, f"corrupt ELF headers (section header {index}: {error})"
                ) from None

        if count == 0 or names_index == _SHN_XINDEX:  # extended numbering: section 0 says
            first = header(0)
            count = count or first[5]
            if names_index == _SHN_XINDEX:
                names_index = first[6]
                if not names_index:  # SHN_XINDEX sends the reader to section 0, which names none
                    raise BinaryFormatError(
                        self.name,
                        counts_at + 4,
                        "corrupt ELF headers (e_shstrndx is SHN_XINDEX, and section 0's sh_link, "
                        "where the ELF specification puts the section name table's index, is 0)",
                    )
        if shoff + count * entsize > self.size:
            raise BinaryFormatError(
                self.name,
                shoff,
                f"corrupt ELF headers ({count} section headers at {shoff:#x} run past the end "
                f"of the file of {self.size} bytes)",
            )
        if names_index >= count:
            raise BinaryFormatError(
                self.name,
                counts_at + 4,
                f"corrupt ELF headers (section name table {names_index} of {count} sections)",
            )
        raw = [header(index) for index in range(count)]
        names = raw[names_index] if names_index else None
        if names is not None and names[1] != _SHT_STRTAB:
            # Names read from another section's bytes would hide the fatbin ("no CUDA code").
            raise BinaryFormatError(
                self.name,
                shoff + names_index * entsize,
                f"corrupt ELF headers (the section name table, section {names_index}, is of "
                f"type {names[1]}, not SHT_STRTAB)",
            )
        return tuple(
            SectionHeader(
                name=self._section_name(names, fields[0]),
                type=fields[1],
                offset=fields[4],
                size=fields[5],
                where=shoff + index * entsize,
            )
            for index, fields in enumerate(raw)
        )

    def _section_name(self, names: tuple[int, ...] | None, at: int) -> str:
        """The name at *at* in the section name table *names* (its header), "" without one."""
        if names is None:
            return ""
        start, size = names[4], names[5]
        if at >= size or start + size > self.size:
            raise BinaryFormatError(
                self.name,
                start,
                f"corrupt ELF headers (a section name at {at} of a name table of {size} bytes "
                f"at {start:#x}, in a file of {self.size} bytes)",
            )
        text = self.read(start + at, min(size - at, _NAME_CAP)).split(b"\0", 1)[0]
        return text.decode("utf-8", errors="replace")

    @cached_property
    def elf(self) -> ELFFile:
        """The parsed headers; pyelftools errors are the caller's to name."""
        from elftools.elf.elffile import ELFFile

        if self.size < 4 or self.read(0, 4) != ELF_MAGIC:
            raise BinaryFormatError(self.name, 0, "not an ELF file (no \\x7fELF magic)")
        return ELFFile(cast(IO[bytes], self.stream))


@contextmanager
def open_elf_file(path: Path) -> Iterator[ElfImage]:
    """An ELF file on disk, memory-mapped: only the pages read are loaded."""
    try:
        with readers.open_regular(path) as file:
            if os.fstat(file.fileno()).st_size == 0:
                with ElfImage(str(path), b"") as image:
                    yield image
                return
            with (
                mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
                ElfImage(str(path), mapped) as image,
            ):
                yield image
    except OSError as error:
        raise BinaryFormatError(str(path), None, f"cannot read: {error.strerror}") from error


# PEP 825: a variant wheel's ``*.dist-info`` holds this file (variantlib's
# VARIANT_DIST_INFO_FILENAME, checked by the tests), and its file name ends in a variant label.
VARIANT_DIST_INFO_FILENAME = "variant.json"


class WheelReader:
    """An open wheel: its member names, text members, and its ELF members one at a time."""

    def __init__(self, path: Path, zf: zipfile.ZipFile) -> None:
        self.path = path
        self.zip = zf
        self.names = zf.namelist()

    def dist_info_member(self, filename: str) -> str | None:
        """The member ``<name>.dist-info/<filename>``, if the wheel has one."""
        for name in self.names:
            head, _, tail = name.partition("/")
            if head.endswith(".dist-info") and tail == filename:
                return name
        return None

    @property
    def tagged_name(self) -> str:
        """The file name as packaging parses it: a variant wheel's label (its last ``-`` part;
        the wheel says it is one by holding ``variant.json``) is dropped."""
        name = self.path.name
        if self.dist_info_member(VARIANT_DIST_INFO_FILENAME) is None:
            return name
        stem, dash, _label = name.removesuffix(".whl").rpartition("-")
        return f"{stem}.whl" if dash else name

    def read_text(self, name: str) -> str:
        """A text member (METADATA), read within the caps of bounded.py."""
        info = self.zip.getinfo(name)
        return bounded.read_member(self.zip, info, member_name(self.path, name)).decode(
            "utf-8", errors="replace"
        )

    def read_headers(self, name: str) -> str:
        """The headers of a METADATA member (bounded.member_headers), as text."""
        info = self.zip.getinfo(name)
        headers = bounded.member_headers(self.zip, info, member_name(self.path, name))
        return headers.decode("utf-8", errors="replace")

    def elf_members(self, skip: Callable[[str], bool] = lambda _: False) -> Iterator[ElfImage]:
        """Each ELF member (sorted by name, *skip* left out), inflated once within the caps of
        bounded.py; only the first block of the others is inflated."""
        for info in self.elf_infos(skip):
            name = member_name(self.path, info.filename)
            with ElfImage(
                name, bounded.read_member(self.zip, info, name), member=info.filename
            ) as image:
                yield image

    def elf_infos(self, skip: Callable[[str], bool] = lambda _: False) -> Iterator[zipfile.ZipInfo]:
        """The ELF members (sorted by name, *skip* left out); only their first block is
        inflated to tell."""
        for info in sorted(self.zip.infolist(), key=lambda info: info.filename):
            # Not ZipInfo.is_dir(): it raises IndexError on an empty name (one starting with NUL).
            if not info.filename or info.filename.endswith("/") or skip(info.filename):
                continue
            display = member_name(self.path, info.filename)
            if bounded.member_is_elf(self.zip, info, display):
                yield info
            elif SHARED_OBJECT_RE.search(info.filename):
                # The loader would refuse it ("invalid ELF header"): a wheel that ships it is
                # broken, never one with nothing to check (621 released wheels' 6,320 members
                # named so are all ELF).
                raise BinaryFormatError(
                    display,
                    0,
                    "named as a shared object but not an ELF file (no \\x7fELF magic): the loader refuses it",
                )


@contextmanager
def open_wheel(path: Path) -> Iterator[WheelReader]:
    try:
        zf = zipfile.ZipFile(path)
    except OSError as error:
        raise BinaryFormatError(str(path), None, f"cannot read: {error.strerror}") from error
    except bounded.INFLATE_ERRORS as error:
        raise BinaryFormatError(str(path), None, f"not a readable wheel (zip): {error}") from error
    with zf:
        yield WheelReader(path, zf)
