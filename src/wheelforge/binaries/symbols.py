"""The dynamic symbols of one ELF file, read in-process from its (shared) parsed headers: the
undefined names it needs, the module init functions it exports, the newest glibc symbol version,
its machine and whether it is a program; and libstdc++'s own demangler, which the rules use to
name what a symbol is. Symbol tables are decoded with struct from the section's bytes (pyelftools
builds an object per symbol: seconds on a large wheel), their headers by pyelftools."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wheelforge.binaries.elf import ElfImage
from wheelforge.foundation.errors import BinaryFormatError
from wheelforge.toolchain.shims import Version2

if TYPE_CHECKING:  # pyelftools loads in ~0.05 s, ctypes ~0.01 s: the functions that use them do
    import ctypes

    from elftools.elf.elffile import ELFFile

_MAX_VERSION_ENTRIES = 4096  # libraries need a handful of sonames; glibc itself has ~40
# ASCII digits, at most 4 (numbers.py): a hostile name must not reach int() with 5,000.
_MAX_VERSION_SECTIONS = 4  # one per file; room for a linker's oddity
_GLIBC_RE = re.compile(r"^GLIBC_([0-9]{1,4})\.([0-9]{1,4})")
_MACHINES = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
}


# What Python's import looks up in an extension module (PEP 489's PyInit_, PEP 793's
# PyModExport_, and their non-ASCII-name variants).
MODULE_INIT_PREFIXES = ("PyInit_", "PyInitU_", "PyModExport_", "PyModExportU_")
_SYM64 = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size
_SYM32 = struct.Struct("<IIIBBH")  # st_name, st_value, st_size, st_info, st_other, st_shndx
_STB_GLOBAL, _STB_WEAK = 1, 2
_STV_DEFAULT, _STV_PROTECTED = 0, 3


@dataclass(frozen=True, kw_only=True)
class SymbolFacts:
    """What the symbol-level rules need of one ELF file."""

    undefined: tuple[str, ...]  # the undefined dynamic symbols, sorted
    glibc: Version2 | None  # the newest GLIBC_x.y symbol version it needs
    versions: tuple[str, ...] = ()  # every symbol version it needs (GLIBCXX_3.4.30, ...), sorted
    machine: str  # x86_64, aarch64, ... (the ELF e_machine)
    module_inits: tuple[str, ...] = ()  # exported PyInit_* / PyModExport_* it defines, sorted
    program: bool = False  # an executable (ET_EXEC, or a program interpreter), not a library


@dataclass(frozen=True)
class SymbolEntry:
    """One entry of a symbol table, as the rules need it."""

    name: str
    defined: bool  # st_shndx is not SHN_UNDEF
    exported: bool  # global or weak binding, default or protected visibility
    weak: bool = False  # weak binding: an undefined one may stay unresolved
    index: int = 0  # its place in the table (the version table is indexed by it)


def symbol_table(image: ElfImage, section: str) -> list[SymbolEntry] | None:
    """The entries of symbol table *section* (``.dynsym``, ``.symtab``), None when the file has
    none; the headers come from pyelftools, the entries are decoded with struct."""
    from elftools.common.exceptions import ELFError

    elf = image.elf
    found = _section_header(elf, section)
    if found is None or found["sh_type"] not in ("SHT_DYNSYM", "SHT_SYMTAB"):
        return None
    strings = elf._get_section_header(found["sh_link"]) if found["sh_link"] else None
    if strings is None or strings["sh_type"] != "SHT_STRTAB":
        raise ELFError(f"symbol table {section} links no string table")
    wide = elf.elfclass == 64
    entry = _SYM64 if wide else _SYM32
    if not elf.little_endian:
        entry = struct.Struct(">" + entry.format[1:])
    if found["sh_entsize"] != entry.size:
        raise ELFError(f"symbol table {section} has entries of {found['sh_entsize']} bytes")
    count = found["sh_size"] // entry.size
    table = image.read(found["sh_offset"], count * entry.size)
    names = image.read(strings["sh_offset"], strings["sh_size"])
    out: list[SymbolEntry] = []
    for index, fields in enumerate(entry.iter_unpack(table)):
        if wide:
            name_at, info, other, shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            name_at, info, other, shndx = fields[0], fields[3], fields[4], fields[5]
        if not name_at:
            continue
        end = names.find(b"\0", name_at)
        if name_at >= len(names) or end < 0:
            raise ELFError(f"a symbol name of {section} lies outside its string table")
        bind, visibility = info >> 4, other & 3
        out.append(
            SymbolEntry(
                name=names[name_at:end].decode("utf-8", errors="replace"),
                defined=shndx != 0,
                exported=bind in (_STB_GLOBAL, _STB_WEAK)
                and visibility in (_STV_DEFAULT, _STV_PROTECTED),
                weak=bind == _STB_WEAK,
                index=index,
            )
        )
    return out


def _section_header(elf: ELFFile, name: str) -> Any:
    """The header of the section named *name*, read header by header (pyelftools'
    get_section_by_name builds every section object first)."""
    for index in range(elf.num_sections()):
        header = elf._get_section_header(index)
        if elf._get_section_name(header) == name:
            return header
    return None


@cache
def _cxa_demangle() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:  # type: ignore[name-defined]
    import ctypes  # only where a symbol is demangled: a no-op build never does

    # Sonames, not ctypes.util.find_library: that one runs ldconfig in a subprocess.
    try:
        lib = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    return fn, free


def demangle(symbol: str) -> str:
    """The C++ name of a mangled symbol (through libstdc++'s own demangler), else the symbol."""
    funcs = _cxa_demangle()
    if funcs is None or not symbol.startswith("_Z"):
        return symbol
    import ctypes

    fn, free = funcs
    status = ctypes.c_int()
    ptr = fn(symbol.encode(), None, None, ctypes.byref(status))
    if not ptr:
        return symbol
    try:
        return ctypes.string_at(ptr).decode(errors="replace") if status.value == 0 else symbol
    finally:
        free(ptr)


# What pyelftools raises on a corrupt file: whatever the failing parser raised.
def parse_errors() -> tuple[type[BaseException], ...]:
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError

    return (
        ELFError,
        ValueError,
        KeyError,
        OSError,
        AssertionError,
        AttributeError,
        TypeError,
        IndexError,
        UnicodeDecodeError,
        ZeroDivisionError,
        struct.error,
        ConstructError,
    )


def parser_raised(exc: BaseException) -> bool:
    """Whether *exc* is the parser's on a corrupt file, not a bug of the code that called it:
    one of pyelftools' or struct's own errors or an OSError, or any exception raised inside
    pyelftools itself (it raises ValueError, KeyError, ... on bad input). A rule's own code
    that raises is a bug in the rule (errors.RuleBug), never "not a readable ELF file"."""
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError

    if isinstance(exc, (ELFError, ConstructError, struct.error, OSError, UnicodeDecodeError)):
        return True
    innermost = exc.__traceback__
    while innermost is not None and innermost.tb_next is not None:
        innermost = innermost.tb_next
    if innermost is None:
        return False
    return f"{os.sep}elftools{os.sep}" in innermost.tb_frame.f_code.co_filename


def read_symbols(image: ElfImage) -> SymbolFacts:
    """The symbol facts of one ELF file, from its (shared) parsed headers."""
    try:
        elf = image.elf
        _check_section_bounds(elf, image.size)
        dynsym = symbol_table(image, ".dynsym") or []
        undefined = tuple(sorted({s.name for s in dynsym if not s.defined}))
        inits = {
            s.name
            for s in dynsym
            if s.defined and s.exported and s.name.startswith(MODULE_INIT_PREFIXES)
        }
        versions = _versions_needed(elf)
        glibc = _newest_glibc(versions)
        machine = _MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
        program = elf["e_type"] == "ET_EXEC" or any(
            segment["p_type"] == "PT_INTERP" for segment in elf.iter_segments()
        )
    except parse_errors() as exc:
        raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
    return SymbolFacts(
        undefined=undefined,
        glibc=glibc,
        versions=versions,
        machine=machine,
        module_inits=tuple(sorted(inits)),
        program=program,
    )


def _check_section_bounds(elf: ELFFile, size: int) -> None:
    """Every section with contents lies inside the file: pyelftools does not check, and a size
    from a corrupt header would turn into a loop over symbols that aren't there."""
    from elftools.common.exceptions import ELFError

    for section in elf.iter_sections():
        if section["sh_type"] == "SHT_NOBITS":
            continue
        if section["sh_offset"] + section["sh_size"] > size:
            raise ELFError(
                f"section {section.name or '?'} ({section['sh_size']} bytes at offset "
                f"{section['sh_offset']:#x}) runs past the end of the file ({size} bytes)"
            )
        if section["sh_type"] in ("SHT_DYNSYM", "SHT_SYMTAB") and section["sh_entsize"] == 0:
            raise ELFError(f"symbol table {section.name or '?'} has entries of size 0")


def _newest_glibc(versions: tuple[str, ...]) -> Version2 | None:
    """The newest GLIBC_x.y among the symbol versions a file needs."""
    glibc: Version2 | None = None
    for name in versions:
        if m := _GLIBC_RE.match(name):
            version = (int(m[1]), int(m[2]))
            glibc = version if glibc is None else max(glibc, version)
    return glibc


def _versions_needed(elf: ELFFile) -> tuple[str, ...]:
    """Every symbol version the file needs (GLIBC_2.34, GLIBCXX_3.4.30, CXXABI_1.3.13, ...)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.gnuversions import GNUVerNeedSection

    names: set[str] = set()
    sections = [s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection)]
    # A linker writes one .gnu.version_r; a thousand of them, each claiming 4096 entries, kept
    # `check` busy for minutes on a 1 MB file (the per-section cap alone did not bound it).
    if len(sections) > _MAX_VERSION_SECTIONS:
        raise ELFError(f"implausible count of version-need sections: {len(sections)}")
    seen = 0
    for section in sections:
        # The entry count comes from the header (sh_info, up to 2**32) and a zero vn_next
        # repeats one entry: a corrupt count must not become an endless loop.
        if section.num_versions() > _MAX_VERSION_ENTRIES:
            raise ELFError(f"implausible count of version needs: {section.num_versions()}")
        for _, auxiliaries in section.iter_versions():
            for aux in auxiliaries:
                seen += 1  # vn_cnt (up to 65535) per entry, and a zero vna_next repeats too
                if seen > _MAX_VERSION_ENTRIES:
                    raise ELFError(f"implausible count of version needs: over {seen - 1}")
                names.add(aux.name)
    return tuple(sorted(names))


# The dynamic section's tags linkage reads, and how many entries it reads at most (a linker
# writes a few dozen; a hostile count must not become a long loop).
_DT_NULL, _DT_NEEDED, _DT_SONAME = 0, 1, 14
_MAX_DYNAMIC = 4096
_DYN64, _DYN32 = struct.Struct("<qQ"), struct.Struct("<iI")


@dataclass(frozen=True, kw_only=True)
class Linkage:
    """How one ELF file is linked at load time: the libraries it needs (DT_NEEDED), its own
    soname, the undefined symbols the loader must find with no version to say which library has
    them (strong, unversioned: a versioned one names its library, GLIBC_2.17, libcudart.so.12),
    and the symbols it exports to the files that need it."""

    needed: tuple[str, ...]
    soname: str | None
    unbound: tuple[str, ...]  # sorted
    exports: frozenset[str]


def read_linkage(image: ElfImage) -> Linkage:
    """The Linkage of one ELF file, from its .dynsym, .gnu.version and .dynamic."""
    from elftools.common.exceptions import ELFError

    elf = image.elf
    dynsym = symbol_table(image, ".dynsym") or []
    versions = _symbol_versions(image, len(dynsym) + 1)
    unbound = sorted(
        {
            s.name
            for s in dynsym
            if not s.defined and not s.weak and versions.get(s.index, 0) < 2  # 0, 1: no version
        }
    )
    exports = frozenset(s.name for s in dynsym if s.defined and s.exported)
    needed: list[str] = []
    soname = None
    found = _section_header(elf, ".dynamic")
    if found is not None and found["sh_type"] == "SHT_DYNAMIC":
        strings = elf._get_section_header(found["sh_link"]) if found["sh_link"] else None
        if strings is None or strings["sh_type"] != "SHT_STRTAB":
            raise ELFError(".dynamic links no string table")
        names = image.read(strings["sh_offset"], strings["sh_size"])
        entry = _DYN64 if elf.elfclass == 64 else _DYN32
        if not elf.little_endian:
            entry = struct.Struct(">" + entry.format[1:])
        count = min(found["sh_size"] // entry.size, _MAX_DYNAMIC)
        for tag, value in entry.iter_unpack(image.read(found["sh_offset"], count * entry.size)):
            if tag == _DT_NULL:
                break
            if tag in (_DT_NEEDED, _DT_SONAME) and value < len(names):
                end = names.find(b"\0", value)
                text = names[value : end if end >= 0 else len(names)].decode(errors="replace")
                if tag == _DT_NEEDED:
                    needed.append(text)
                else:
                    soname = text
    return Linkage(needed=tuple(needed), soname=soname, unbound=tuple(unbound), exports=exports)


def _symbol_versions(image: ElfImage, limit: int) -> dict[int, int]:
    """Each .dynsym index's entry of .gnu.version (0: local, 1: global, 2 and up: a version
    defined or needed), for at most *limit* entries."""
    found = None
    elf = image.elf
    for index in range(elf.num_sections()):
        header = elf._get_section_header(index)
        if header["sh_type"] == "SHT_GNU_versym":
            found = header
            break
    if found is None:
        return {}
    count = min(found["sh_size"] // 2, limit)
    fmt = "<" if elf.little_endian else ">"
    data = image.read(found["sh_offset"], count * 2)
    return {i: v & 0x7FFF for i, (v,) in enumerate(struct.iter_unpack(fmt + "H", data))}


# torch's own libraries in its lib folder: what an extension that links them may bind to.
_TORCH_LIBRARY_RE = re.compile(r"^lib(?:torch|c10|shm)[\w-]*\.so(?:\.[0-9.]+)?$")


@dataclass(frozen=True)
class LibraryExports:
    """What torch's libraries in *folders* export, read only when a rule first asks (a torch's
    tables take seconds to read; most binaries never need them); *version*: that torch's
    (2.13.0+cpu), when known."""

    folders: tuple[Path, ...]
    version: str | None = None

    def get(self) -> frozenset[str] | None:
        return library_exports(self.folders)

    def linkage(self, name: str) -> Linkage | None:
        """The Linkage of the library *name* in *folders* (torch/lib: torch's own and what it
        ships beside them, libgomp), None when none holds it or it cannot be read."""
        if "/" in name:
            return None
        where = next((Path(f, name) for f in self.folders if Path(f, name).is_file()), None)
        if where is None:
            return None
        stat = where.stat()
        return _linkage_of(str(where), stat.st_size, stat.st_mtime_ns)


@cache
def _linkage_of(path: str, size: int, mtime: int) -> Linkage | None:
    """*size* and *mtime* are the cache's key with the path: a changed file is read again."""
    from wheelforge.binaries.elf import open_elf_file

    del size, mtime
    unreadable: tuple[type[BaseException], ...] = (OSError, BinaryFormatError, *parse_errors())
    try:
        with open_elf_file(Path(path)) as image:
            return read_linkage(image)
    except unreadable:
        return None


