"""Where the dynamic linker looks for a binary's undefined symbols, and what it finds there.

A module Python imports (or torch.ops.load_library opens) is dlopen'ed RTLD_LOCAL: its symbols
bind in the global scope (the python executable and what it links: libc, libm, and before glibc
2.34 libdl, libpthread, libutil; what was loaded RTLD_GLOBAL: torch imported first loads
libtorch_global_deps.so so, and with it its CUDA runtime and libgomp) and then in the binary's own
scope, its DT_NEEDED libraries and theirs, transitively. The closure is walked here: the wheel's
own libraries (read), torch's (read from the torch at hand, else known by name), the system's
(systemlibs.py: their exports by symbol version, against what the wheel's manylinux tag
guarantees), CUDA's (by the prefixes of what they export), and any other (unknown: it may provide
what nothing else does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from wheelforge.binaries.symbols import LibraryExports, Linkage
from wheelforge.binaries.systemlibs import TagPolicy, system_exports

# torch's own libraries (an unstable-ABI extension links them; torch imported first loads them).
# (libtorch_cpu.so, libc10_cuda.so; not libtorchcodec_core6.so, torchcodec's own)
TORCH_RE = re.compile(r"^lib(?:torch(?:_[a-z_]+)?|c10(?:_[a-z]+)?|shm|caffe2_nvrtc)\.so")
# torch's CUDA libraries: they link the CUDA runtime of torch's CUDA build.
TORCH_CUDA_RE = re.compile(r"^lib(?:torch_cuda|c10_cuda|torch_nvshmem|caffe2_nvrtc)[\w-]*\.so")
# What torch's libraries link besides each other, read from torch 2.14's libtorch_cpu.so and
# libc10.so (the same since 2.0): a library of torch's that no torch here can be read for brings
# these into the scope of the binary that links it.
TORCH_LINKS = (
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgomp.so.1",
    "libc.so.6",
)
# CUDA's libraries, by soname, and the prefixes of the symbols they export.
CUDA = (
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
    (re.compile(r"^libcufile\.so"), ("cuFile",)),
    (re.compile(r"^libcupti\.so"), ("cupti",)),
    (re.compile(r"^libnvshmem_host\.so"), ("nvshmem",)),
)
# What torch's CUDA libraries link of CUDA's, read from torch 2.14's libtorch_cuda.so: a binary
# that links torch's CUDA libraries has these in its scope.
TORCH_CUDA_LINKS = (
    "libcudart.so",
    "libcublas.so",
    "libcublasLt.so",
    "libcusparse.so",
    "libcusparseLt.so",
    "libcufft.so",
    "libcurand.so",
    "libcudnn.so",
    "libnccl.so",
    "libnvrtc.so",
    "libcufile.so",
)
CUDA_PREFIXES = tuple(prefix for _, prefixes in CUDA for prefix in prefixes)
CUDART_PREFIXES = ("cuda", "__cuda")
# OpenMP's entry points: libgomp (torch ships its own beside libtorch_cpu, and
# libtorch_global_deps.so loads it globally).
GOMP_PREFIXES = ("GOMP_", "GOACC_", "omp_")
# The libraries known by the prefixes of what they export (none of them read here).
PREFIXED = (*CUDA, (re.compile(r"^libgomp\.so"), GOMP_PREFIXES))
# Libraries every process's global scope holds (the python executable links them).
HOST = ("libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1")


def base(soname: str) -> str:
    return soname.rsplit("/", 1)[-1]


def prefixes_of(soname: str) -> tuple[str, ...] | None:
    """The prefixes of what library *soname* exports, for CUDA's and libgomp; None for
    another."""
    return next((prefixes for pattern, prefixes in PREFIXED if pattern.match(soname)), None)


@dataclass
class Scope:
    """A binary's DT_NEEDED closure, each library as far as it is known here."""

    read: dict[str, Linkage] = field(default_factory=dict)  # its exports known
    system: list[str] = field(default_factory=list)  # in system-exports.json
    torch_unread: list[str] = field(default_factory=list)  # torch's, not read here
    prefixed: list[str] = field(default_factory=list)  # CUDA's, libgomp: judged by prefix
    unknown: list[str] = field(default_factory=list)  # none of these: may provide anything
    grafted: list[str] = field(default_factory=list)  # the wheel's, not read (trusted)

    @property
    def names(self) -> set[str]:
        return {*self.read, *self.system, *self.torch_unread, *self.prefixed, *self.unknown}

    @property
    def links_torch(self) -> bool:
        return bool(self.torch_unread) or any(TORCH_RE.match(n) for n in self.read)

    def exports(self, symbol: str) -> str | None:
        """The library of the closure read here that exports *symbol*."""
        return next((n for n, lib in self.read.items() if symbol in lib.exports), None)


def closure(
    needed: Iterable[str],
    shipped: Mapping[str, Linkage],
    members: set[str],
    torch: LibraryExports | None,
) -> Scope:
    """The libraries *needed* brings into the binary's scope, transitively: *shipped* (the
    wheel's own, by file name and soname), *members* (the wheel's file names, for those not
    read), torch's (read from *torch*'s folders where they are there)."""
    scope = Scope()
    queue = list(needed)
    seen: set[str] = set()
    known = system_exports()
    while queue:
        name = base(queue.pop(0))
        if name in seen:
            continue
        seen.add(name)
        found = shipped.get(name) or (torch.linkage(name) if torch is not None else None)
        if found is not None:
            scope.read[name] = found
            queue.extend(found.needed)
        elif name in members:
            scope.grafted.append(name)
        elif known.knows(name) or name in HOST:
            scope.system.append(name)
        elif TORCH_RE.match(name):
            scope.torch_unread.append(name)
            queue.extend(TORCH_LINKS)
            if TORCH_CUDA_RE.match(name):
                scope.prefixed.extend(TORCH_CUDA_LINKS)  # torch's CUDA build's
        elif prefixes_of(name) is not None:
            scope.prefixed.append(name)
        else:
            scope.unknown.append(name)
    return scope


@dataclass(frozen=True)
class SystemVerdict:
    """What the system libraries make of one unversioned symbol."""

    binds: bool  # it binds on every system the tag admits
    library: str | None = None  # where
    newer: str | None = None  # the version a library has it from, above what the tag promises
    moved: bool = False  # in libc.so.6 from glibc 2.34 on; before, in a library not linked


def system_binding(symbol: str, scope: Scope, tag: TagPolicy | None) -> SystemVerdict:
    """Whether *symbol*, unversioned, binds in a system library of *scope* or of every process
    (libc, libm) on each system *tag* admits."""
    known = system_exports()
    newer: str | None = None
    moved = False
    for soname in dict.fromkeys([*scope.system, *HOST]):
        found = known.availability(soname, symbol, tag)
        if found == "yes":
            return SystemVerdict(True, soname)
        if found == "moved":
            if any(n in scope.names for n in known.merged_from):
                return SystemVerdict(True, soname)  # linked: libdl/libpthread/librt had it
            moved = True
        elif found == "newer":
            newer = f"{soname} {known.libraries[soname][symbol][0]}"
    return SystemVerdict(False, newer=newer, moved=moved)
