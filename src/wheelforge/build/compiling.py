"""Bringing a variant's objects and library up to date: the generated files and build.ninja
written, the freshness stamp asked first (an unchanged build starts no ninja), the compile
cache's session around the ninja run (its environment and this build's counts), and what each
compile cost, reported and kept in the job-cost history for the next build's schedule
(planning/jobcosts.py). compile_confirmed: the compile of a plan whose torch was read from its
files, torch's own answer awaited then, and a plan made again from it (compiled again if it
differs)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.build import freshness, jobserver, ninja
from wheelforge.build.results import JobReport
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import log, proc, readers, removal, writers
from wheelforge.foundation.errors import BuildError
from wheelforge.planning import hostshare, jobcosts, ninjafile, reproducible
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import plan_variant
from wheelforge.toolchain import compilecache, torchprobe, warmtorch

# Variants built side by side (build/together.py) compile in threads: one thread at a
# time in a build folder (a shared host-<key> one is compiled by the first, and found up to
# date by the others), one speaks to the warm torch child, one writes the job-cost history.
_FOLDERS: dict[Path, threading.Lock] = {}
_FOLDERS_LOCK = threading.Lock()
TORCH_LOCK = threading.RLock()
_HISTORY_LOCK = threading.Lock()


# A shared folder's first variant (in the build's order) compiles it; the others wait for it.
_FIRST: dict[Path, tuple[Path, threading.Event]] = {}
_WAIT_S = 0.2


def _folder(build_dir: Path) -> threading.Lock:
    with _FOLDERS_LOCK:
        return _FOLDERS.setdefault(build_dir, threading.Lock())


@contextlib.contextmanager
def shared_in_order(plans: Sequence[VariantPlan]) -> Iterator[None]:
    """Within this block (variants built side by side) each shared folder of C++ and C
    compiles (planning/hostshare.py) is compiled by the first of *plans* that links it, as it
    is when they build in turn; another variant's compile waits until that one is done with
    it, then finds it up to date."""
    for plan in plans:
        if plan.host is not None:
            _FIRST.setdefault(plan.host.build_dir, (plan.build_dir, threading.Event()))
    try:
        yield
    finally:
        _FIRST.clear()


def _turn(part: VariantPlan, variant: VariantPlan) -> None:
    """Wait until *part*'s folder is *variant*'s to compile (shared_in_order)."""
    first = _FIRST.get(part.build_dir)
    if first is None or first[0] == variant.build_dir:
        return
    while not first[1].wait(_WAIT_S):
        proc.refuse_if_stopped()


def _done_with_shared(variant: VariantPlan, part: VariantPlan | None = None) -> None:
    """*variant* is done with *part*'s folder (None: with every one it compiles first)."""
    for folder, (owner, done) in _FIRST.items():
        if owner == variant.build_dir and (part is None or folder == part.build_dir):
            done.set()


@dataclass(frozen=True, kw_only=True)
class Compiled:
    """What bringing a variant up to date did."""

    ran: tuple[str, ...] = ()  # the steps ninja ran (CXX, NVCC, LINK); empty: up to date
    cache: compilecache.CacheStats | None = None  # the compile cache's counts for them
    jobs: tuple[JobReport, ...] = ()  # each compile ninja ran, with what it cost
    peak: int | None = None  # bytes: the compiles' largest resident memory at one moment

    @property
    def compiled(self) -> tuple[str, ...]:
        """The compiles among the steps ran (CXX, CC, NVCC), not the links."""
        return tuple(s for s in self.ran if s in ("CXX", "CC", "NVCC", "HOST", "DEVICE", "FATBIN"))

    @property
    def generated(self) -> int:
        """How many generate steps ran."""
        return self.ran.count(ninja.GENERATE)


def compile_variant(
    plan: VariantPlan,
    *,
    before_ninja: Callable[[], None] | None = None,
    history: Path | None = None,
) -> Compiled:
    """Bring the objects and the library up to date: the steps ninja ran (none, and no ninja
    process, when the freshness stamps say nothing changed), the compile cache's counts and each
    compile's cost, added to the job-cost history in the cache folder *history*. *before_ninja*
    runs when ninja is about to (what can overlap the compile starts there). The shared folder
    of the variant's C++ and C compiles (planning/hostshare.py) comes first: the variant's
    link reads its objects, and its own stamp watches them."""
    try:
        return _compile_parts(plan, before_ninja=before_ninja, history=history)
    finally:
        _done_with_shared(plan)


