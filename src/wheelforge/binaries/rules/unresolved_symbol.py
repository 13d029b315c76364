"""Every symbol a binary needs binds where the dynamic linker looks (binaries/scope.py): an op
library with an undefined symbol nothing defines (a source left out of the extension, a library
not linked) fails ``torch.ops.load_library`` with "undefined symbol", on every machine.

A versioned symbol names its library (``GLIBC_2.17``, ``libcudart.so.12``): the tags rule judges
glibc's. An unversioned, strong one must be exported by a library of the binary's DT_NEEDED
closure (the wheel's own, torch's and what they link, read; the system's, by symbol version
against what the wheel's manylinux tag guarantees; CUDA's, by prefix), or be the interpreter's
(``Py*``), a C shim (the shim-version rule judges those) or libtorch's C++ (the cxx-symbol rule).
Where only the host process provides it (glibc before 2.34 kept dlopen in libdl, which the python
executable links; the CUDA runtime and libgomp torch imported first loads RTLD_GLOBAL), it is a
warning with that reason; where a library nothing here knows may provide it, a warning naming
that library; else an error.

Without a torch at hand whose release the wheel's requirement admits (and with every library of
torch's the binary links), what torch's libraries export is judged by their namespaces.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from wheelforge.binaries import floors, scope, systemlibs
from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.binaries.scope import Scope
from wheelforge.binaries.symbols import LibraryExports, Linkage, demangle, read_linkage
from wheelforge.configuration import abi
from wheelforge.toolchain import shims

ID = "unresolved-symbol"
# The kind of a finding about a system older than this one: loading here proves nothing of it.
NEWER_THAN_TAG = "newer-than-tag"
# What torch_python and libtorch export beyond libtorch's namespaces: THPVariable_Wrap and its
# kind, the C shims; and the namespaces of what they vendor (fmt, kineto, gloo, oneDNN, ...).
_TORCH_C_PREFIXES = ("THP", "torch_", "aoti_", "c10_", *scope.GOMP_PREFIXES)
_TORCH_NAMESPACES = (
    "c10::",
    "c10d::",
    "at::",
    "torch::",
    "caffe2::",
    "fmt::",
    "libkineto::",
    "gloo::",
    "tensorpipe::",
    "dnnl::",
    "onnx_torch::",
    "google::",
    "sleef_",
)
# libstdc++'s own (the data may predate the GCC that built the wheel: a newer GLIBCXX_ export).
_LIBSTDCXX = ("std::", "__gnu_cxx::", "__cxxabiv1::", "operator new", "operator delete")


def _owner(symbol: str) -> str:
    return floors.owner(demangle(symbol)) if symbol.startswith("_Z") else symbol


def _torch_may_export(symbol: str) -> bool:
    """Whether torch's libraries may export *symbol*, when no torch here can say: their C
    functions and the C++ of their own namespaces and vendored libraries."""
    return _owner(symbol).startswith((*_TORCH_C_PREFIXES, *_TORCH_NAMESPACES))


def _admits(requirement: str | None, version: str | None) -> bool:
    """Whether the wheel's torch requirement admits the torch at hand's release."""
    if not requirement or not version:
        return False
    try:
        spec = SpecifierSet(requirement.removeprefix("torch").strip() or "")
        return spec.contains(Version(version).public, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


class _Providers:
    """Where the binary's unversioned symbols bind, as far as it can be known here."""

    def __init__(self, linkage: Linkage, context: RuleContext, binary: BinaryFacts) -> None:
        shipped: dict[str, Linkage] = {}
        for other in context.wheel.binaries if context.wheel else ():
            if other is binary:
                continue
            try:
                found = other.own(ID)
            except LookupError:
                continue
            if isinstance(found, Linkage):
                shipped[scope.base(other.display)] = found
                if found.soname:
                    shipped.setdefault(found.soname, found)
        members = {scope.base(n) for n in context.wheel.names} if context.wheel else set()
        given = context.target.torch_exports
        self.torch = given if isinstance(given, LibraryExports) else None
        self.scope: Scope = scope.closure(linkage.needed, shipped, members, self.torch)
        self.unlinked = {
            name: lib
            for name, lib in shipped.items()
            if name not in self.scope.names and name != scope.base(binary.display)
        }
        self.tag = systemlibs.tag_policy(context.tags)
        # torch's exports decide only for the torch the wheel declares, with all its libraries.
        declared = context.target.declared.torch
        self.exact = (
            isinstance(given, frozenset)
            or (
                self.torch is not None
                and (self.torch.version is None or _admits(declared, self.torch.version))
                and not self.scope.torch_unread
            )
            or bool(context.wheel and context.wheel.is_torch)
        )
        self.given = given
        self.host: dict[str, str] = {}  # symbol → why only the host process provides it
        self.sibling: dict[str, str] = {}  # symbol → the wheel's library that defines it
        self.newer: dict[str, str] = {}  # symbol → the library and version that has it

    @functools.cached_property
    def torch_exports(self) -> frozenset[str] | None:
        """What the torch at hand's libraries export (those given), read on first need."""
        given = self.given
        return given.get() if isinstance(given, LibraryExports) else given

    def provides(self, symbol: str) -> bool:
        s = self.scope
        if s.grafted or s.exports(symbol) or symbol.startswith(("Py", "_Py")):
            return True
        if shims.is_shim(symbol):
            return True  # the shim-version rule judges it
        system = scope.system_binding(symbol, s, self.tag)
        if system.binds:
            return True
        owner = _owner(symbol)
        cxx = "libstdc++.so.6" in s.system
        if cxx and owner.startswith(_LIBSTDCXX):
            return True
        if floors.is_libtorch(demangle(symbol)):
            return True  # libtorch's C++: the cxx-symbol rule judges it (the stable ABI)
        if any(symbol.startswith(p) for n in s.prefixed for p in scope.prefixes_of(n) or ()):
            return True
        if symbol.startswith(scope.CUDART_PREFIXES) and any(
            n.startswith("libcu") for n in s.prefixed
        ):
            return True  # a CUDA library of the closure links the runtime
        if s.links_torch:
            if isinstance(self.given, frozenset) and symbol in self.given:
                return True
            if not self.exact and _torch_may_export(symbol):
                return True
        if system.moved:
            self.host[symbol] = "moved"
            return True
        if symbol.startswith(scope.CUDART_PREFIXES):
            self.host[symbol] = "cudart"
            return True
        if symbol.startswith(scope.CUDA_PREFIXES):
            self.host[symbol] = "cuda"
            return True
        if symbol.startswith(scope.GOMP_PREFIXES):
            self.host[symbol] = "gomp"
            return True
        if system.newer:
            self.newer[symbol] = system.newer
        return False

    def elsewhere(self, symbol: str) -> str | None:
        """A library of the wheel that defines *symbol* but is not in the binary's scope."""
        return next((n for n, lib in self.unlinked.items() if symbol in lib.exports), None)


