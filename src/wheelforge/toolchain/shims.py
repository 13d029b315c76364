"""Which torch version introduced each C shim function (``aoti_torch_*``, ``torch_*``).

Three sources, all read rather than typed in:

- ``shim_function_versions.txt`` (``torch/csrc/stable/c/``), PyTorch's own list of the release
  each shim function arrived in (those it omits predate 2.10), read from the torch at hand when
  it ships one (the releases 2.10 to 2.15.0 do not: it lives in PyTorch's source tree only). It
  names the release a function arrived in; it is what tells releases newer than the table apart.
- ``data/shim_exports.json``: the shim functions each released torch exports, read from the
  dynamic symbol tables of its libtorch_cpu.so and libtorch_cuda.so
  (``tools/gen_shim_exports.py``). What a release it lists exports decides whether a binary
  loads there; for a function the file omits, its first release is the table's (the file omits
  seven AOTInductor shims that arrived in 2.10: tests/unit/test_shim_versions.py).
- the ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0`` guards around the declarations in the
  build torch's shim headers, for versions neither knows yet.

tests/unit/test_shim_versions.py holds the file and the table to agreeing on every release both
cover.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from wheelforge.foundation import readers

Version2 = tuple[int, int]

SHIM_DIRS = (
    "torch/csrc/inductor/aoti_torch/c",
    "torch/csrc/inductor/aoti_torch/generated",
    "torch/csrc/stable/c",
)
_EXPORT_RE = re.compile(r"AOTI_TORCH_EXPORT\b[^;{(]*?\b((?:aoti_torch|torch)_\w+)\s*\(", re.DOTALL)
# The preprocessor lines a guard scan follows (here and in featureguards.py).
IF_RE = re.compile(r"^\s*#\s*(if|ifdef|ifndef)\b(.*)$")
ELSE_RE = re.compile(r"^\s*#\s*(else|elif)\b")
ENDIF_RE = re.compile(r"^\s*#\s*endif\b")
GUARD_RE = re.compile(
    r"TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_([0-9]{1,4})_([0-9]{1,4})_[0-9]+"
)
SHIM_PREFIXES = ("aoti_torch_", "torch_")


def is_shim(name: str) -> bool:
    return name.startswith(SHIM_PREFIXES)


# -- PyTorch's shim_function_versions.txt ---------------------------------------------------------

# Where a torch package keeps it (its source tree's path), or under include/ beside the headers.
VERSIONS_FILE = (
    "csrc/stable/c/shim_function_versions.txt",
    "include/torch/csrc/stable/c/shim_function_versions.txt",
)
# The first release the file lists; a function it omits arrived before (its header says so).
VERSIONS_FILE_SINCE: Version2 = (2, 10)
_VERSIONS_LINE = re.compile(r"^(\w+):\s*TORCH_VERSION_([0-9]{1,3})_([0-9]{1,3})_[0-9]{1,3}\s*$")
_VERSIONS_FILE_CAP = 1 << 20  # 5 kB today; a file larger than this is not PyTorch's list


@dataclass(frozen=True)
class VersionsFile:
    """PyTorch's list of the release each shim function (and type) arrived in."""

    path: str
    versions: Mapping[str, Version2]

    @property
    def newest(self) -> Version2:
        """The newest release it names: it covers the releases up to this one."""
        return max(self.versions.values(), default=VERSIONS_FILE_SINCE)


def parse_versions_file(text: str, *, path: str) -> VersionsFile:
    """``name: TORCH_VERSION_2_12_0`` lines (comments and blank lines skipped)."""
    versions: dict[str, Version2] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if m := _VERSIONS_LINE.match(line.strip()):
            versions[m[1]] = (int(m[2]), int(m[3]))
    return VersionsFile(path=path, versions=versions)


def versions_file(torch_dir: Path) -> VersionsFile | None:
    """The ``shim_function_versions.txt`` a torch package at *torch_dir* ships, if any (a file
    that is too large or unreadable counts as none)."""
    for rel in VERSIONS_FILE:
        path = torch_dir / rel
        try:
            with readers.open_regular(path) as file:
                data = file.read(_VERSIONS_FILE_CAP + 1)
        except OSError:
            continue
        if len(data) <= _VERSIONS_FILE_CAP:
            return parse_versions_file(data.decode("utf-8", errors="replace"), path=str(path))
    return None


