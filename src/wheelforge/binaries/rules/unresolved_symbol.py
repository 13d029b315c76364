"""Every symbol a binary needs is provided by something it loads: an op library with an
undefined symbol nothing defines (a source left out of the extension, a library not linked)
fails ``torch.ops.load_library`` with "undefined symbol", on every machine.

Known without torch loaded: a versioned symbol names its library (``GLIBC_2.17``,
``libcudart.so.12``); an unversioned one must come from a library the binary needs (DT_NEEDED)
that the wheel ships (its exports are read here), from the Python interpreter (``Py*``), from
torch (a C shim, or a libtorch C++ entity: the shim-version and cxx-symbol rules judge those;
when it links torch's libraries, what they export: read from the torch at hand, the build's or
the one importable here, else by their namespaces), from libstdc++ (``std::``), or from CUDA's
libraries, by their prefixes (``cuda*``, ``cublas*``: torch imported first loads them
globally). A library it needs that is none of these may provide the symbol:
then the finding is a warning naming that library, not an error.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

from wheelforge.binaries import floors
from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.binaries.symbols import LibraryExports, Linkage, demangle, read_linkage
from wheelforge.configuration import abi
from wheelforge.toolchain import shims

ID = "unresolved-symbol"
# Libraries whose symbols are all versioned: no unversioned symbol comes from them.
_SYSTEM_RE = re.compile(
    r"^(?:libc|libm|libdl|librt|libpthread|libutil|libresolv|libstdc\+\+|libgcc_s|libgomp"
    r"|libatomic|ld-linux[\w.-]*)\.so"
)
# torch's own libraries (the unstable ABI links them; torch imported first loads them).
_TORCH_RE = re.compile(r"^lib(?:torch|c10|shm|caffe2)[\w-]*\.so")
# CUDA's libraries, by soname, and the prefixes of the symbols they export.
_CUDA = (
    (re.compile(r"^libcuda\.so"), ("cu",)),
    (re.compile(r"^libcudart\.so"), ("cuda", "__cuda")),
    (re.compile(r"^libcublas(?:Lt)?\.so"), ("cublas",)),
    (re.compile(r"^libcusparse(?:Lt)?\.so"), ("cusparse",)),
    (re.compile(r"^libcurand\.so"), ("curand",)),
    (re.compile(r"^libcufft\.so"), ("cufft",)),
    (re.compile(r"^libcusolver\.so"), ("cusolver",)),
    (re.compile(r"^libcudnn\w*\.so"), ("cudnn",)),
    (re.compile(r"^libnccl\.so"), ("nccl", "pnccl")),
    (re.compile(r"^libnvrtc\.so"), ("nvrtc",)),
    (re.compile(r"^libnvJitLink\.so"), ("nvJitLink",)),
    (re.compile(r"^libnvToolsExt\.so"), ("nvtx",)),
)
# torch imported first loads CUDA's libraries into the global scope (libtorch_global_deps.so,
# RTLD_GLOBAL): nvcc's registration calls (__cudaRegisterFatBinary) and the runtime's functions
# resolve there even in a binary that links none of them.
_CUDA_PREFIXES = tuple(prefix for _, prefixes in _CUDA for prefix in prefixes)
# What torch_python and libtorch export beyond libtorch's namespaces: THPVariable_Wrap and its
# kind, the C shims; and the namespaces of what they vendor (fmt, kineto, gloo, oneDNN, ...).
# OpenMP's (GOMP_, omp_): libtorch_cpu needs the libgomp torch ships beside it, in the scope of
# every binary that links libtorch_cpu.
_TORCH_C_PREFIXES = ("THP", "torch_", "aoti_", "c10_", "GOMP_", "omp_")
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
# libstdc++'s own: an unversioned reference binds to its default version.
_LIBSTDCXX = ("std::", "__gnu_cxx::", "__cxxabiv1::")


def _base(soname: str) -> str:
    return soname.rsplit("/", 1)[-1]


def _owner(symbol: str) -> str:
    return floors.owner(demangle(symbol)) if symbol.startswith("_Z") else symbol


def _torch_may_export(symbol: str) -> bool:
    """Whether torch's libraries may export *symbol*, when there is no torch here to read their
    tables: their C functions and the C++ of their own namespaces and vendored libraries."""
    return _owner(symbol).startswith((*_TORCH_C_PREFIXES, *_TORCH_NAMESPACES))


class _Providers:
    """What the libraries a binary needs provide, as far as they can be known here."""

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
                shipped[_base(other.display)] = found
                if found.soname:
                    shipped.setdefault(found.soname, found)
        self.shipped = shipped
        self.exports = frozenset().union(
            *(shipped[n].exports for n in linkage.needed if n in shipped)
        )
        self.unlinked = {name: lib for name, lib in shipped.items() if name not in linkage.needed}
        # A member of the wheel not read here (a library auditwheel grafted into .libs/, which
        # check never inflates): auditwheel resolved the binary against it when it grafted it.
        members = {_base(n) for n in context.wheel.names} if context.wheel else set()
        self.unread = any(n in members and n not in shipped for n in linkage.needed)
        self.torch = any(_TORCH_RE.match(n) for n in linkage.needed)
        self.given = context.target.torch_exports
        self.unknown = tuple(
            n
            for n in linkage.needed
            if n not in shipped
            and not _SYSTEM_RE.match(n)
            and not _TORCH_RE.match(n)
            and not any(p.match(n) for p, _ in _CUDA)
            and not n.startswith(("libpython", "libcudart"))
        )

    def provides(self, symbol: str) -> bool:
        if (
            self.unread
            or symbol in self.exports
            or symbol.startswith(("Py", "_Py", *_CUDA_PREFIXES))
            or shims.is_shim(symbol)
        ):
            return True
        owner = _owner(symbol)
        if owner.startswith(_LIBSTDCXX) or floors.is_libtorch(demangle(symbol)):
            return True  # libtorch's C++: the cxx-symbol rule judges it (the stable ABI)
        if not self.torch:
            return False
        if self.torch_exports is not None:
            return symbol in self.torch_exports
        return _torch_may_export(symbol)

    @functools.cached_property
    def torch_exports(self) -> frozenset[str] | None:
        """What the torch at hand's libraries export, read on the first symbol that needs it."""
        given = self.given
        return given.get() if isinstance(given, LibraryExports) else given

    def elsewhere(self, symbol: str) -> str | None:
        """A library of the wheel that defines *symbol* but is not linked."""
        return next((n for n, lib in self.unlinked.items() if symbol in lib.exports), None)