def _compile_parts(
    plan: VariantPlan, *, before_ninja: Callable[[], None] | None, history: Path | None
) -> Compiled:
    todo = hostshare.parts(plan)
    for part in todo:
        _turn(part, plan)
    fresh = [_fresh(part) for part in todo]  # every part's files written, fresh or not
    if all(fresh):
        return Compiled()
    if before_ninja is not None:
        before_ninja()
    runs: list[tuple[VariantPlan, ninja.NinjaRun]] = []
    stats = None
    compile_cache = plan.compile.compile_cache
    if compile_cache is None:
        runs = [(part, run) for part in todo if (run := _run(part, plan)) is not None]
    else:
        root = plan.project.resolve()
        version = plan.variant.toolkit.version
        absolute = not reproducible.names_project_relatively(plan.build_dir, root, version)
        with compilecache.session(compile_cache, plan.build_dir, absolute=absolute) as (
            env,
            found,
        ):
            runs = [(part, run) for part in todo if (run := _run(part, plan, env)) is not None]
        stats = found[0] if found else None
    jobs = tuple(
        job
        for part, run in runs
        for job in job_reports(part, run, stats, served_rules(part), plan.build_dir)
    )
    remember(history, jobs)
    peak = None if served_rules(plan) else max((run.peak for _, run in runs), default=0)
    ran = tuple(step for _, run in runs for step in run.ran)
    return Compiled(ran=ran, cache=stats, jobs=jobs, peak=peak)


def _fresh(part: VariantPlan) -> bool:
    """Whether *part*'s folder is up to date, its generated files and build.ninja written."""
    with _folder(part.build_dir):
        for generated in part.compile.generated:
            writers.write_if_changed(generated.path, generated.text)
        return freshness.up_to_date(part, ninjafile.write(part))


def _run(
    part: VariantPlan, variant: VariantPlan, env: dict[str, str] | None = None
) -> ninja.NinjaRun | None:
    """Run ninja in *part*'s folder (one of *variant*'s) unless its stamp says it is up to date
    (asked again: the shared folder, run first, may have rebuilt an object the variant links,
    or another variant built beside this one just compiled it); stamp it after."""
    try:
        with _folder(part.build_dir):
            text = ninjafile.render(part)
            if freshness.up_to_date(part, text):
                return None
            # Only a build that compiles lists TMPDIR: a no-op's screen must not hang on a
            # folder every program changes (cli/quicknoop.py). A killed build left no
            # stamp, so the next one compiles, and sweeps.
            jobserver.sweep_once()
            freshness.forget(part)
            started = time.time_ns()
            run = ninja.run(part, env=env)
            freshness.record(part, text, started)
            return run
    finally:
        _done_with_shared(variant, part)


def tidy_shared(build_root: Path, plans: Sequence[VariantPlan]) -> list[Path]:
    """Remove the shared folders of C++ and C compiles (planning/hostshare.py) that neither
    this build's plans nor any other variant's build.ninja in *build_root* names any more (its
    flags changed, so its compiles got another folder); returns what was removed. A variant
    this build did not build keeps its folder: its build.ninja links from it."""
    used = {p.host.build_dir.name for p in plans if p.host is not None}
    try:
        children = sorted(build_root.iterdir())
    except OSError:
        return []
    shared = [c for c in children if hostshare.FOLDER_RE.fullmatch(c.name) and c.is_dir()]
    if not shared or {c.name for c in shared} <= used:
        return []
    for child in children:
        if child.name.startswith(hostshare.HOST_PREFIX) or not child.is_dir():
            continue
        try:
            text = readers.read_text(child / "build.ninja", cap=readers.STATE_CAP)
        except (OSError, readers.FileRefused):
            continue
        used |= set(hostshare.FOLDER_RE.findall(text))
    removed = [c for c in shared if c.name not in used]
    for folder in removed:
        removal.remove(folder, within=build_root)
    return removed


def served_rules(plan: VariantPlan) -> frozenset[str]:
    """The rules whose compiles run in the compile cache's server, not under ninja's job: those
    it launches, when it compiles in a server (sccache)."""
    cache = plan.compile.compile_cache
    if cache is None or not cache.compiles_in_server:
        return frozenset()
    launchers = plan.compile.launchers
    words = {"nvcc": launchers.cuda, "cxx": launchers.cxx, "cc": launchers.cc}
    return frozenset(rule for rule, w in words.items() if w and w[0] == str(cache.exe))