def _installed_torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def installed_torch_libraries() -> tuple[Path, ...]:
    """The library folder of the torch importable here (torch/lib), found without importing
    it; () if none."""
    torch_dir = _installed_torch_dir()
    return (torch_dir / "lib",) if torch_dir and (torch_dir / "lib").is_dir() else ()


def installed_torch_release() -> str | None:
    """The release of the torch importable here (2.13.0+cpu), from its metadata, not importing
    it; None if none."""
    from importlib import metadata

    if _installed_torch_dir() is None:
        return None
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def installed_torch_versions() -> VersionsFile | None:
    """The shim versions file of the torch importable here, found without importing it."""
    torch_dir = _installed_torch_dir()
    return versions_file(torch_dir) if torch_dir else None


@cache
def exports_table() -> dict[Version2, frozenset[str]]:
    """Released torch version → the shim functions its libraries export."""
    text = (
        resources.files("wheelforge").joinpath("data/shim_exports.json").read_text(encoding="utf-8")
    )
    table = json.loads(text)["versions"]
    out: dict[Version2, frozenset[str]] = {}
    for key, entry in table.items():
        major, minor = (int(p) for p in key.split("."))
        out[(major, minor)] = frozenset(entry["symbols"])
    return out


@dataclass(frozen=True)
class Declaration:
    name: str
    guard: Version2 | None  # the TORCH_FEATURE_VERSION guard around it (None: unguarded)
    cuda_only: (
        bool  # declared under #ifdef USE_CUDA, or in the CUDA ops' header: libtorch_cuda only
    )


def declarations(include_dir: Path) -> list[Declaration]:
    """Every shim function declared in the torch headers under *include_dir*."""
    found: list[Declaration] = []
    for rel in SHIM_DIRS:
        folder = include_dir / rel
        if folder.is_dir():
            for header in sorted(folder.glob("*.h")):
                text = readers.read_text(header, cap=readers.HEADER_CAP, errors="replace")
                found += _declarations(text, cuda_header=header.name == "c_shim_cuda.h")
    return found


def _declarations(text: str, *, cuda_header: bool = False) -> list[Declaration]:
    # One entry per open #if: its version guard, and whether it is the true branch of USE_CUDA.
    stack: list[tuple[Version2 | None, bool]] = []
    out: list[Declaration] = []
    block: list[str] = []

    def flush() -> None:
        guards = [g for g, _ in stack if g is not None]
        guard = max(guards) if guards else None
        cuda = cuda_header or any(c for _, c in stack)
        out.extend(Declaration(name, guard, cuda) for name in _EXPORT_RE.findall("\n".join(block)))
        block.clear()

    for line in text.splitlines():
        if m := IF_RE.match(line):
            flush()
            kind, cond = m.group(1), m.group(2)
            g = GUARD_RE.search(cond) if kind == "if" else None
            cuda = kind != "ifndef" and "USE_CUDA" in cond and "!" not in cond
            stack.append(((int(g[1]), int(g[2])) if g else None, cuda))
        elif ELSE_RE.match(line):
            flush()
            if stack:
                stack[-1] = (None, False)  # the other branch: the older API, or not CUDA
        elif ENDIF_RE.match(line):
            flush()
            if stack:
                stack.pop()
        else:
            block.append(line)
    flush()
    return out


# Devices no Linux CUDA build of torch compiles: their shims are declared, never exported.
_OTHER_DEVICE_HEADERS = ("_mps.h", "_xpu.h")
_OTHER_DEVICE_SHIMS = ("aoti_torch_mps_", "aoti_torch_xpu_", "torch_mps_", "torch_xpu_")


