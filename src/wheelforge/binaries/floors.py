"""The floors of a binary, inferred from its symbols (the lowest torch it loads on: the newest
release that introduced one of its shim functions; the lowest Python: the newest limited-API
version among its Python symbols), its libtorch C++ symbols (which tie it to one torch), and what
a wheel declares in its METADATA (its torch requirement and Requires-Python)."""

from __future__ import annotations

from collections.abc import Sequence
from email.parser import HeaderParser

from packaging.requirements import InvalidRequirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.binaries.metadata import Declared
from wheelforge.binaries.rule import CheckTarget
from wheelforge.binaries.symbols import demangle
from wheelforge.foundation import numbers
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2


def used_shims(undefined: Sequence[str]) -> tuple[str, ...]:
    """The shim functions among a binary's undefined symbols."""
    return tuple(n for n in undefined if shims.is_shim(n))


def python_symbols(undefined: Sequence[str]) -> tuple[str, ...]:
    """The Python C API symbols among a binary's undefined symbols."""
    return tuple(n for n in undefined if n.startswith(("Py", "_Py")))


def torch_needed(used: Sequence[str], target: CheckTarget) -> Version2 | None:
    """The newest torch release among those that introduced the shim functions *used*."""
    introduced = [
        shims.judge(n, target.torch, target.guards, target.versions).introduced for n in used
    ]
    return max((v for v in introduced if v is not None), default=None)


def python_floor(symbols: Sequence[str]) -> Version2 | None:
    """The lowest Python whose limited API has every one of *symbols* (those it lacks aside)."""
    # Imported here: abi3info's tables take ~0.1 s to load, and a no-op build reads no binary.
    import abi3info
    from abi3info.models import Symbol

    added = [
        (m.added.major, m.added.minor)
        for name in symbols
        if (m := abi3info.FUNCTIONS.get(Symbol(name)) or abi3info.DATAS.get(Symbol(name)))
    ]
    return max(added, default=None)


def torch_floor(metadata: str) -> Version2 | None:
    """The lowest torch a wheel's METADATA accepts (its Requires-Dist on torch), if any."""
    message = HeaderParser().parsestr(metadata)
    for value in message.get_all("Requires-Dist") or []:
        try:
            req = numbers.requirement(value)  # a 5,000-digit version: invalid, not a traceback
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        lows = [
            v.release
            for s in req.specifier
            if s.operator in (">=", "==", "~=", ">", "===")
            and (v := _version(s.version.removesuffix(".*"))) is not None
        ]
        if lows and len(low := max(lows)) >= 2 and max(low[:2]) <= numbers.MAX_MINOR:
            return (low[0], low[1])
    return None


# -- what a wheel declares, and what its binaries allow --------------------------------------------

# libtorch's C++ namespaces: a symbol in one ties the binary to the torch it was built against.
# torch::stable and torch::headeronly are header-only: libtorch exports nothing of them.
_LIBTORCH_NAMESPACES = ("c10::", "at::", "torch::", "caffe2::")
_HEADER_ONLY = ("torch::stable::", "torch::headeronly::")
# What the demangler writes before the entity a special symbol is about.
_SPECIAL = (
    "vtable for ",
    "VTT for ",
    "construction vtable for ",
    "typeinfo for ",
    "typeinfo name for ",
    "guard variable for ",
    "non-virtual thunk to ",
    "virtual thunk to ",
    "covariant return thunk to ",
    "transaction clone for ",
)


def owner(demangled: str) -> str:
    """The qualified name a demangled symbol defines (``at::Tensor::add`` of
    ``at::Tensor::add(at::Tensor const&) const``): what it is, not the types it takes or
    returns (``facebook::torchcodec::Decoder::Decoder(torch::stable::Tensor)`` is torchcodec's)."""
    name = demangled
    while prefix := next((p for p in _SPECIAL if name.startswith(p)), None):
        name = name[len(prefix) :]
    depth, cut, space = 0, len(name), -1
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0 and ch == "(" and not name[:i].endswith("operator"):
            cut = i
            break
        elif depth == 0 and ch == " ":
            space = i  # a template function's return type comes first
    return name[space + 1 : cut]


def is_libtorch(demangled: str) -> bool:
    """Whether a demangled symbol is an entity of libtorch's C++ API (which libtorch exports)."""
    defined = owner(demangled)
    return defined.startswith(_LIBTORCH_NAMESPACES) and not defined.startswith(_HEADER_ONLY)


def libtorch_cxx(undefined: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The undefined symbols of libtorch's C++ API, each with its demangled name."""
    found = []
    for symbol in undefined:
        if symbol.startswith("_Z") and is_libtorch(name := demangle(symbol)):
            found.append((symbol, name))
    return tuple(found)


def introduced_floor(
    used: Sequence[str],
    guards: dict[str, Version2 | None],
    versions: shims.VersionsFile | None = None,
) -> Version2 | None:
    """The newest release that introduced one of the shim functions *used* (the lowest torch
    the binary loads on), whatever torch it is checked against."""
    found = [shims.introduced(n, guards, versions) for n in used]
    return max((v for v in found if v is not None), default=None)


def allows(floor: Version2 | None, *, cxx: bool, declared: Declared | None = None) -> str | None:
    """The widest torch requirement a binary (or a wheel, whose METADATA is *declared*) is right
    to declare: a pin of the torch it was built against for one that uses libtorch's C++ API
    (named where the wheel names it: built_for), ``torch>=`` its floor for one on the stable
    ABI, none for one that uses no torch."""
    if cxx:
        known = built_for(declared) if declared else None
        if known and known[1] == "pin":
            return f"torch=={known[0]} (the torch it pins: its binaries load on that one only)"
        return "torch==X.Y.* (the torch it was built against)"
    return f"torch>={floor[0]}.{floor[1]}" if floor else None


def built_for(declared: Declared) -> tuple[str, str] | None:
    """The torch the libtorch C++ binaries of a wheel were built against, as far as the wheel
    says, and from what: its exact pin ("pin": torch==2.8.0 says 2.8.0), else the lowest torch
    its requirement admits ("requirement": torch>=2.8,<2.9 suggests 2.8, for the user to
    confirm). The binaries themselves carry no torch version: libtorch versions none of its
    symbols, and the released ones read here (vLLM, xformers, FBGEMM) embed no version string."""
    if declared.torch_pin:
        return declared.torch_pin, "pin"
    if declared.torch_floor:
        return f"{declared.torch_floor[0]}.{declared.torch_floor[1]}", "requirement"
    return None


def pin_advice(declared: Declared) -> str:
    """How to pin a wheel whose binaries use libtorch's C++ API to the torch they were built
    against: that torch named where the wheel names it, never a made-up one."""
    known = built_for(declared)
    if known is None:
        return (
            "pin the torch its binaries were built against (Requires-Dist: torch==X.Y.*, X.Y "
            "the build's torch: neither the wheel's METADATA nor its binaries name it)"
        )
    version, _ = known
    return (
        f"pin the torch its binaries were built against: Requires-Dist: torch=={version}.* if "
        f"that is torch {version}, the lowest its requirement ({declared.torch}) admits (the "
        "binaries do not name their torch)"
    )


def _version(text: str) -> Version | None:
    try:
        return numbers.version(text)
    except InvalidVersion:
        return None
