"""A project's compiler flags, sorted for matrix.yaml: the arch flags become archs (an arch set,
or a source's own archs), the flags wheelforge sets itself are left out and said so, the rest
is kept as written.

Arch flags as nvcc reads them: ``-gencode arch=compute_90a,code=sm_90a`` (also ``-gencode=``,
``--generate-code``, ``code=[sm_80,compute_80]``), ``-arch=sm_90`` (SASS and PTX of 9.0, nvcc's
shorthand) with or without ``-code=...``. ``native``, ``all`` and ``all-major`` depend on the
machine or the toolkit: they are a choice the user makes, reported as such.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wheelforge.configuration.archs import Arch, ArchSpec

_GENCODE = ("-gencode", "--generate-code")
_ARCH = ("-arch", "--gpu-architecture")
_CODE = ("-code", "--gpu-code")
# Flags with a value that wheelforge owns: nvcc --threads (planning/parallelism.py), the host
# compiler (toolkit.host_compiler).
_OWNED_WITH_VALUE = ("--threads", "-t", "-ccbin", "--compiler-bindir")
# Macros wheelforge defines itself (configuration/abi.py AbiForTorch), and from what.
_MACRO_OWNER = {
    "TORCH_EXTENSION_NAME": "the module's name",
    "TORCH_API_INCLUDE_EXTENSION_H": "the ABI",
    "_GLIBCXX_USE_CXX11_ABI": "torch's C++ ABI",
    "TORCH_TARGET_VERSION": "the torch key",
    "Py_LIMITED_API": "python-abi",
}
_MACHINE_ARCHS = ("native", "all", "all-major")
# What the module exports is wheelforge's (a linker version script exports PyInit_<leaf>).
_VISIBILITY_RE = re.compile(r"^(?:-Xcompiler=)?-fvisibility(?:-inlines-hidden|=\w+)$")
_STD_RE = re.compile(r"^(?:-Xcompiler=)?-std=(?:c|gnu)\+\+([0-9]{1,4})$")
_MACRO_RE = re.compile(r"^-D(?P<name>\w+)(?:=(?P<value>.*))?$")


@dataclass(frozen=True, kw_only=True)
class SortedFlags:
    """What one flag list says: its archs, what stays, and what was taken out and why."""

    archs: tuple[ArchSpec, ...] = ()
    kept: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()  # flags wheelforge sets itself, left out: "flag (why)"
    torch_target: str | None = None  # from -DTORCH_TARGET_VERSION: "2.9"
    limited_api: str | None = None  # from -DPy_LIMITED_API: "3.9"
    problems: tuple[str, ...] = ()  # arch flags that name no fixed arch (-arch=native)
    ptx_only: tuple[str, ...] = ()  # compute_XX without its SASS: written as X.Y+PTX


def _value(flags: Sequence[str], i: int, names: tuple[str, ...]) -> tuple[str | None, int]:
    """The value of flag *i* if it is one of *names* (``-x v``, ``-x=v``), and the next index."""
    flag = flags[i]
    for name in names:
        if flag == name:
            return (flags[i + 1] if i + 1 < len(flags) else ""), i + 2
        if flag.startswith(name + "="):
            return flag[len(name) + 1 :], i + 1
    return None, i


def _codes(text: str) -> list[str]:
    return [c for c in re.split(r"[\[\],\"'\s]+", text) if c]


def _gencode_archs(value: str) -> tuple[str, list[str]]:
    """``arch=compute_90a,code=[sm_90a,compute_90a]`` → ("compute_90a", [sm_90a, compute_90a])."""
    arch, _, code = value.partition(",code=")
    arch = arch.removeprefix("arch=")
    return arch, _codes(code) if code else [arch]


class _Collector:
    def __init__(self) -> None:
        self.sass: set[Arch] = set()
        self.ptx: set[Arch] = set()
        self.problems: list[str] = []

    def add(self, codes: Iterable[str], flag: str) -> None:
        for code in codes:
            if code in _MACHINE_ARCHS:
                self.problems.append(flag)
                continue
            arch = Arch.from_code(code.replace("lto_", "sm_"))
            if arch is None:
                self.problems.append(flag)
            elif code.startswith("compute_"):
                self.ptx.add(arch)
            else:
                self.sass.add(arch)

    def specs(self) -> tuple[tuple[ArchSpec, ...], tuple[str, ...]]:
        archs = sorted(self.sass | self.ptx, key=Arch.sort_key)
        ptx_only = tuple(f"compute_{a.number}" for a in archs if a not in self.sass)
        return tuple(ArchSpec(a, a in self.ptx) for a in archs), ptx_only


def _macro(flag: str) -> tuple[str, str | None] | None:
    m = _MACRO_RE.match(flag)
    return (m["name"], m["value"]) if m else None


def _version_macro(value: str | None, shift: int) -> str | None:
    """``0x0209000000000000`` (TORCH_TARGET_VERSION, shift 56) → ``2.9``; ``0x03090000``
    (Py_LIMITED_API, shift 24) → ``3.9``; ``3`` (Py_LIMITED_API as CMake's ``USE_SABI 3``
    writes it; Python's docs: the same as 0x03020000) → ``3``."""
    try:
        number = int(value or "", 0)
    except ValueError:
        return None
    if shift == 24 and number == 3:
        return "3"
    return f"{number >> shift}.{(number >> (shift - 8)) & 0xFF}"


def _owner(flag: str, *, own_exports: bool = False) -> str | None:
    """Why wheelforge sets this one-word flag itself, or None if it is the project's
    (*own_exports*: the visibility flags, for a plain library whose exports are its own)."""
    if _VISIBILITY_RE.match(flag) and not own_exports:
        return "the module's exports"
    if (std := _STD_RE.match(flag)) and int(std[1]) < 17:
        return "C++17 at least, for torch's headers"
    macro = _macro(flag)
    return _MACRO_OWNER.get(macro[0]) if macro else None


class _Sorter:
    def __init__(self, *, own_exports: bool = False) -> None:
        self.own_exports = own_exports
        self.collector = _Collector()
        self.kept: list[str] = []
        self.owned: list[str] = []
        self.arch: tuple[str, str] | None = None  # -arch's value and spelling
        self.codes: list[tuple[str, str]] = []  # -code's
        self.macros: dict[str, str | None] = {}

    def take(self, flags: Sequence[str], i: int) -> int:
        """Sort flag *i* (and its value); the index of the next flag."""
        flag: str = flags[i]
        if (value := _value(flags, i, _GENCODE))[0] is not None:
            _, codes = _gencode_archs(value[0])
            self.collector.add(codes, f"{flag} {value[0]}" if "=" not in flag else flag)
            return value[1]
        if (value := _value(flags, i, _ARCH))[0] is not None:
            self.arch = (value[0], flag.split("=", maxsplit=1)[0])
            return value[1]
        if (value := _value(flags, i, _CODE))[0] is not None:
            self.codes.append((value[0], flag.split("=", maxsplit=1)[0]))
            return value[1]
        if (value := _value(flags, i, _OWNED_WITH_VALUE))[0] is not None:
            why = "nvcc's threads" if flag.startswith(("--threads", "-t")) else "the host compiler"
            self.owned.append(f"{' '.join(flags[i : value[1]])} ({why})")
            return value[1]
        # torch's CMake target's macros (-DUSE_C10D_NCCL, -DONNX_NAMESPACE=onnx_c2) and CMake's
        # -D<target>_EXPORTS are kept: the project's build compiles with them
        macro = _macro(flag)
        if macro:
            self.macros[macro[0]] = macro[1]
        owner = _owner(flag, own_exports=self.own_exports)
        if owner:
            self.owned.append(f"{flag} ({owner})")
        else:
            self.kept.append(flag)
        return i + 1

    def archs(self) -> None:
        if self.codes:  # -arch=compute_80 -code=sm_80,sm_86: the codes decide
            for value, flag in self.codes:
                self.collector.add(_codes(value), f"{flag}={value}")
        elif self.arch is not None:  # -arch=sm_90 alone: SASS and PTX of 9.0
            value, flag = self.arch
            number = value.removeprefix("sm_").removeprefix("compute_")
            machine = value in _MACHINE_ARCHS
            self.collector.add(
                [value] if machine else [f"sm_{number}", f"compute_{number}"], f"{flag}={value}"
            )


def sort_flags(flags: Sequence[str], *, own_exports: bool = False) -> SortedFlags:
    """Sort one compiler's flags (nvcc's or the C++ compiler's); *own_exports*: the visibility
    flags are the project's (a plain library's exports are what its package calls)."""
    sorter = _Sorter(own_exports=own_exports)
    i = 0
    while i < len(flags):
        i = sorter.take(flags, i)
    sorter.archs()
    specs, ptx_only = sorter.collector.specs()
    return SortedFlags(
        archs=specs,
        kept=tuple(sorter.kept),
        owned=tuple(sorter.owned),
        torch_target=_version_macro(sorter.macros.get("TORCH_TARGET_VERSION"), 56)
        if "TORCH_TARGET_VERSION" in sorter.macros
        else None,
        limited_api=_version_macro(sorter.macros.get("Py_LIMITED_API"), 24)
        if "Py_LIMITED_API" in sorter.macros
        else None,
        problems=tuple(sorter.collector.problems),
        ptx_only=ptx_only,
    )


# Include-folder flags as GCC and nvcc spell them: ``-I x``, ``-Ix``, ``--include-path=x``,
# ``-isystem x`` (nvcc's ``--system-include``).
_INCLUDE_FLAGS = ("--include-path", "--system-include", "-isystem", "-I")
# Library-folder flags of a link: ``-L x``, ``-Lx``, ``--library-path=x``.
LIBRARY_FLAGS = ("--library-path", "-L")


def split_folders(
    flags: Sequence[str], names: tuple[str, ...] = _INCLUDE_FLAGS
) -> tuple[list[str], list[str]]:
    """The folders a flag list names with *names* (include folders by default; LIBRARY_FLAGS
    for a link's ``-L``), in order, and the other flags: a project's ``-I/abs/csrc`` becomes an
    include folder written relative to the project, not a flag that names this checkout."""
    folders: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        name = next((n for n in names if flag == n or flag.startswith(n)), None)
        if name is None:
            rest.append(flag)
            i += 1
            continue
        value = flag[len(name) :].removeprefix("=")
        if not value:  # "-I x": the folder is the next word
            value = flags[i + 1] if i + 1 < len(flags) else ""
            i += 1
        if value:
            folders.append(value)
        i += 1
    return folders, rest


def arch_text(specs: Iterable[ArchSpec]) -> str:
    """An arch list as matrix.yaml writes it: ``8.0 9.0a+PTX``."""
    return " ".join(str(s) for s in specs)


def merge_archs(*groups: Iterable[ArchSpec]) -> tuple[ArchSpec, ...]:
    """The union of arch lists (PTX on any entry wins), ordered by arch."""
    merged: dict[Arch, bool] = {}
    for group in groups:
        for spec in group:
            merged[spec.arch] = merged.get(spec.arch, False) or spec.ptx
    return tuple(ArchSpec(a, merged[a]) for a in sorted(merged, key=Arch.sort_key))
