"""Where a binary's kernels run, from its fatbin: for each GPU generation the release table
knows (sm_70 and up), whether every translation unit has SASS that runs there, or PTX the driver
can JIT-compile there, or no kernel image at all; the PTX ISA its PTX is written in and the lowest
driver that can JIT it; and the ``a``/``f`` targets that give no forward compatibility.

The rules (CUDA's compatibility guide; the family members from the release table):

- SASS of sm_X.y runs on sm_X.z for z >= y (same major, same or newer minor);
- an ``a`` target (sm_90a) runs on exactly its GPU;
- an ``f`` target (sm_100f) runs on its family: the table's members from it up (10.0f: sm_100 and
  sm_103), else the same major from its minor up;
- PTX of compute_X.y is JIT-compiled on every GPU from X.y up, ``a``/``f`` PTX only where their
  SASS would run, given a driver new enough for its PTX ISA.

A fatbin holds one container per translation unit; a GPU runs the binary's kernels only where
every container has an image for it. When some do and some do not, the GPU is ``partial``: the
kernels of the others fail with "no kernel image is available for execution on the device"
(often on purpose: a Hopper-only kernel in a TU of its own).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.configuration import releases

Verdict = Literal["sass", "ptx", "partial", "none"]


class Fatbins(Protocol):
    """What is weighed: a binary's name and fatbin entries (facts.BinaryContents, which carries
    its LoadsOn as ``loads_on``: read that; this module imports no facts)."""

    @property
    def path(self) -> str: ...
    @property
    def entries(self) -> Sequence[FatbinEntry]: ...


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, kw_only=True)
class GpuLoad:
    """How one binary's kernels get onto one GPU generation."""

    gpu: str = field(metadata=_doc("the GPU generation: sm_90"))
    verdict: Verdict = field(
        metadata=_doc(
            "sass: every translation unit runs SASS there; ptx: some are JIT-compiled from PTX; "
            "partial: some units have no image; none: no kernel image"
        )
    )
    via: tuple[str, ...] = field(metadata=_doc("the archs that serve it: sm_90a, compute_90"))
    units: int = field(metadata=_doc("translation units with an image for it"))
    of: int = field(metadata=_doc("translation units in the fatbin"))


@dataclass(frozen=True, kw_only=True)
class PtxIsa:
    """A PTX ISA version a binary's PTX is written in, and what the release table says of it."""

    version: str = field(metadata=_doc("the PTX ISA: 8.8"))
    release: str | None = field(metadata=_doc("the oldest CUDA release that writes it: 12.9"))
    driver: str | None = field(
        metadata=_doc("that release's lowest Linux driver: JIT needs it (575.51.03)")
    )


@dataclass(frozen=True, kw_only=True)
class LoadsOn:
    """Where one binary's kernels run."""

    path: str = field(metadata={"internal": True})
    gpus: tuple[GpuLoad, ...] = field(metadata=_doc("each GPU generation, oldest first"))
    ptx_isa: tuple[PtxIsa, ...] = field(metadata=_doc("the PTX ISA versions of its PTX"))
    no_forward: tuple[str, ...] = field(
        metadata=_doc(
            "a/f archs with no plain PTX in their translation unit: newer GPUs get nothing"
        )
    )

    def where(self, verdict: Verdict) -> tuple[str, ...]:
        return tuple(g.gpu for g in self.gpus if g.verdict == verdict)


def _split(sm: int) -> tuple[int, int]:
    return sm // 10, sm % 10


def _family(entry: FatbinEntry) -> set[int]:
    """The GPUs an ``f`` target runs on: its table family's members from it up."""
    major, minor = _split(entry.sm)
    for members in releases.families().values():
        if entry.sm in members:
            return {m for m in members if m >= entry.sm}
    return {g for g in releases.gpu_generations() if _split(g)[0] == major and g % 10 >= minor}