def library_exports(folders: Iterable[Path]) -> frozenset[str] | None:
    """What torch's libraries (libtorch*, libc10*, libshm) in *folders* export, with what the
    libraries they need from those folders export, transitively (the loader's scope for an
    extension that links libtorch_cpu holds the libgomp libtorch_cpu needs: GOMP_parallel binds
    there); read from their .dynsym (mapped: only the tables' pages are read); None when no
    folder holds one of torch's."""
    folders = tuple(f for f in folders if f.is_dir())
    found = tuple(
        sorted(
            p
            for folder in folders
            for p in folder.iterdir()
            if _TORCH_LIBRARY_RE.match(p.name) and p.is_file()
        )
    )
    if not found:
        return None
    return _exports(
        tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in found),
        tuple(str(f) for f in folders),
    )


@cache
def _exports(files: tuple[tuple[str, int, int], ...], folders: tuple[str, ...]) -> frozenset[str]:
    from wheelforge.binaries.elf import open_elf_file

    out: set[str] = set()
    unreadable: tuple[type[BaseException], ...] = (OSError, BinaryFormatError, *parse_errors())
    queue = [Path(name) for name, _, _ in files]
    seen = {p.name for p in queue}
    while queue:
        path = queue.pop()
        try:
            with open_elf_file(path) as image:
                linkage = read_linkage(image)
        except unreadable:
            continue  # an unreadable library of torch's: its symbols count as unknown
        out |= linkage.exports
        for name in linkage.needed:
            # Only a library beside torch's (its lib folder): the system's are versioned.
            if name in seen or "/" in name:
                continue
            seen.add(name)
            where = next((Path(f, name) for f in folders if Path(f, name).is_file()), None)
            if where is not None:
                queue.append(where)
    return frozenset(out)
