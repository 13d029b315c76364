"""What a wheel's size is made of, and what would make it smaller: its fatbin entries by arch,
and each known lever with the bytes it saves, measured from the entries where that is cheap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wheelforge.binaries.inspection import BinaryReport

# Blackwell family targets (CUDA 12.9+): one sm_100f cubin runs on sm_100 and sm_103, one
# sm_120f on sm_120 and sm_121 (CUDA 12.9 release notes, "family-specific features").
FAMILIES: dict[str, tuple[int, ...]] = {"10.0f": (100, 103), "12.0f": (120, 121)}
# nvcc --compress-mode arrived in CUDA 12.8 (nvcc --help lists it there and in 13.x).
COMPRESS_MODE_SINCE = (12, 8)
# How many contributors a size-budget failure names.
TOP_CONTRIBUTORS = 5


@dataclass(frozen=True, kw_only=True)
class Contribution:
    """The fatbin entries of one kind and arch in one binary, summed."""

    binary: str = field(metadata={"doc": "the binary, as wheel.whl!member"})
    kind: str = field(metadata={"doc": "sass or ptx"})
    arch: str = field(metadata={"doc": "sm_90a, compute_120, ..."})
    stored: int = field(metadata={"doc": "bytes as stored in the binary (compressed or not)"})
    uncompressed: int = field(metadata={"doc": "bytes once decompressed"})
    compression: str = field(metadata={"doc": "none, lz4, zstd (several: comma-separated)"})


@dataclass(frozen=True, kw_only=True)
class Lever:
    """A change that makes the wheel smaller."""

    change: str = field(metadata={"doc": "what to change, in matrix.yaml or flag terms"})
    saves: int | None = field(
        metadata={"doc": "bytes of fatbin it saves, from the entries; null: not measured"}
    )
    note: str = field(default="", metadata={"doc": "how the saving was found, or why unmeasured"})


@dataclass(frozen=True, kw_only=True)
class SizeCheck:
    """A wheel against its size budget."""

    wheel_size: int = field(metadata={"doc": "bytes of the wheel file"})
    budget: int = field(metadata={"doc": "bytes allowed (size-budget / --size-budget)"})
    over: bool = field(metadata={"doc": "the wheel is larger than the budget"})
    contributions: tuple[Contribution, ...] = field(
        metadata={"doc": "fatbin entries by binary, kind and arch, largest first"}
    )
    levers: tuple[Lever, ...] = field(metadata={"doc": "known ways to shrink it, largest first"})


def contributions(binaries: Sequence[BinaryReport]) -> tuple[Contribution, ...]:
    sums: dict[tuple[str, str, str], list[int]] = {}
    kinds: dict[tuple[str, str, str], set[str]] = {}
    for b in binaries:
        for e in b.entries:
            key = (b.path, e.kind, e.arch)
            acc = sums.setdefault(key, [0, 0])
            acc[0] += e.stored_size
            acc[1] += e.size
            kinds.setdefault(key, set()).add(e.compression)
    found = [
        Contribution(
            binary=path,
            kind=kind,
            arch=arch,
            stored=s,
            uncompressed=u,
            compression=", ".join(sorted(kinds[(path, kind, arch)])),
        )
        for (path, kind, arch), (s, u) in sums.items()
    ]
    return tuple(sorted(found, key=lambda c: (-c.stored, c.binary, c.kind, c.arch)))


def _sm(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


def levers(
    parts: Sequence[Contribution], toolkit: tuple[int, int], nvcc_flags: Sequence[str]
) -> tuple[Lever, ...]:
    """Every lever that applies, with what it saves."""
    found: list[Lever] = []
    by_arch: dict[tuple[str, str], int] = {}
    for c in parts:
        by_arch[(c.kind, c.arch)] = by_arch.get((c.kind, c.arch), 0) + c.stored
    for (kind, arch), stored in by_arch.items():
        label = "SASS" if kind == "sass" else "PTX"
        found.append(
            Lever(
                change=f"drop {label} {arch} from the arch set",
                saves=stored,
                note="its stored size in the binaries",
            )
        )
    raw = [c for c in parts if c.compression == "none"]
    if raw and "-Xfatbin=-compress-all" not in nvcc_flags:
        found.append(
            Lever(
                change="nvcc-flags: [-Xfatbin=-compress-all]",
                saves=None,
                note=f"{len(raw)} of {len(parts)} arch entries ({sum(c.stored for c in raw)} bytes) are "
                "stored uncompressed; "
                "rebuild to measure",
            )
        )
    if toolkit >= COMPRESS_MODE_SINCE and not any(
        f.startswith("--compress-mode") for f in nvcc_flags
    ):
        found.append(
            Lever(
                change="nvcc-flags: [--compress-mode=size]",
                saves=None,
                note="CUDA >= 12.8: the smallest (slower to load) fatbin compression; rebuild to measure",
            )
        )
    sass = {c.arch: 0 for c in parts if c.kind == "sass"}
    for c in parts:
        if c.kind == "sass":
            sass[c.arch] += c.stored
    for family, members in FAMILIES.items():
        present = {a: s for a, s in sass.items() if _sm(a) in members and not a.endswith("a")}
        if len(present) >= 2:
            keep = max(present.values())
            found.append(
                Lever(
                    change=f"build {family} instead of {' '.join(sorted(present))}",
                    saves=sum(present.values()) - keep,
                    note="one family cubin instead of one per GPU (estimate: the largest is kept)",
                )
            )
    return tuple(sorted(found, key=lambda lv: -(lv.saves or 0)))


def check_size(
    *,
    wheel_size: int,
    budget: int,
    binaries: Sequence[BinaryReport],
    toolkit: tuple[int, int],
    nvcc_flags: Sequence[str],
) -> SizeCheck:
    parts = contributions(binaries)
    return SizeCheck(
        wheel_size=wheel_size,
        budget=budget,
        over=wheel_size > budget,
        contributions=parts,
        levers=levers(parts, toolkit, nvcc_flags),
    )
