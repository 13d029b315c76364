"""The stable-ABI rules, one function each, on the facts of one ELF file (abicheck.py applies
them to files and wheels):

- no undefined C++ symbol of libtorch (``c10::``, ``at::``, ``torch::``, ``caffe2::``): those
  change with every torch release;
- every C shim function used (``aoti_torch_*``, ``torch_*``) exists in the lowest torch the
  wheel supports (see shims.py for how that is known);
- every Python C API symbol used is in the limited API of the wheel's abi3 tag;
- the wheel's tags agree with its binaries: glibc symbol versions within the manylinux tag, the
  machine (abicheck.py adds abi3 module file names);
- the declared torch and Python floors are not below the ones the binary needs (floor).
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from wheelforge.binaries.elf import ElfImage
from wheelforge.foundation.errors import BinaryFormatError
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2

if TYPE_CHECKING:  # pyelftools loads in ~0.05 s: the functions that parse import it
    from elftools.elf.elffile import ELFFile

Rule = Literal["floor", "cxx-symbol", "shim-version", "python-api", "tags", "layout", "module-init"]
_MAX_VERSION_ENTRIES = 4096  # libraries need a handful of sonames; glibc itself has ~40
_LIBTORCH_CXX_RE = re.compile(r"(?<![\w:])(c10|at|torch|caffe2)::")
# ASCII digits, at most 4 (numbers.py): a hostile name must not reach int() with 5,000.
_GLIBC_RE = re.compile(r"^GLIBC_([0-9]{1,4})\.([0-9]{1,4})")
_MANYLINUX_RE = re.compile(r"^manylinux_([0-9]{1,4})_([0-9]{1,4})_(\w+)$")
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_MACHINES = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
}
_HINTS = {
    "torch::Library": "TORCH_LIBRARY from torch/library.h; use STABLE_TORCH_LIBRARY from torch/csrc/stable/library.h",
    "at::Tensor": "at::Tensor from ATen; use torch::stable::Tensor from torch/csrc/stable/tensor.h",
    "c10::Error": "TORCH_CHECK from c10; use STD_TORCH_CHECK from torch/headeronly/util/Exception.h",
    "c10::cuda": "c10/cuda helpers; use aoti_torch_get_current_cuda_stream and torch::stable::accelerator",
}


@dataclass(frozen=True, kw_only=True)
class Violation:
    binary: str
    rule: Rule
    symbol: str | None
    message: str


@dataclass(frozen=True, kw_only=True)
class CheckTarget:
    """What the binaries are checked against."""

    torch: Version2  # the lowest torch they must load on
    python: Version2 | None  # the abi3 floor (cp310 → (3, 10)); None: no limited-API rule
    guards: dict[str, Version2 | None]  # shim header guards of the build torch (may be empty)


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


@dataclass(frozen=True)
class ElfFacts:
    undefined: tuple[str, ...]
    glibc: Version2 | None
    machine: str


def elf_facts(image: ElfImage) -> ElfFacts:
    """What the rules need of an ELF file, read from its (shared) parsed headers."""
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = image.elf
        _check_section_bounds(elf, image.size)
        dynsym = elf.get_section_by_name(".dynsym")
        undefined = (
            tuple(
                sorted(
                    {
                        s.name
                        for s in dynsym.iter_symbols()
                        if s.name and s["st_shndx"] == "SHN_UNDEF"
                    }
                )
            )
            if isinstance(dynsym, SymbolTableSection)
            else ()
        )
        glibc = _glibc_needed(elf)
        machine = _MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
    except (ELFError, ValueError, KeyError, OSError, AssertionError, AttributeError,
            TypeError, IndexError, UnicodeDecodeError, ZeroDivisionError, struct.error,
            ConstructError) as exc:  # fmt: skip
        # pyelftools reports corruption with whatever the failing parser raised.
        raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
    return ElfFacts(undefined=undefined, glibc=glibc, machine=machine)


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


def cxx_violations(path: str, undefined: Sequence[str]) -> list[Violation]:
    out = []
    for symbol in undefined:
        if not symbol.startswith("_Z"):
            continue
        name = demangle(symbol)
        if not _LIBTORCH_CXX_RE.search(name):
            continue
        hint = next((h for key, h in _HINTS.items() if key in name), None)
        fix = (
            f"it comes from {hint}"
            if hint
            else "include only torch/csrc/stable and torch/headeronly headers"
        )
        out.append(
            Violation(
                binary=path,
                rule="cxx-symbol",
                symbol=symbol,
                message=(
                    f"{path} uses {name} ({symbol}), a C++ symbol of libtorch: the binary is not on the "
                    f"stable ABI and fails to load ('undefined symbol') on other torch versions; {fix}"
                ),
            )
        )
    return out


def shim_violations(path: str, used: Sequence[str], target: CheckTarget) -> list[Violation]:
    out = []
    major, minor = target.torch
    for name in used:
        verdict = shims.judge(name, target.torch, target.guards)
        if verdict.ok:
            continue
        if verdict.introduced is None:
            why = f"which no torch library or header declares ({verdict.source})"
            fix = "check the name, or that it is not a private libtorch function"
        else:
            since = f"{verdict.introduced[0]}.{verdict.introduced[1]}"
            why = f"which torch {major}.{minor} lacks: it arrived in torch {since} (per {verdict.source})"
            fix = (
                f"build with -DTORCH_TARGET_VERSION for torch {major}.{minor} so the headers hide it "
                f"(wheelforge sets it from the matrix's lowest torch), or raise the lowest torch to {since}"
            )
        out.append(
            Violation(
                binary=path,
                rule="shim-version",
                symbol=name,
                message=f"{path} uses the shim function {name}, {why}; {fix}",
            )
        )
    return out


def python_violations(
    path: str, undefined: Sequence[str], floor: Version2 | None
) -> list[Violation]:
    if floor is None:
        return []
    # Imported here: abi3info's tables take ~0.1 s to load, and a no-op build reads no binary.
    import abi3info
    from abi3info.models import PyVersion, Symbol

    out = []
    tag = f"cp{floor[0]}{floor[1]}"
    for name in undefined:
        if not name.startswith(("Py", "_Py")):
            continue
        member = abi3info.FUNCTIONS.get(Symbol(name)) or abi3info.DATAS.get(Symbol(name))
        if member is None:
            out.append(
                Violation(
                    binary=path,
                    rule="python-api",
                    symbol=name,
                    message=f"{path} uses {name}, which is not in Python's limited API, so the {tag}-abi3 tag is wrong; "
                    "build with -DPy_LIMITED_API and avoid that function",
                )
            )
        elif member.added > PyVersion(*floor):
            out.append(
                Violation(
                    binary=path,
                    rule="python-api",
                    symbol=name,
                    message=f"{path} uses {name}, in the limited API only since Python {member.added}, "
                    f"but the wheel is tagged {tag}-abi3; raise python-abi to cp{member.added.major}{member.added.minor}",
                )
            )
    return out


def python_floor(symbols: Sequence[str]) -> Version2 | None:
    """The lowest Python whose limited API has every one of *symbols* (those it lacks aside)."""
    import abi3info  # lazily, as in python_api_violations
    from abi3info.models import Symbol

    added = [
        (m.added.major, m.added.minor)
        for name in symbols
        if (m := abi3info.FUNCTIONS.get(Symbol(name)) or abi3info.DATAS.get(Symbol(name)))
    ]
    return max(added, default=None)


def floor_violations(
    path: str, target: CheckTarget, torch: Version2 | None, python: Version2 | None
) -> list[Violation]:
    """A declared floor below the inferred one: the lowest torch the binary loads on (the newest
    release among those that introduced its shims), the lowest Python (its Python symbols)."""
    out = []
    if torch is not None and torch > target.torch:
        need, have = f"{torch[0]}.{torch[1]}", f"{target.torch[0]}.{target.torch[1]}"
        out.append(
            Violation(
                binary=path, rule="floor", symbol=None,
                message=f"{path} declares torch>={have}, but the shim functions it imports need torch {need} "
                f"(the inferred floor): it fails to load on torch {have}; require torch>={need}, or build "
                f"for {have} so the headers hide the newer shims",
            )
        )  # fmt: skip
    if python is not None and target.python is not None and python > target.python:
        out.append(
            Violation(
                binary=path, rule="floor", symbol=None,
                message=f"{path} is tagged cp{target.python[0]}{target.python[1]}-abi3, but its Python symbols "
                f"need the limited API of Python {python[0]}.{python[1]}; raise python-abi to cp{python[0]}{python[1]}",
            )
        )  # fmt: skip
    return out


def tag_violations(
    wheel: str, tags: frozenset[str], member: str, facts: ElfFacts
) -> list[Violation]:
    out = []
    for platform in sorted({t.split("-")[-1] for t in tags}):
        legacy = next(
            (v for k, v in _LEGACY_MANYLINUX.items() if platform.startswith(k + "_")), None
        )
        m = _MANYLINUX_RE.match(platform)
        glibc_tag = (int(m[1]), int(m[2])) if m else legacy
        arch = m[3] if m else platform.split("_", 1)[-1]
        if glibc_tag and facts.glibc and facts.glibc > glibc_tag:
            out.append(
                Violation(
                    binary=member,
                    rule="tags",
                    symbol=f"GLIBC_{facts.glibc[0]}.{facts.glibc[1]}",
                    message=f"{wheel} is tagged {platform}, but {member} needs GLIBC_{facts.glibc[0]}.{facts.glibc[1]}; "
                    "let auditwheel repair compute the tag, or build on an older glibc",
                )
            )
        if platform.startswith(("manylinux", "linux")) and arch != facts.machine:
            out.append(
                Violation(
                    binary=member,
                    rule="tags",
                    symbol=None,
                    message=f"{wheel} is tagged {platform}, but {member} is built for {facts.machine}",
                )
            )
    return out
