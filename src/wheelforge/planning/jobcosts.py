"""What each compile step costs: its wall time, CPU time and peak memory, measured by earlier
builds of the same source with the same flags (build/jobwatch.py measures them), or a
conservative estimate the first time. The schedule (planning/parallelism.py) reads them; the
build report shows this build's.

The history lies in the user cache (``<cache>/job-costs.json``), so a fresh clone in another
folder, or another variant of the same arch set, starts from what the last build measured. An
entry is keyed by the source's path in the project, its compile rule and its flags with every
folder replaced by its path-free name (planning/reproducible.path_free_text): what changes the
cost of a compile, never where the clone lies. A source's own edits do not change the key: an
edited source costs about what it cost before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wheelforge.foundation import locks, numbers, readers, writers
from wheelforge.foundation.document import from_document, to_document

GIB = 1 << 30
HISTORY = "job-costs.json"
# Entries kept: the newest, by when they were measured (a few hundred bytes each).
_KEEP = 20000

# The first time a source is compiled: FlashAttention-2's setup.py budgets its MAX_JOBS on
# "~5GB per NVCC thread" (the worst case it observed on CUTLASS kernels; its threads compile
# its archs), so 5 GiB per arch compiled at once, and 1 GiB for the host side beside them (a
# C/C++ translation unit of torch's headers stays under it). One FlashAttention-3 sm_90a kernel
# peaked at 6.3 GiB here (nvcc 13.0), nearly all of it one cicc. Conservative on purpose: the
# estimate only holds a build back where memory is short, and one build measures the figure.
NVCC_FIRST_PEAK_PER_THREAD = 5 * GIB
HOST_FIRST_PEAK = 1 * GIB


@dataclass(frozen=True, kw_only=True)
class JobCost:
    """One compile step's cost, at the nvcc threads it ran with."""

    seconds: float  # wall time
    cpu_seconds: float  # user + system time of all its processes
    peak: int  # bytes: the largest sum of its processes' resident memory at one moment
    largest: int  # bytes: the largest single process (a cicc, a cc1plus)
    threads: int  # nvcc --threads it ran with (1 for a C/C++ compile)
    # False: the first-time estimate (never stored: the history holds measurements)
    measured: bool = field(default=True, metadata={"internal": True})

    def peak_at(self, threads: int, units: int) -> int:
        """The peak expected with *threads* nvcc threads for a step that can run *units*
        processes side by side (its archs and its host side): each further thread adds at
        most one more process as large as its largest; fewer threads keep at least it."""
        if not self.measured and units > 1:
            # The first estimate of an nvcc step: its largest per arch compiled at once, and
            # the host side's beside them when a thread is left for it.
            device = max(1, min(threads, units - 1))
            return device * self.largest + (HOST_FIRST_PEAK if threads > device else 0)
        had = max(1, min(self.threads, units))
        want = max(1, min(threads, units))
        if want == had:
            return self.peak
        if want > had:
            return self.peak + (want - had) * self.largest
        return max(self.largest, self.peak * want // had)

    def seconds_at(self, threads: int, units: int) -> float:
        """The wall time expected with *threads*: nvcc runs its archs side by side, so the
        time falls with the threads it can use, but never below the CPU time spread over them."""
        had = max(1, min(self.threads, units))
        want = max(1, min(threads, units))
        scaled = self.seconds * had / want
        return max(scaled, self.cpu_seconds / want) if want > had else min(scaled, self.cpu_seconds)


def first_estimate(*, nvcc: bool, units: int, threads: int) -> JobCost:
    """A step nothing has measured yet (see the module notes)."""
    if not nvcc:
        return JobCost(
            seconds=1.0,
            cpu_seconds=1.0,
            peak=HOST_FIRST_PEAK,
            largest=HOST_FIRST_PEAK,
            threads=1,
            measured=False,
        )
    used = max(1, min(threads, units))
    estimate = JobCost(
        seconds=1.0,
        cpu_seconds=float(used),
        peak=0,
        largest=NVCC_FIRST_PEAK_PER_THREAD,
        threads=used,
        measured=False,
    )
    return dataclasses.replace(estimate, peak=estimate.peak_at(used, units))


def step_key(name: str, rule: str, flags: Iterable[str]) -> str:
    """The history's key of a step: its path in the project, its rule and its path-free flags."""
    digest = hashlib.sha256()
    for part in (name, rule, *flags):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _cost(data: object) -> JobCost | None:
    """An entry of the history as the JobCost it records; None for one of another shape: a
    missing key, a string, a bool, a negative number, NaN, or an infinity (JSON's Infinity and
    1e999 read as one, and int() of it raised OverflowError in every later build)."""
    try:
        cost = from_document(JobCost, data)
        for number in (cost.seconds, cost.cpu_seconds, cost.peak, cost.largest, cost.threads):
            _number(number)
    except (TypeError, ValueError):  # DocumentError too
        return None
    return cost


def _number(value: object) -> float:
    """A number the history may hold: finite, from 0 to numbers.MAX_BYTES."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    if not 0 <= value <= numbers.MAX_BYTES:  # an int of 400 digits: compared, never a float
        raise ValueError(value)
    return float(value)


@dataclass(frozen=True, kw_only=True)
class CostHistory:
    """job-costs.json: step key → a JobCost's document, each read on its own (_cost): an entry
    of another shape is dropped, never the history."""

    entries: Mapping[str, Any]


def _entries(path: Path) -> Mapping[str, Any]:
    """The history's entries, read through the bounded reader (a FIFO or a huge file there is
    refused, never waited on); DocumentError when the file has another shape."""
    return from_document(
        CostHistory, json.loads(readers.read_text(path, cap=readers.STATE_CAP))
    ).entries


def load(cache_dir: Path | None) -> dict[str, JobCost]:
    """The history, by step key; empty when there is none or it cannot be read."""
    if cache_dir is None:
        return {}
    try:
        entries = _entries(cache_dir / HISTORY)
    except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
        return {}
    found = {}
    for key, data in entries.items():
        cost = _cost(data)
        if cost is not None:
            found[str(key)] = cost
    return found


def record(
    cache_dir: Path | None, costs: Mapping[str, JobCost], *, raise_only: Iterable[str] = ()
) -> None:
    """Add this build's measurements to the history (newest win; the oldest go past _KEEP);
    those of *raise_only* only raise what an entry holds (a compile a cache may have answered).
    Builds of several projects may write at once: one writer at a time, under a lock."""
    raising = set(raise_only)
    measured = {k: c for k, c in costs.items() if c.measured}
    if cache_dir is None or not measured:
        return
    path = cache_dir / HISTORY
    cache_dir.mkdir(parents=True, exist_ok=True)
    with locks.hold(path.with_suffix(".lock"), what=f"the job-cost history {path}"):
        try:
            entries = dict(_entries(path))
        except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
            entries = {}
        for key, cost in measured.items():
            data = to_document(cost)
            before = _cost(entries.get(key)) if key in raising else None
            if before is not None:
                data = {k: max(v, data[k]) for k, v in to_document(before).items()}
                data["threads"] = cost.threads
            entries.pop(key, None)  # re-inserted last: dicts keep insertion order
            entries[key] = data
        kept = CostHistory(entries=dict(list(entries.items())[-_KEEP:]))
        writers.write_if_changed(path, json.dumps(to_document(kept), sort_keys=False) + "\n")