def sass_runs(entry: FatbinEntry, gpu: int) -> bool:
    if entry.variant == "a":
        return gpu == entry.sm
    if entry.variant == "f":
        return gpu in _family(entry)
    (major, minor), (g_major, g_minor) = _split(entry.sm), _split(gpu)
    return major == g_major and g_minor >= minor


def ptx_jits(entry: FatbinEntry, gpu: int) -> bool:
    if entry.variant:
        return sass_runs(entry, gpu)
    return _split(gpu) >= _split(entry.sm)


def _unit_verdict(entries: Sequence[FatbinEntry], gpu: int) -> tuple[str, tuple[str, ...]]:
    sass = tuple(e.arch for e in entries if e.kind == "sass" and sass_runs(e, gpu))
    if sass:
        return "sass", sass
    ptx = tuple(e.arch for e in entries if e.kind == "ptx" and ptx_jits(e, gpu))
    return ("ptx", ptx) if ptx else ("none", ())


def loads_on(binary: Fatbins, gpus: Sequence[int] | None = None) -> LoadsOn | None:
    """Where *binary*'s kernels run (None: it carries no CUDA code)."""
    # Each translation unit's distinct targets, in the order first seen: what a verdict weighs
    # (a million copies of one entry were weighed 15 times each; issue 32).
    distinct: dict[int, dict[tuple[str, int, str], FatbinEntry]] = {}
    for entry in binary.entries:
        distinct.setdefault(entry.container, {}).setdefault(
            (entry.kind, entry.sm, entry.variant), entry
        )
    units = {container: list(found.values()) for container, found in distinct.items()}
    if not units:
        return None
    # Units of the same targets (in the same order) get the same verdict: each kind is weighed
    # once per GPU, in the order first seen (libcublasLt's 2782 units are a few dozen kinds;
    # weighing each unit was ~0.4 s of its inspect; issue 33).
    alike: dict[tuple[tuple[str, int, str], ...], list[FatbinEntry]] = {}
    count: Counter[tuple[tuple[str, int, str], ...]] = Counter()
    for entries in units.values():
        key = tuple((e.kind, e.sm, e.variant) for e in entries)
        alike.setdefault(key, entries)
        count[key] += 1
    table = []
    for gpu in gpus or releases.gpu_generations():
        verdicts = [(_unit_verdict(entries, gpu), count[key]) for key, entries in alike.items()]
        kinds = {kind for (kind, _), _ in verdicts}
        served = sum(n for (kind, _), n in verdicts if kind != "none")
        verdict: Verdict = (
            "none"
            if served == 0
            else "partial"
            if served < len(units)
            else "ptx"
            if "ptx" in kinds
            else "sass"
        )
        via = tuple(dict.fromkeys(arch for (_, archs), _ in verdicts for arch in archs))
        table.append(
            GpuLoad(gpu=f"sm_{gpu}", verdict=verdict, via=via, units=served, of=len(units))
        )
    return LoadsOn(
        path=binary.path,
        gpus=tuple(table),
        ptx_isa=_isas(binary),
        no_forward=_no_forward(alike.values()),
    )


def _isas(binary: Fatbins) -> tuple[PtxIsa, ...]:
    found = sorted(
        {e.version for e in binary.entries if e.kind == "ptx" and e.version},
        key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()),
    )
    out = []
    for version in found:
        release = releases.writing_ptx_isa(version)
        out.append(
            PtxIsa(
                version=version,
                release=release.version if release else None,
                driver=release.driver if release else None,
            )
        )
    return tuple(out)


def _no_forward(units: Iterable[list[FatbinEntry]]) -> tuple[str, ...]:
    """The a/f archs whose translation unit carries no plain PTX at or below them: newer GPUs
    than their family get nothing from that unit."""
    flagged: dict[str, None] = {}
    for entries in units:
        plain_ptx = [e.sm for e in entries if e.kind == "ptx" and not e.variant]
        for e in entries:
            if e.variant and not any(p <= e.sm for p in plain_ptx):
                flagged[e.arch] = None
    return tuple(sorted(flagged, key=lambda a: (int("".join(c for c in a if c.isdigit())), a)))
