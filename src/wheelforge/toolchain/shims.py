"""Which torch version introduced each C shim function (``aoti_torch_*``, ``torch_*``).

Two sources of truth, both read rather than typed in:

- ``data/shim_exports.json``: the shim functions each released torch exports, read from the
  dynamic symbol tables of its libtorch_cpu.so and libtorch_cuda.so
  (``tools/gen_shim_exports.py``). Authoritative for the versions it lists.
- the ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0`` guards around the declarations in the
  build torch's shim headers, for versions the table does not know yet.
"""

from __future__ import annotations

import importlib.util
import json
import re
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
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return {}
    return header_guards(Path(spec.origin).parent / "include")


@dataclass(frozen=True, kw_only=True)
class ShimVerdict:
    name: str
    ok: bool
    introduced: Version2 | None  # the first version known to have it
    source: str  # how we know


def judge(name: str, target: Version2, guards: dict[str, Version2 | None]) -> ShimVerdict:
    """Is shim function *name* available in every torch from *target* up?"""
    table = exports_table()
    having = sorted(v for v, names in table.items() if name in names)
    introduced = having[0] if having else None
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
