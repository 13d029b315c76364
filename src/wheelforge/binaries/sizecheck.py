"""What a wheel's size is made of, and what would make it smaller: its fatbin entries by arch,
and each known lever with the bytes it saves, measured from the entries where that is cheap."""

from __future__ import annotations

import dataclasses
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.binaries.elf import member_path, rename_wheel
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import entry_payload
from wheelforge.configuration import releases
from wheelforge.configuration.archs import Arch
from wheelforge.configuration.bytesizes import format_size
from wheelforge.foundation.errors import SizeBudgetError
from wheelforge.planning.plan import VariantPlan

# How many contributors a size-budget failure names.
TOP_CONTRIBUTORS = 5
LEVERS_SHOWN = 8  # the levers a failure or a step summary lists
# wheel.pack deflates at zlib's default level.
ZIP_LEVEL = 6
# zstd level 19 runs at a few MB/s: above this much payload, the size-mode lever is not measured.
SIZE_MODE_LIMIT = 32 * 1024**2


@dataclass(frozen=True, kw_only=True)
class Contribution:
    """The fatbin entries of one kind and arch in one binary, summed."""

    binary: str = field(metadata={"doc": "the binary, as wheel.whl!member"})
    kind: str = field(metadata={"doc": "sass or ptx"})
    arch: str = field(metadata={"doc": "sm_90a, compute_120, ..."})
    stored: int = field(metadata={"doc": "bytes as stored in the binary (compressed or not)"})
    uncompressed: int = field(metadata={"doc": "bytes once decompressed"})
    compression: str = field(metadata={"doc": "none, lz4, zstd (several: comma-separated)"})
    in_wheel: int | None = field(
        default=None,
        metadata={
            "doc": "bytes they take in the wheel (deflated like the zip); measured when over budget"
        },
    )


@dataclass(frozen=True, kw_only=True)
class Lever:
    """A change that makes the wheel smaller."""

    change: str = field(metadata={"doc": "what to change, in matrix.yaml or flag terms"})
    saves: int | None = field(
        metadata={
            "doc": "bytes it saves: of the wheel when measured (over budget), else of the binaries; null: unknown"
        }
    )
    note: str = field(default="", metadata={"doc": "how the saving was found, or why unmeasured"})

    @property
    def saving(self) -> str:
        """What it saves, as the summaries say it."""
        return f"saves {format_size(self.saves)}" if self.saves is not None else "not measured"


@dataclass(frozen=True, kw_only=True)
class SharedObjectSize:
    """One shared object of the wheel against its own budget (an extension's size-budget)."""

    binary: str = field(metadata={"doc": "the shared object, as wheel.whl!member"})
    size: int = field(metadata={"doc": "bytes of the file, as installed (uncompressed)"})
    budget: int | None = field(metadata={"doc": "bytes allowed; null: no budget of its own"})
    over: bool = field(metadata={"doc": "it is larger than its budget"})


@dataclass(frozen=True, kw_only=True)
class SizeCheck:
    """A wheel against its size budget, and each shared object against its own."""

    wheel_size: int = field(metadata={"doc": "bytes of the wheel file"})
    budget: int = field(metadata={"doc": "bytes allowed (size-budget / --size-budget)"})
    over: bool = field(metadata={"doc": "the wheel is larger than the budget"})
    contributions: tuple[Contribution, ...] = field(
        metadata={"doc": "fatbin entries by binary, kind and arch, largest first"}
    )
    levers: tuple[Lever, ...] = field(metadata={"doc": "known ways to shrink it, largest first"})
    shared_objects: tuple[SharedObjectSize, ...] = field(
        default=(), metadata={"doc": "each shared object the build made, against its own budget"}
    )

    @property
    def over_shared(self) -> tuple[SharedObjectSize, ...]:
        """The shared objects over their own budgets."""
        return tuple(s for s in self.shared_objects if s.over)

    def moved(self, old: Path, new: Path) -> SizeCheck:
        """The same check, its binaries named after the wheel at *new* (staging → published)."""
        return dataclasses.replace(
            self,
            contributions=tuple(
                dataclasses.replace(c, binary=rename_wheel(c.binary, old, new))
                for c in self.contributions
            ),
            shared_objects=tuple(
                dataclasses.replace(s, binary=rename_wheel(s.binary, old, new))
                for s in self.shared_objects
            ),
        )


def contributions(binaries: Sequence[BinaryContents]) -> tuple[Contribution, ...]:
    found = [
        Contribution(
            binary=b.path,
            kind=s.kind,
            arch=s.arch,
            stored=s.stored,
            uncompressed=s.size,
            compression=", ".join(s.compressions),
        )
        for b in binaries
        for s in b.by_arch
    ]
    return tuple(sorted(found, key=lambda c: (-c.stored, c.binary, c.kind, c.arch)))


