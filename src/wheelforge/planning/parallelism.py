"""How much runs at once: ninja's -j, the nvcc threads, and the one ninja pool that keeps the
memory-heavy compiles from running out of memory. Decided when the plan is made
(planning/planner.py) from the cores, the memory the build may use (foundation/resources.py or
--memory-limit) and what each compile step costs (planning/jobcosts.py); nvcc gets the threads
through its environment (build/ninja.py run_env).

ninja has no memory-aware scheduling of its own: a pool (a named limit on how many of its jobs
run at once) is the lever it offers. The schedule sorts the steps in two: the light ones, any
-j of which fit in the memory together, and the heavy ones, which share a pool of a depth such
that the heaviest that can run at once, beside the heaviest light ones that fill the other
slots, still fit. Where memory is plentiful (the usual case) there is no pool, and the -j and
threads are those that fill the cores. Under a limit, one nvcc thread per job is tried too (a
thread costs about one more process's memory; smaller jobs fill the room better), and the
schedule whose simulated build ends first is kept. ``-j``/``MAX_JOBS`` and ``NVCC_THREADS``
stay overrides: they are used as given, and the pool still keeps the memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wheelforge.planning.jobcosts import GIB, JobCost

HEAVY_POOL = "heavy"


def default_parallelism(cores: int | None = None) -> int:
    """ninja's own default -j for *cores* (else this machine's CPU count): the count plus two,
    and 2 on one core (ninja.cc GuessParallelism)."""
    cpus = cores or os.cpu_count() or 1
    return cpus + 2 if cpus > 1 else 2


def auto_nvcc_threads(*, cores: int, jobs: int | None, nvcc_sources: int, targets: int) -> int:
    """nvcc ``--threads`` that fills *cores*: each of the nvcc jobs ninja runs at once compiles
    its archs in parallel, one thread per arch's device steps (preprocessing, cicc, ptxas; a
    PTX target shares its arch's cicc) and one for the host side (preprocessing and cudafe++,
    which run beside them: nvcc --time shows the chain). Rounded up: nvcc's host-side phases
    leave its threads idle part of the time."""
    concurrent = max(1, min(nvcc_sources, jobs or default_parallelism(cores)))
    return max(1, min(targets + 1, math.ceil(cores / concurrent)))


@dataclass(frozen=True, kw_only=True)
class StepLoad:
    """What the schedule knows of one compile step."""

    name: str  # the step's source, as the report names it
    cost: JobCost  # measured at cost.threads, or the first-time estimate
    units: int  # processes it can run side by side: an nvcc step's archs + 1, else 1
    nvcc: bool


@dataclass(frozen=True, kw_only=True)
class Schedule:
    jobs: int | None  # ninja -j; None: ninja's default (what fills the cores)
    nvcc_threads: int
    heavy: tuple[str, ...] = ()  # the steps in the heavy pool
    heavy_depth: int | None = None  # how many of them run at once; None: no pool
    memory: int | None = None  # the bytes the build may use; None: not known
    memory_source: str = ""  # what set them ("MemAvailable", "--memory-limit", a cgroup)
    peak: int = 0  # the largest sum of the steps' peaks this schedule lets run at once
    seconds: float = 0.0  # the compiles' expected wall time (a simulation of the schedule)
    measured: int = 0  # steps whose cost an earlier build measured (the rest are estimates)
    steps: int = 0
    reduced: bool = False  # -j was lowered below what fills the cores, for memory

    def summary(self) -> str:
        """One line for the build summary."""
        if self.memory is None:
            return "schedule: memory not known, the cores decide"
        limit = f"{self.memory / GIB:.1f} GiB ({self.memory_source})"
        what = f"at most {self.peak / GIB:.1f} GiB of compiles at once, within {limit}"
        if self.heavy_depth is not None:
            what += f"; {len(self.heavy)} memory-heavy step(s), {self.heavy_depth} at a time"
        if self.reduced:
            what += f"; -j {self.jobs}"
        if self.peak > self.memory:
            what += "; the heaviest step alone needs more: it runs alone"
        known = f"{self.measured} of {self.steps} step(s) measured by earlier builds"
        return f"schedule: {what} ({known})"


def _fit(
    peaks: Sequence[tuple[str, int]], jobs: int, memory: int
) -> tuple[int, tuple[str, ...], int | None, int]:
    """(-j, heavy steps, pool depth, peak) keeping any concurrent set under *memory*: the
    light steps are those *jobs* of which fit together; the heavy ones get the deepest pool
    whose heaviest members, with the heaviest light steps in the other slots, fit."""
    ordered = sorted(peaks, key=lambda np: -np[1])
    for j in range(max(1, jobs), 0, -1):
        top = sum(p for _, p in ordered[:j])
        if top <= memory:
            return j, (), None, top
        heavy = [(n, p) for n, p in ordered if p * j > memory]
        light = [p for _, p in ordered if p * j <= memory]
        for depth in range(min(j, len(heavy)), 0, -1):
            peak = sum(p for _, p in heavy[:depth]) + sum(light[: j - depth])
            if peak <= memory:
                return j, tuple(n for n, _ in heavy), depth, peak
    # The heaviest step alone needs more than the limit: it runs alone, and may still not fit.
    name, peak = ordered[0]
    return 1, (name,), None, peak


def simulate(
    order: Sequence[str],
    seconds: Mapping[str, float],
    threads: Mapping[str, int],
    *,
    cores: int,
    jobs: int,
    heavy: frozenset[str] = frozenset(),
    depth: int | None = None,
) -> float:
    """When the last step ends if ninja starts the steps in *order*, up to *jobs* at once and
    *depth* of the *heavy* ones (a heavy step waiting for the pool lets the next one start).
    A step takes *seconds* when it has its *threads* to itself; steps wanting more threads
    than there are *cores* share them, each slowed alike."""
    remaining: dict[str, float] = {}
    waiting = list(order)
    now = 0.0
    while waiting or remaining:
        for name in list(waiting):
            if len(remaining) >= jobs:
                break
            in_pool = sum(1 for n in remaining if n in heavy)
            if name in heavy and depth is not None and in_pool >= depth:
                continue
            waiting.remove(name)
            remaining[name] = seconds[name]
        rate = min(1.0, cores / max(1, sum(threads[n] for n in remaining)))
        step = min(remaining.values()) / rate
        now += step
        for name in list(remaining):
            remaining[name] -= step * rate
            if remaining[name] <= 1e-9:
                del remaining[name]
    return now


def schedule(
    loads: Sequence[StepLoad],
    *,
    cores: int,
    memory: int | None,
    memory_source: str = "",
    jobs: int | None = None,
    threads: int | None = None,
) -> Schedule:
    """The -j, nvcc threads and heavy pool for *loads* (see the module notes)."""
    nvcc = [s for s in loads if s.nvcc]
    targets = max((s.units - 1 for s in nvcc), default=1)
    auto = auto_nvcc_threads(cores=cores, jobs=jobs, nvcc_sources=len(nvcc), targets=targets)
    fill = jobs or default_parallelism(cores)
    measured = sum(1 for s in loads if s.cost.measured)
    base = Schedule(jobs=jobs, nvcc_threads=threads or auto, measured=measured, steps=len(loads))
    if memory is None or not loads:
        return base
    order = [s.name for s in loads]
    best: Schedule | None = None
    for t in [threads] if threads else sorted({auto, 1}, reverse=True):
        peaks = [(s.name, s.cost.peak_at(t if s.nvcc else 1, s.units)) for s in loads]
        seconds = {s.name: s.cost.seconds_at(t if s.nvcc else 1, s.units) for s in loads}
        used = {s.name: min(t, s.units) if s.nvcc else 1 for s in loads}
        j, heavy, depth, peak = _fit(peaks, fill, memory)
        took = simulate(
            order, seconds, used, cores=cores, jobs=j, heavy=frozenset(heavy), depth=depth
        )
        found = Schedule(
            jobs=j if j < fill else jobs,
            nvcc_threads=t,
            heavy=heavy if depth is not None else (),
            heavy_depth=depth,
            memory=memory,
            memory_source=memory_source,
            peak=peak,
            seconds=took,
            measured=measured,
            steps=len(loads),
            reduced=j < fill,
        )
        unbound = depth is None and j >= fill
        if unbound and t == (threads or auto):
            return found  # memory does not bind: what fills the cores
        # One that keeps to the memory first, then the one that ends first.
        if best is None or (found.peak > memory, found.seconds) < (
            best.peak > memory,
            best.seconds,
        ):
            best = found
    assert best is not None
    return best


def variants_at_once(schedules: Sequence[Schedule], *, jobs: int) -> int:
    """How many variants' ninjas may run at once under one jobserver of *jobs* slots (at most
    *jobs* compiles in all, whichever ninja runs them): 1, the sequential build, unless every
    variant's schedule leaves the memory unbound. A heavy pool or a lowered -j binds it: each
    ninja keeps only its own pool and -j, and a jobserver client takes no -j, so two such
    ninjas at once could run what either schedule keeps apart. Unbound, each schedule's *peak*
    is the most its own steps reach with *jobs* of them at once; the ninjas at once together
    run at most *jobs* steps, so their peaks' sum bounds them: as many variants at once as the
    largest peaks fit together within the memory (the smallest budget any schedule names).
    Memory not known: the cores decide, as they do for one variant."""
    if len(schedules) < 2 or jobs < 2:
        return 1
    if any(s.heavy_depth is not None or s.reduced for s in schedules):
        return 1
    at_once = min(len(schedules), jobs)
    budgets = [s.memory for s in schedules if s.memory is not None]
    if budgets:
        peaks = sorted((s.peak for s in schedules), reverse=True)
        while at_once > 1 and sum(peaks[:at_once]) > min(budgets):
            at_once -= 1
    return at_once