def _shown(symbols: Sequence[str]) -> str:
    names = [f"{demangle(s)} ({s})" if s.startswith("_Z") else s for s in symbols[:3]]
    more = f" and {len(symbols) - 3} more" if len(symbols) > 3 else ""
    return ", ".join(names) + more


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    linkage = binary.own(ID)
    if not isinstance(linkage, Linkage):
        return
    providers = _Providers(linkage, context, binary)
    missing = [s for s in linkage.unbound if not providers.provides(s)]
    if not missing:
        return
    loader = "torch.ops.load_library" if binary.role == "library" else "import"
    needs = ", ".join(linkage.needed) or "no library"
    unlinked = {s: where for s in missing if (where := providers.elsewhere(s)) is not None}
    for symbol, where in unlinked.items():
        yield Finding(
            symbol,
            f"{binary.display} needs {_shown([symbol])}, which the wheel's {where} defines but "
            f"{binary.display} does not link: {loader} fails with 'undefined symbol'; add it "
            "to the extension's libraries",
        )
    missing = [s for s in missing if s not in unlinked]
    if not missing:
        return
    first = missing[0]
    if providers.unknown:
        yield Finding(
            first,
            f"{binary.display} needs {_shown(missing)}, defined by no library of the wheel, torch "
            f"or CUDA it loads; unless {', '.join(providers.unknown)} provides "
            f"{'it' if len(missing) == 1 else 'them'}, {loader} fails with 'undefined symbol'",
            severity="warning",
        )
        return
    unread = (
        " (no torch here to read its libraries; none of their namespaces holds it)"
        if providers.torch and providers.torch_exports is None
        else ""
    )
    yield Finding(
        first,
        f"{binary.display} needs {_shown(missing)}, which nothing it loads defines (it needs "
        f"{needs}{unread}): {loader} fails with 'undefined symbol: {first}'; add the source that "
        "defines it to the extension's sources, or the library that has it to its libraries",
    )


def _read(image: ElfImage) -> Linkage:
    return read_linkage(image)


RULE = Rule(
    id=ID,
    doc="every undefined symbol is provided: an unversioned, strong undefined symbol must be "
    "exported by a library of the wheel the binary links (DT_NEEDED), or be the interpreter's "
    "(`Py*`), libstdc++'s (`std::`), CUDA's (by prefix), torch's (a C shim, libtorch's C++; and, "
    "when it links torch's libraries, what they export: read from the build's torch or the one "
    "importable here, else judged by their namespaces); a library it links that the wheel lacks "
    "and nothing here knows makes it a warning (one grafted into `.libs/` provides what it needs)",
    source="the binary's `.dynsym`, `.gnu.version` and `.dynamic`, the wheel's other binaries', "
    "torch's `libtorch*`/`libc10*` `.dynsym` and those of the libraries beside them they need "
    "(libgomp), when a torch is at hand",
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=15,
    check=check,
    read=_read,
)