_Key = tuple[str, str, str]  # binary, kind, arch


@dataclass(frozen=True)
class _Cost:
    """Bytes some entries take in the wheel now, and with each compression lever."""

    now: int  # the stored bytes deflated, as the wheel's zip stores them
    compress_all: int  # raw entries compressed with zstd's default level, as -compress-all does
    size_mode: int | None  # every entry at zstd level 19, as --compress-mode=size; None: too big


def measure(wheel: Path, binaries: Sequence[BinaryContents]) -> dict[_Key, _Cost]:
    """What each entry costs in the wheel, measured in-process: raw entries are deflated (the
    zip does the same), compressed ones cost their stored size; the compression levers are
    estimated by compressing the payloads with zstd. On this machine's kernels the level-19
    estimate matched nvcc 13.0's --compress-mode=size within 0.1% (bench/size_levers.py)."""
    import zstandard

    total = sum(e.size for b in binaries for e in b.entries)
    costs: dict[_Key, list[int | None]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for b in binaries:
            if not b.entries:
                continue
            data = zf.read(member_path(b.path))
            for e in b.entries:
                payload = entry_payload(data, e, path=b.path)
                raw = e.compression == "none"
                now = len(zlib.compress(payload, ZIP_LEVEL)) if raw else e.stored_size
                all_ = len(zstandard.ZstdCompressor(level=3).compress(payload)) if raw else now
                size = (
                    len(zstandard.ZstdCompressor(level=19).compress(payload))
                    if total <= SIZE_MODE_LIMIT
                    else None
                )
                acc = costs.setdefault((b.path, e.kind, e.arch), [0, 0, 0])
                acc[0] = (acc[0] or 0) + now
                acc[1] = (acc[1] or 0) + min(all_, now)
                acc[2] = None if size is None or acc[2] is None else acc[2] + min(size, now)
    return {
        k: _Cost(now=v[0] or 0, compress_all=v[1] or 0, size_mode=v[2]) for k, v in costs.items()
    }


def levers(
    parts: Sequence[Contribution],
    toolkit: tuple[int, int],
    nvcc_flags: Sequence[str],
    costs: dict[_Key, _Cost] | None = None,
) -> tuple[Lever, ...]:
    """Every lever that applies, with what it saves: bytes of the wheel where *costs* were
    measured, else bytes of the binaries. Which levers the *toolkit* release offers
    (--compress-mode, family targets) is the release table's (configuration/releases.py)."""
    found: list[Lever] = []
    offers = releases.features(toolkit)

    def cost(c: Contribution) -> int:
        return costs[(c.binary, c.kind, c.arch)].now if costs else c.stored

    how = (
        "its entries as the wheel's zip stores them" if costs else "its stored size in the binaries"
    )
    by_arch: dict[tuple[str, str], int] = {}
    for c in parts:
        by_arch[(c.kind, c.arch)] = by_arch.get((c.kind, c.arch), 0) + cost(c)
    for (kind, arch), size in by_arch.items():
        label = "SASS" if kind == "sass" else "PTX"
        found.append(Lever(change=f"drop {label} {arch} from the arch set", saves=size, note=how))
    raw = [c for c in parts if c.compression == "none"]
    if raw and "-Xfatbin=-compress-all" not in nvcc_flags:
        saves = sum(costs[k].now - costs[k].compress_all for k in costs) if costs else None
        note = f"{len(raw)} of {len(parts)} arch entries are stored uncompressed; "
        note += (
            "estimate: them at zstd's default level, in the zip" if costs else "rebuild to measure"
        )
        found.append(Lever(change="nvcc-flags: [-Xfatbin=-compress-all]", saves=saves, note=note))
    if offers.compress_mode and not any(f.startswith("--compress-mode") for f in nvcc_flags):
        sized = [v for v in (costs or {}).values() if v.size_mode is not None]
        saves = (
            sum(v.now - (v.size_mode or 0) for v in sized)
            if costs and len(sized) == len(costs)
            else None
        )
        measured = "estimate: every entry at zstd level 19, in the zip"
        found.append(
            Lever(
                change="nvcc-flags: [--compress-mode=size]",
                saves=saves,
                note=f"CUDA >= {releases.first('compress_mode')}; "
                + (measured if saves is not None else "rebuild to measure"),
            )
        )
    sass: dict[str, int] = {}
    for c in parts:
        if c.kind == "sass":
            sass[c.arch] = sass.get(c.arch, 0) + cost(c)
    if offers.family_specific:
        found += _family_levers(sass)
    return tuple(sorted(found, key=lambda lv: -(lv.saves or 0)))


def _family_levers(sass: dict[str, int]) -> list[Lever]:
    """One family cubin instead of two or more of its members (SASS arch → bytes)."""
    found = []
    for family, members in releases.families().items():
        present = {a: s for a, s in sass.items() if _family_member(a, members)}
        if len(present) >= 2:
            found.append(
                Lever(
                    change=f"build {family} instead of {' '.join(sorted(present))}",
                    saves=sum(present.values()) - max(present.values()),
                    note="one family cubin instead of one per GPU (estimate: the largest is kept)",
                )
            )
    return found


def _family_member(code: str, members: tuple[int, ...]) -> bool:
    """Whether a SASS arch (not an ``a`` one: those run on their own GPU only) is in a family."""
    arch = Arch.from_code(code)
    return arch is not None and arch.sm in members and arch.suffix != "a"


def check_size(
    *,
    wheel_size: int,
    budget: int,
    binaries: Sequence[BinaryContents],
    toolkit: tuple[int, int],
    nvcc_flags: Sequence[str],
    wheel: Path | None = None,
    budgets: Mapping[str, int | None] | None = None,
) -> SizeCheck:
    """The wheel against its budget, and each shared object named in *budgets* (its path in
    the wheel → its budget, None for none) against its own. Over one, and given the *wheel*,
    what each entry costs in the wheel and what each lever saves are measured (a few seconds
    for a large wheel)."""
    parts = contributions(binaries)
    shared = tuple(
        SharedObjectSize(
            binary=b.path,
            size=b.size,
            budget=(own := (budgets or {})[member_path(b.path)]),
            over=own is not None and b.size > own,
        )
        for b in binaries
        if member_path(b.path) in (budgets or {})
    )
    over = wheel_size > budget
    measured = over or any(s.over for s in shared)
    costs = measure(wheel, binaries) if measured and wheel is not None else None
    if costs:
        parts = tuple(
            sorted(
                (
                    dataclasses.replace(c, in_wheel=costs[(c.binary, c.kind, c.arch)].now)
                    for c in parts
                ),
                key=lambda c: (-(c.in_wheel or 0), c.binary, c.kind, c.arch),
            )
        )
    return SizeCheck(
        wheel_size=wheel_size,
        budget=budget,
        over=over,
        contributions=parts,
        levers=levers(parts, toolkit, nvcc_flags, costs),
        shared_objects=shared,
    )


def over_budget(
    plan: VariantPlan, wheel_path: Path, size: SizeCheck, *, published: bool
) -> SizeBudgetError:
    """The failure of a wheel over its size budget: its largest fatbin entries and what each
    lever would save (binaries/sizecheck.py measures them)."""
    top = size.contributions[:TOP_CONTRIBUTORS]
    lines = ["largest contributors (in the wheel / stored in the binary / uncompressed):"]
    lines += [
        f"  {member_path(c.binary)} {c.kind.upper()} {c.arch}: "
        f"{format_size(c.in_wheel) if c.in_wheel is not None else '-'} / "
        f"{format_size(c.stored)} / {format_size(c.uncompressed)} ({c.compression})"
        for c in top
    ]
    measured = [c.in_wheel for c in size.contributions if c.in_wheel is not None]
    if measured:
        lines.append(
            f"  all SASS and PTX: {format_size(sum(measured))} of the wheel's "
            f"{format_size(size.wheel_size)}; the rest is host code and Python files"
        )
    lines.append("levers (what each saves):")
    lines += [
        f"  {lv.change}: {lv.saving}" + (f" ({lv.note})" if lv.note else "")
        for lv in size.levers[:LEVERS_SHOWN]
    ]
    biggest = (
        ", ".join(f"{c.arch} {format_size(c.in_wheel or c.stored)}" for c in top[:3]) or "no fatbin"
    )
    published_words = (
        "it was published by an earlier build; " if published else "nothing was published; "
    )
    if not size.over:  # a shared object over its own budget (the wheel is within its)
        shared = size.over_shared[0]
        member = member_path(shared.binary)
        own = [c for c in size.contributions if c.binary == shared.binary][:3]
        largest = ", ".join(f"{c.arch} {format_size(c.in_wheel or c.stored)}" for c in own)
        index = next(i for i, k in enumerate(plan.links) if k.wheel_path == member)
        return SizeBudgetError(
            f"variant {plan.variant.id}: {member} is {format_size(shared.size)}, over its size "
            f"budget of {format_size(shared.budget or 0)}; {published_words}largest: "
            f"{largest or 'no fatbin'} (extensions[{index}].size-budget in matrix.yaml raises it)",
            details="\n".join(lines),
        )
    return SizeBudgetError(
        f"variant {plan.variant.id}: {wheel_path.name} is {format_size(size.wheel_size)}, over "
        f"its size budget of {format_size(size.budget)}; " + published_words + "largest: "
        f"{biggest} (size-budget in matrix.yaml or --size-budget raises the budget)",
        details="\n".join(lines),
    )