def _shown(symbols: Sequence[str]) -> str:
    names = [f"{demangle(s)} ({s})" if s.startswith("_Z") else s for s in symbols[:3]]
    more = f" and {len(symbols) - 3} more" if len(symbols) > 3 else ""
    return ", ".join(names) + more


def _host_findings(binary: BinaryFacts, providers: _Providers, loader: str) -> Iterator[Finding]:
    by_reason: dict[str, list[str]] = {}
    for symbol, reason in providers.host.items():
        by_reason.setdefault(reason, []).append(symbol)
    tag = providers.tag
    older = f"glibc {tag.glibc}" if tag else "glibc"
    for reason, symbols in by_reason.items():
        first = symbols[0]
        if reason == "moved":
            why = (
                f"on glibc before 2.34 (the wheel's tag admits {older}) they are libdl's, "
                "libpthread's or librt's, not libc.so.6's, and it links none of those: they "
                "bind there only to what the process loaded globally (the python executable "
                "links libdl and libpthread; torch imported first loads libtorch_global_deps.so, "
                "which links them); link -ldl, -lpthread or -lrt not to depend on it"
            )
        elif reason == "cudart":
            why = (
                "it links no CUDA library that has them: they bind only to the CUDA runtime "
                "torch imported first loads globally (libtorch_global_deps.so, RTLD_GLOBAL); "
                f"{loader} fails without torch imported first; link the CUDA runtime not to "
                "depend on it"
            )
        elif reason == "cuda":
            why = (
                "it links no CUDA library that has them (by their prefix, CUDA's): they bind "
                "only where the process loaded that library RTLD_GLOBAL before it (torch loads "
                f"only its CUDA runtime so), else {loader} fails with 'undefined symbol'; link "
                "the CUDA library that has them"
            )
        elif reason == "sibling":
            why = (
                "it does not link the library of its wheel that defines them "
                f"({providers.sibling.get(first, '?')}): they bind only where the code that "
                "loads it loaded that library RTLD_GLOBAL first (as onnxruntime's provider "
                f"bridge does), else {loader} fails with 'undefined symbol'; link it not to "
                "depend on that"
            )
        else:
            why = (
                "it links no libgomp: they bind only to the one torch imported first loads "
                "globally (libtorch_global_deps.so, RTLD_GLOBAL); link -lgomp (or torch's "
                "libtorch_cpu) not to depend on it"
            )
        yield Finding(
            first,
            f"{binary.display} needs {_shown(symbols)}, unversioned, from the host process: {why}",
            severity="warning",
        )


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    linkage = binary.own(ID)
    if not isinstance(linkage, Linkage):
        return
    providers = _Providers(linkage, context, binary)
    missing = [s for s in linkage.unbound if not providers.provides(s)]
    loader = "torch.ops.load_library" if binary.role == "library" else "import"
    yield from _host_findings(binary, providers, loader)
    if not missing:
        return
    found, missing = _unlinked(binary, context, providers, missing, loader)
    yield from found
    if not missing:
        return
    newer = [s for s in missing if s in providers.newer]
    if newer and providers.tag is not None:
        yield _newer(binary, providers, newer, loader)
        missing = [s for s in missing if s not in providers.newer]
        if not missing:
            return
    first = missing[0]
    unknown = providers.scope.unknown
    if unknown:
        yield Finding(
            first,
            f"{binary.display} needs {_shown(missing)}, defined by no library of the wheel, torch "
            f"or CUDA it loads; unless {', '.join(unknown)} provides "
            f"{'it' if len(missing) == 1 else 'them'}, {loader} fails with 'undefined symbol'",
            severity="warning",
        )
        return
    unread = (
        " (no torch here to read its libraries; none of their namespaces holds it)"
        if providers.scope.links_torch and providers.torch_exports is None
        else ""
    )
    yield Finding(
        first,
        f"{binary.display} needs {_shown(missing)}, which nothing it loads defines (it needs "
        f"{', '.join(linkage.needed) or 'no library'}{unread}): {loader} fails with 'undefined symbol: {first}'; add the source that "
        "defines it to the extension's sources, or the library that has it to its libraries",
    )