def declared_exports(include_dir: Path) -> frozenset[str]:
    """The shim functions a Linux CUDA build of the torch whose headers are under
    *include_dir* exports: every declaration (each is defined in libtorch_cpu or
    libtorch_cuda) less the MPS and XPU ones. For torch 2.13 this is name for name what its
    libraries export (tests/unit/test_shim_versions.py); tools/gen_shim_exports.py reads a
    release's source tree this way."""
    found: set[str] = set()
    for rel in SHIM_DIRS:
        folder = include_dir / rel
        if folder.is_dir():
            for header in sorted(folder.glob("*.h")):
                if header.name.endswith(_OTHER_DEVICE_HEADERS):
                    continue
                text = readers.read_text(header, cap=readers.HEADER_CAP, errors="replace")
                found |= {d.name for d in _declarations(text)}
    return frozenset(n for n in found if not n.startswith(_OTHER_DEVICE_SHIMS))


def header_guards(include_dir: Path) -> dict[str, Version2 | None]:
    """Shim function → the earliest version guard around a declaration of it."""
    found: dict[str, Version2 | None] = {}
    for d in declarations(include_dir):
        previous = found.get(d.name)
        if d.name not in found or (
            d.guard is not None and (previous is None or d.guard < previous)
        ):
            found[d.name] = d.guard
    return found


def cuda_only_shims(include_dir: Path) -> tuple[str, ...]:
    """The shim functions only libtorch_cuda exports. An extension that calls them declares them
    weak, so it still loads on a CPU-only torch (where its CUDA kernels can never be reached)."""
    return tuple(sorted({d.name for d in declarations(include_dir) if d.cuda_only}))


def installed_torch_guards() -> dict[str, Version2 | None]:
    """The header guards of the torch importable here, found without importing it; {} if none."""
    torch_dir = _installed_torch_dir()
    return header_guards(torch_dir / "include") if torch_dir else {}


@dataclass(frozen=True, kw_only=True)
class ShimVerdict:
    name: str
    ok: bool
    introduced: Version2 | None  # the first version known to have it
    source: str  # how we know


def introduced(
    name: str, guards: dict[str, Version2 | None], versions: VersionsFile | None = None
) -> Version2 | None:
    """The torch release shim function *name* arrived in: the file's entry, else the table's
    first release with it, else its header guard (None: unknown, or unguarded and not in the
    table)."""
    if versions is not None and name in versions.versions:
        return versions.versions[name]
    table = exports_table()
    having = [v for v, names in table.items() if name in names]
    return min(having) if having else guards.get(name)


def judge(
    name: str,
    target: Version2,
    guards: dict[str, Version2 | None],
    versions: VersionsFile | None = None,
) -> ShimVerdict:
    """Is shim function *name* available in every torch from *target* up? *versions* is the
    torch at hand's shim_function_versions.txt, when it ships one."""
    table = exports_table()
    having = sorted(v for v, names in table.items() if name in names)
    listed = versions.versions.get(name) if versions else None
    # The release it arrived in: the file's entry, else the table's first release with it.
    introduced = listed or (having[0] if having else None)
    if target in table:
        return ShimVerdict(
            name=name,
            ok=name in table[target],
            introduced=introduced or guards.get(name),
            source=f"the libraries of torch {target[0]}.{target[1]}",
        )
    if target < min(table, default=target):
        return ShimVerdict(
            name=name, ok=False, introduced=introduced, source="no stable ABI before torch 2.9"
        )
    if versions is not None and (listed or having or name in guards):
        # A function the file omits is older than the file (2.10), or in the table.
        since = introduced or min(table, default=VERSIONS_FILE_SINCE)
        return ShimVerdict(name=name, ok=since <= target, introduced=since, source=versions.path)
    if name in guards:
        guard = guards[name]
        return ShimVerdict(
            name=name,
            ok=guard is None or guard <= target,
            introduced=guard or introduced,
            source="the version guards of the build torch's shim headers",
        )
    if introduced is not None:
        return ShimVerdict(
            name=name,
            ok=introduced <= target,
            introduced=introduced,
            source="released torch libraries",
        )
    return ShimVerdict(
        name=name, ok=False, introduced=None, source="no torch header or library declares it"
    )