def job_reports(
    plan: VariantPlan,
    run: ninja.NinjaRun,
    stats: compilecache.CacheStats | None,
    served: frozenset[str],
    session_dir: Path | None = None,
) -> tuple[JobReport, ...]:
    """Each compile step ninja ran, with its wall time (ninja's log), its CPU time and peak
    memory (jobwatch; unknown for the *served* rules, see served_rules), its nvcc threads, and
    whether the compile cache answered it (known for ccache, whose log names each source as the
    command does, read from *session_dir*, the folder of the cache's session: the variant's,
    also for the shared folder's compiles; None for a tool that does not say)."""
    hits = set(stats.hit_sources) if stats is not None else set()
    per_source = stats is not None and stats.tool == "ccache"
    launched = bool(plan.compile.launchers.cxx or plan.compile.launchers.cuda)
    found = []
    for step in plan.compile.steps:
        output = plan.command_path(step.object)
        if output not in run.seconds:
            continue
        # sccache's client hands the compile to its server, a daemon outside the job's
        # processes: what jobwatch saw is the client's, not the compile's (unknown, not 0)
        seen = None if step.rule in served else run.measured.get(output)
        cached: bool | None = (
            _as_logged(step.source, plan, session_dir) in hits
            if per_source
            else None
            if launched
            else False
        )
        found.append(
            JobReport(
                source=_display(step.source, plan),
                rule=step.rule,
                seconds=round(run.seconds[output], 3),
                cpu_seconds=round(seen.cpu_seconds, 2) if seen and seen.known else None,
                peak=seen.peak if seen and seen.known else None,
                largest=seen.largest if seen and seen.known else None,
                threads=plan.compile.nvcc_threads if step.rule == "nvcc" else 1,
                cached=cached,
                cost_key=step.cost_key,
            )
        )
    return tuple(found)


def _as_logged(source: Path, plan: VariantPlan, session_dir: Path | None) -> str:
    """*source* as the compile cache's log names it, once read from *session_dir*."""
    if session_dir is None:
        return os.path.normpath(source)
    return os.path.normpath(session_dir / plan.command_path(source))


def remember(history: Path | None, jobs: tuple[JobReport, ...]) -> None:
    """This build's costs into the history: a compile the cache answered says nothing of what
    compiling costs and is left out; one it may have answered (a cache that does not say) only
    ever raises what the history holds. One variant's thread at a time."""
    measured = {}
    raise_only = set()
    for job in jobs:
        if job.cached or job.peak is None or job.largest is None or job.cpu_seconds is None:
            continue
        measured[job.cost_key] = jobcosts.JobCost(
            seconds=job.seconds,
            cpu_seconds=job.cpu_seconds,
            peak=job.peak,
            largest=job.largest,
            threads=job.threads,
        )
        if job.cached is None:
            raise_only.add(job.cost_key)
    with _HISTORY_LOCK:
        jobcosts.record(history, measured, raise_only=raise_only)


def _display(source: Path, plan: VariantPlan) -> str:
    try:
        return str(source.relative_to(plan.project))
    except ValueError:
        return str(source)


def compile_confirmed(
    plan: VariantPlan, inputs: PlanInputs, settings: BuildSettings
) -> tuple[VariantPlan, Compiled]:
    """Compile; when the plan's torch was read from torch's files (torchprobe.probe_torch's
    *early*), torch's own answer, awaited now (or when the compile failed), decides: the plan is
    made again from *inputs* with that answer, and compiled again if it differs, so neither a
    wheel nor an error rests on the guess."""
    made = Compiled()
    history = settings.cache_dir
    try:
        made = compile_variant(plan, before_ninja=_before_ninja(plan, settings), history=history)
    except BuildError:
        if _confirm(plan, settings) == plan.torch:
            raise
    torch = _confirm(plan, settings)
    if torch is plan.torch:  # not a guess: the plan was made with torch's answer
        return plan, made
    confirmed = plan_variant(inputs, plan.variant, torch)  # the same torch keeps its watch list
    if torch == plan.torch:
        return confirmed, made
    log.warning(f"torch {torch.label} answered otherwise than its files read: compiling again")
    again = compile_variant(confirmed, history=history)
    both = dataclasses.replace(again, ran=made.ran + again.ran, jobs=made.jobs + again.jobs)
    return confirmed, both


def _confirm(plan: VariantPlan, settings: BuildSettings) -> torchprobe.TorchEnv:
    with TORCH_LOCK:
        return torchprobe.confirm(plan.torch, cache=settings.cache_dir)


def _before_ninja(plan: VariantPlan, settings: BuildSettings) -> Callable[[], None]:
    """What overlaps the compile: the import check's child imports torch (toolchain/warmtorch),
    and the modules packing needs (cyclonedx, wheel: ~0.2 s) load in a thread."""

    def start() -> None:
        if settings.import_check:
            with TORCH_LOCK:  # a child of its own: another variant's may be warm beside it
                warmtorch.reserve(plan.torch.python)
        threading.Thread(target=_preload, name="wheelforge-preload", daemon=True).start()

    return start


def _preload() -> None:
    import wheel.wheelfile  # noqa: F401

    from wheelforge.packaging import sbom  # noqa: F401