def _unlinked(
    binary: BinaryFacts,
    context: RuleContext,
    providers: _Providers,
    missing: list[str],
    loader: str,
) -> tuple[list[Finding], list[str]]:
    """The findings for symbols a library of the wheel defines but the binary does not link,
    and the symbols still missing after them."""
    unlinked = {s: where for s in missing if (where := providers.elsewhere(s)) is not None}
    if not unlinked:
        return [], missing
    rest = [s for s in missing if s not in unlinked]
    torch_op = bool(context.target.declared.torch) or providers.scope.links_torch
    if binary.role == "library" and not torch_op:
        # Loaded by its wheel's own code (onnxruntime's providers), which may load the defining
        # library RTLD_GLOBAL first; a torch op library is opened by torch.ops.load_library
        # (RTLD_LOCAL), and a module Python imports has nothing of its wheel's loaded globally.
        providers.host = dict.fromkeys(unlinked, "sibling")
        providers.sibling = unlinked
        return list(_host_findings(binary, providers, loader)), rest
    found = [
        Finding(
            symbol,
            f"{binary.display} needs {_shown([symbol])}, which the wheel's {where} defines but "
            f"{binary.display} does not link: {loader} fails with 'undefined symbol'; add it "
            "to the extension's libraries",
        )
        for symbol, where in unlinked.items()
    ]
    return found, rest


def _newer(binary: BinaryFacts, providers: _Providers, newer: list[str], loader: str) -> Finding:
    """The finding for unversioned symbols a system library has only above the wheel's tag."""
    assert providers.tag is not None
    where = providers.newer[newer[0]]
    return Finding(
        newer[0],
        f"{binary.display} needs {_shown(newer)}, unversioned, which {where} has only from "
        f"that version on, but the wheel's tag {providers.tag.name} guarantees "
        f"{providers.tag.newest_of(where.rsplit(' ', 1)[-1])} at most: {loader} fails on "
        f"such a system with 'undefined symbol: {newer[0]}'; build on the oldest system the "
        "tag names (a manylinux image), or tag the wheel for the newer system",
        kind=NEWER_THAN_TAG,
    )


def _read(image: ElfImage) -> Linkage:
    return read_linkage(image)


RULE = Rule(
    id=ID,
    doc="every undefined symbol binds where the dynamic linker looks: an unversioned, strong "
    "one is exported by a library of the binary's DT_NEEDED closure (the wheel's own, torch's "
    "and what they link; glibc's and libstdc++'s at a version the wheel's manylinux tag "
    "guarantees; CUDA's, by prefix), or is the interpreter's (`Py*`), a C shim or libtorch's "
    "C++ (their rules judge those); one only the host process provides (dlopen before glibc "
    "2.34, the CUDA runtime and libgomp torch loads globally) is a warning saying so, as is "
    "one a library nothing here knows may provide; torch's exports decide when the torch at "
    "hand is one the wheel's requirement admits, else their namespaces",
    source="the binary's `.dynsym`, `.gnu.version` and `.dynamic`, the wheel's other binaries', "
    "those of torch's libraries at hand, `data/system-exports.json` (glibc's, libstdc++'s "
    "exports by version) and auditwheel's manylinux policy",
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=15,
    check=check,
    read=_read,
)
