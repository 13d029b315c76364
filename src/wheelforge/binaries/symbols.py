"""The dynamic symbols of one ELF file, read in-process from its (shared) parsed headers: the
undefined names it needs, the newest glibc symbol version, its machine; and libstdc++'s own
demangler, which the rules use to name what a symbol is."""

from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from wheelforge.binaries.elf import ElfImage
from wheelforge.foundation.errors import BinaryFormatError
from wheelforge.toolchain.shims import Version2

if TYPE_CHECKING:  # pyelftools loads in ~0.05 s: the functions that parse import it
    from elftools.elf.elffile import ELFFile

_MAX_VERSION_ENTRIES = 4096  # libraries need a handful of sonames; glibc itself has ~40
_GLIBC_RE = re.compile(r"^GLIBC_(\d+)\.(\d+)")
_MACHINES = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
}


@dataclass(frozen=True, kw_only=True)
class SymbolFacts:
    """What the symbol-level rules need of one ELF file."""

    undefined: tuple[str, ...]  # the undefined dynamic symbols, sorted
    glibc: Version2 | None  # the newest GLIBC_x.y symbol version it needs
    machine: str  # x86_64, aarch64, ... (the ELF e_machine)


@cache
def _cxa_demangle() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:  # type: ignore[name-defined]
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


def read_symbols(image: ElfImage) -> SymbolFacts:
    """The symbol facts of one ELF file, from its (shared) parsed headers."""
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = image.elf
        _check_section_bounds(elf, image.size)
        dynsym = elf.get_section_by_name(".dynsym")
        undefined: tuple[str, ...] = ()
        if isinstance(dynsym, SymbolTableSection):
            names = {
                s.name for s in dynsym.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"
            }
            undefined = tuple(sorted(names))
        glibc = _glibc_needed(elf)
        machine = _MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
    except parse_errors() as exc:
        raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
    return SymbolFacts(undefined=undefined, glibc=glibc, machine=machine)


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


def _glibc_needed(elf: ELFFile) -> Version2 | None:
    """The newest GLIBC_x.y symbol version the file needs."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.gnuversions import GNUVerNeedSection

    glibc: Version2 | None = None
    for section in elf.iter_sections():
        if not isinstance(section, GNUVerNeedSection):
            continue
        # The entry count comes from the header (sh_info, up to 2**32) and a zero vn_next
        # repeats one entry: a corrupt count must not become an endless loop.
        if section.num_versions() > _MAX_VERSION_ENTRIES:
            raise ELFError(f"implausible count of version needs: {section.num_versions()}")
        for _, auxiliaries in section.iter_versions():
            for aux in auxiliaries:
                if m := _GLIBC_RE.match(aux.name):
                    version = (int(m[1]), int(m[2]))
                    glibc = version if glibc is None else max(glibc, version)
    return glibc
