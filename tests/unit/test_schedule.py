"""The memory-aware schedule (issue 22): the machine's memory read from /proc and cgroups, each
step's cost from the history or a first estimate, the heavy pool that keeps the compiles under
the limit, -j and NVCC_THREADS as overrides, the pool in build.ninja, and what a build
measured going back into the history."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import compiling, jobwatch, ninja
from wheelforge.build.results import JobReport
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Flags, resolve
from wheelforge.foundation import jobcost, resources
from wheelforge.foundation.errors import ConfigError
from wheelforge.foundation.resources import MemoryLimit
from wheelforge.planning import jobcosts, ninjafile
from wheelforge.planning.jobcosts import GIB, JobCost
from wheelforge.planning.parallelism import (
    Schedule,
    StepLoad,
    default_parallelism,
    schedule,
    simulate,
)
from wheelforge.toolchain import compilecache

from .fakes import plan_for, plan_inputs

Project = Callable[..., Path]


def _load(name: str, peak: float, *, seconds: float = 100.0, nvcc: bool = True) -> StepLoad:
    cost = JobCost(
        seconds=seconds,
        cpu_seconds=seconds * 1.2,
        peak=int(peak * GIB),
        largest=int(peak * GIB * 0.6),
        threads=2,
    )
    return StepLoad(name=name, cost=cost, units=2 if nvcc else 1, nvcc=nvcc)


def _worst(loads: list[StepLoad], found: Schedule, cores: int) -> int:
    """The largest memory any set of steps the schedule lets run at once can need."""
    jobs = found.jobs or default_parallelism(cores)
    depth, heavy, t = found.heavy_depth, set(found.heavy), found.nvcc_threads
    peaks = {s.name: s.cost.peak_at(t if s.nvcc else 1, s.units) for s in loads}
    worst = 0
    for n in range(1, min(jobs, len(loads)) + 1):
        for chosen in itertools.combinations(peaks, n):
            if depth is not None and sum(1 for c in chosen if c in heavy) > depth:
                continue
            worst = max(worst, sum(peaks[c] for c in chosen))
    return worst


def test_plentiful_memory_leaves_the_cores_schedule_alone() -> None:
    loads = [_load(f"k{i}.cu", 3.3) for i in range(12)]
    found = schedule(loads, cores=16, memory=120 * GIB, memory_source="MemAvailable")
    assert found.heavy_depth is None and found.jobs is None and not found.reduced
    assert found.nvcc_threads == 2  # 16 cores over 12 jobs: two threads each, as before


def test_a_limit_the_naive_schedule_exceeds_is_kept() -> None:
    # Twelve 6 GiB compiles and a light one on 2 cores, 8 GiB allowed: -j 4 of them would need 24.
    loads = [_load(f"k{i}.cu", 6.0) for i in range(12)] + [_load("api.cpp", 0.5, nvcc=False)]
    naive = sum(sorted((s.cost.peak for s in loads), reverse=True)[:4])
    assert naive > 8 * GIB
    found = schedule(loads, cores=2, memory=8 * GIB, memory_source="--memory-limit")
    assert found.peak <= 8 * GIB and _worst(loads, found, 2) <= 8 * GIB
    assert found.heavy_depth is not None or found.reduced
    assert "8.0 GiB (--memory-limit)" in found.summary()


def test_the_pool_holds_only_the_heavy_steps_back() -> None:
    loads = [_load(f"big{i}.cu", 6.0) for i in range(4)] + [
        _load(f"s{i}.cu", 0.5) for i in range(8)
    ]
    found = schedule(loads, cores=4, memory=14 * GIB, threads=2)  # -j 6: 2 heavy + 4 light
    assert set(found.heavy) == {f"big{i}.cu" for i in range(4)}
    assert found.heavy_depth == 2 and found.jobs is None  # the light ones still fill the cores
    assert _worst(loads, found, 4) <= 14 * GIB


def test_overrides_are_kept_and_the_pool_still_keeps_the_memory() -> None:
    loads = [_load(f"k{i}.cu", 6.0) for i in range(6)]
    found = schedule(loads, cores=16, memory=13 * GIB, jobs=6, threads=2)
    assert found.nvcc_threads == 2 and found.heavy_depth == 2
    assert _worst(loads, found, 16) <= 13 * GIB


def test_one_thread_per_job_is_chosen_when_it_ends_first_under_a_limit() -> None:
    # A job whose second thread costs as much again: under 8 GiB one thread packs twice the jobs.
    cost = JobCost(seconds=100, cpu_seconds=150, peak=8 * GIB, largest=4 * GIB, threads=2)
    loads = [StepLoad(name=f"k{i}.cu", cost=cost, units=2, nvcc=True) for i in range(8)]
    found = schedule(loads, cores=16, memory=8 * GIB)
    assert found.nvcc_threads == 1 and _worst(loads, found, 16) <= 8 * GIB


def test_a_step_heavier_than_the_limit_runs_alone_and_says_so() -> None:
    loads = [_load("huge.cu", 20.0), _load("small.cu", 1.0)]
    found = schedule(loads, cores=4, memory=4 * GIB, threads=1)
    assert found.jobs == 1 and "runs alone" in found.summary()


def test_the_simulation_shares_the_cores() -> None:
    seconds = {"a": 10.0, "b": 10.0}
    assert simulate(["a", "b"], seconds, {"a": 1, "b": 1}, cores=2, jobs=2) == pytest.approx(10.0)
    assert simulate(["a", "b"], seconds, {"a": 1, "b": 1}, cores=1, jobs=2) == pytest.approx(20.0)
    one = simulate(
        ["a", "b"], seconds, {"a": 1, "b": 1}, cores=2, jobs=2, heavy=frozenset({"a", "b"}), depth=1
    )
    assert one == pytest.approx(20.0)


def test_peak_and_time_at_other_threads() -> None:
    cost = JobCost(seconds=100, cpu_seconds=180, peak=6 * GIB, largest=4 * GIB, threads=2)
    assert cost.peak_at(2, 3) == 6 * GIB
    assert cost.peak_at(1, 3) == 4 * GIB  # never below its largest process
    assert cost.peak_at(3, 3) == 10 * GIB  # one more process as large as the largest
    assert cost.peak_at(8, 3) == 10 * GIB  # no more than its units
    assert cost.seconds_at(1, 3) == 180  # one thread: about its CPU time
    assert cost.seconds_at(3, 3) == pytest.approx(66.7, abs=0.1)


def test_the_first_estimate_is_fa2s_five_gib_per_arch_at_once() -> None:
    nvcc = jobcosts.first_estimate(nvcc=True, units=3, threads=2)  # two archs, two threads
    assert nvcc.peak == 10 * GIB and not nvcc.measured
    assert nvcc.peak_at(3, 3) == 11 * GIB  # a third thread for the host side: 1 GiB more
    assert nvcc.peak_at(1, 3) == 5 * GIB
    one = jobcosts.first_estimate(nvcc=True, units=2, threads=2)  # FA3's sm_90a kernels
    assert one.peak == 6 * GIB
    assert jobcosts.first_estimate(nvcc=False, units=1, threads=4).peak == GIB


def test_meminfo_and_cgroups_give_the_tightest_room(tmp_path: Path) -> None:
    files = {
        Path("/proc/meminfo"): "MemTotal: 24684084 kB\nMemAvailable:   16000000 kB\n",
        Path("/proc/self/cgroup"): "0::/ci.slice/job\n4:memory:/docker/abc\n",
        tmp_path / "ci.slice/job/memory.max": "max\n",
        tmp_path / "ci.slice/job/memory.current": "100\n",
        tmp_path / "ci.slice/memory.max": str(8 * GIB) + "\n",
        tmp_path / "ci.slice/memory.current": str(GIB) + "\n",
        tmp_path / "memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n",
        tmp_path / "memory/docker/abc/memory.usage_in_bytes": "5\n",
        tmp_path / "ci.slice/job/cpu.max": "150000 100000\n",
    }
    found = resources.available_memory(files.get, tmp_path)
    assert found == resources.MemoryLimit(
        bytes=7 * GIB, source=f"cgroup {tmp_path / 'ci.slice'} memory.max"
    )
    files[tmp_path / "ci.slice/memory.max"] = "max\n"
    found = resources.available_memory(files.get, tmp_path)
    assert found == resources.MemoryLimit(bytes=16000000 * 1024, source="MemAvailable")
    assert resources.available_memory(lambda _p: None, tmp_path) is None
    assert resources.cores(files.get, tmp_path) <= 2  # a 1.5-core quota keeps two busy


def test_memory_limit_flag_env_and_matrix(project: Project) -> None:
    path = project()
    assert resolve(Flags(matrix=path), {}).memory_limit is None
    given = resolve(Flags(matrix=path, memory_limit="8GiB"), {"WHEELFORGE_MEMORY_LIMIT": "2GiB"})
    assert given.memory_limit == MemoryLimit(bytes=8 * GIB, source="--memory-limit")
    env = resolve(Flags(matrix=path), {"WHEELFORGE_MEMORY_LIMIT": "2GiB"})
    assert env.memory_limit == MemoryLimit(bytes=2 * GIB, source="WHEELFORGE_MEMORY_LIMIT")
    text = path.read_text() + "memory-limit: 12GiB\n"
    path.write_text(text)
    assert resolve(Flags(matrix=path), {}).memory_limit == MemoryLimit(
        bytes=12 * GIB, source=f"{path.name} memory-limit"
    )
    with pytest.raises(ConfigError, match="--memory-limit"):
        resolve(Flags(matrix=path, memory_limit="lots"), {})


def test_the_plan_puts_heavy_steps_in_a_pool_and_build_ninja_names_it(
    project: Project, tmp_path: Path
) -> None:
    path = project()
    (path.parent / "csrc" / "other.cu").write_text("// another kernel\n")
    matrix = load_matrix(path)
    first = plan_for(matrix, tmp_path)
    assert first.compile.schedule.heavy_depth is None  # no memory known: the cores decide
    assert "pool" not in ninjafile.render(first)
    # 6 GiB for a build whose nvcc steps cost 5 GiB a thread the first time: one at a time.
    limited = dataclasses.replace(
        plan_inputs(matrix, tmp_path),
        cores=4,
        memory=resources.MemoryLimit(bytes=6 * GIB, source="test"),
    )
    plan = plan_for(matrix, tmp_path, inputs=limited)
    assert len([s for s in plan.compile.steps if s.rule == "nvcc"]) == 2
    text = ninjafile.render(plan)
    assert "pool heavy\n  depth = 1\n" in text
    assert text.count("  pool = heavy\n") == len([s for s in plan.compile.steps if s.heavy])
    assert all(s.cost_key for s in plan.compile.steps)
    # The same source and flags in another clone: the same history key.
    assert {s.cost_key for s in plan.compile.steps} == {s.cost_key for s in first.compile.steps}


def test_history_round_trip_and_cache_hits_left_out(tmp_path: Path) -> None:
    def job(key: str, peak: int, cached: bool | None) -> JobReport:
        return JobReport(
            source=key,
            rule="nvcc",
            seconds=10.0,
            cpu_seconds=12.0,
            peak=peak,
            largest=peak,
            threads=2,
            cached=cached,
            cost_key=key,
        )

    compiling.remember(tmp_path, (job("a", 3 * GIB, False), job("b", 10, True)))
    found = jobcosts.load(tmp_path)
    assert set(found) == {"a"} and found["a"].peak == 3 * GIB and found["a"].measured
    # A compile a cache may have answered (it does not say) only raises what is kept.
    compiling.remember(tmp_path, (job("a", GIB, None),))
    assert jobcosts.load(tmp_path)["a"].peak == 3 * GIB
    compiling.remember(tmp_path, (job("a", GIB, False),))  # compiled: the new figure wins
    assert jobcosts.load(tmp_path)["a"].peak == GIB
    (tmp_path / jobcosts.HISTORY).write_text("{broken")
    assert jobcosts.load(tmp_path) == {}


def test_jobwatch_sums_each_jobs_processes(tmp_path: Path) -> None:
    stat = (
        "{pid} (x y) S {ppid} 1 {sid} 0 0 0 0 0 0 0 {ut} {st} {cut} {cst} 20 0 1 0 0 1000 {rss} x"
    )
    page = jobwatch._PAGE

    def sample(
        pid: int, ppid: int, rss_pages: int, ticks: int = 10, sid: int = 100
    ) -> jobwatch.Sample:
        text = stat.format(pid=pid, ppid=ppid, sid=sid, ut=ticks, st=0, cut=0, cst=0, rss=rss_pages)
        found = jobwatch.parse_stat(pid, text)
        assert found is not None
        return found

    watch = jobwatch.JobWatch(outputs=("obj/a.cu.o", "obj/b.cpp.o"), proc=tmp_path)
    watch._session = 100
    for pid, cmd in (
        (201, "/bin/sh -c nvcc -c ../a.cu -o obj/a.cu.o"),
        (202, "c++ -o obj/b.cpp.o"),
    ):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(cmd.replace(" ", "\0").encode())
    # ninja (100), a job (201) with nvcc (301) running cicc (401) and ptxas (402), another job
    watch.sample(
        [
            sample(100, 1, 10),
            sample(201, 100, 1),
            sample(301, 201, 5),
            sample(401, 301, 1000),
            sample(402, 301, 300),
            sample(202, 100, 200),
            sample(999, 1, 5000, sid=7),
        ]
    )
    watch.sample([sample(201, 100, 1, ticks=50), sample(301, 201, 5)])
    a, b = watch.jobs["obj/a.cu.o"], watch.jobs["obj/b.cpp.o"]
    assert a.peak == 1306 * page and a.largest == 1000 * page and a.samples == 2
    assert b.peak == 200 * page
    assert watch.peak == (10 + 1 + 5 + 1000 + 300 + 200) * page  # another session's is not ours
    assert a.cpu_seconds == pytest.approx((50 + 10) / jobwatch._HZ)
    assert jobwatch.output_of("nvcc -c x.cu -o obj/a.cu.o -O3", watch.outputs) == "obj/a.cu.o"
    assert jobwatch.output_of("nvcc -c x.cu -o obj/a.cu.o.d", watch.outputs) is None


def test_a_measured_step_carries_its_expected_time(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(project())
    first = plan_for(matrix, tmp_path)
    assert all(s.expected_seconds is None for s in first.compile.steps)
    costs = {
        s.cost_key: JobCost(seconds=12.0, cpu_seconds=12.0, peak=GIB, largest=GIB, threads=1)
        for s in first.compile.steps
    }  # the variant's own compiles: one folder's log (the C++ ones are the shared folder's)
    inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), costs=costs)
    again = plan_for(matrix, tmp_path, inputs=inputs)
    assert all(s.expected_seconds == 12.0 for s in again.compile.steps if s.rule != "nvcc")
    assert again.compile.schedule.measured == len(again.compile.steps)


def test_the_progress_expects_the_folders_log_first_then_the_history(
    project: Project, tmp_path: Path
) -> None:
    matrix = load_matrix(project())
    first = plan_for(matrix, tmp_path)
    costs = {
        s.cost_key: JobCost(seconds=12.0, cpu_seconds=12.0, peak=GIB, largest=GIB, threads=1)
        for s in first.compile.steps
    }  # the variant's own compiles: one folder's log (the C++ ones are the shared folder's)
    inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), costs=costs)
    plan = plan_for(matrix, tmp_path, inputs=inputs)
    jobs = {
        f"{s.rule.upper()} {s.source.relative_to(plan.project)}": plan.command_path(s.object)
        for s in plan.compile.steps
    }
    todo = [*jobs, "LINK x.so"]
    logged, *rest = jobs
    # A fresh folder (no .ninja_log): every compile from the history, the link unknown.
    fresh = ninja.expected_times(plan, todo, {}, lambda j: jobs.get(j, "x.so"))
    assert set(fresh) == set(jobs)
    assert all(
        fresh[j] == s.expected_seconds for j, s in zip(jobs, plan.compile.steps, strict=True)
    )
    # The folder's own last build wins where it has the job; a job not pending is left out.
    again = ninja.expected_times(
        plan, [logged, "LINK x.so"], {jobs[logged]: 3.0, "x.so": 1.5}, lambda j: jobs.get(j, "x.so")
    )
    assert again == {logged: 3.0, "LINK x.so": 1.5}
    assert plan.host is not None and plan.host.compile.steps  # the shared folder's, likewise
    assert len(plan.compile.steps) == 1 or rest  # exercised the history part


@pytest.mark.parametrize(
    "value",
    ["Infinity", "-Infinity", "NaN", "1e999", "-1", "true", '"5"', "1" + "0" * 400, "null"],
)
def test_a_history_entry_of_another_shape_is_left_out(tmp_path: Path, value: str) -> None:
    """Issue 21's cache entries: the job-cost history is wheelforge's own file; an entry whose
    peak is Infinity (JSON's, or 1e999) raised OverflowError in every later build."""
    good = '{"seconds": 1.0, "cpu_seconds": 1.0, "peak": 1024, "largest": 1024, "threads": 1}'
    bad = good.replace('"peak": 1024', f'"peak": {value}')
    (tmp_path / jobcosts.HISTORY).write_text(f'{{"entries": {{"a": {good}, "b": {bad}}}}}')
    assert list(jobcosts.load(tmp_path)) == ["a"]


def test_tree_rss_sums_a_process_and_everything_below_it() -> None:
    """The benchmarks' whole-build peak: the root's tree only, not its parent's or a sibling's."""

    def p(pid: int, ppid: int, rss: int) -> jobwatch.Sample:
        return jobwatch.Sample(pid=pid, ppid=ppid, session=1, rss=rss, ticks=0)

    found = [p(1, 0, 1000), p(10, 1, 5), p(11, 10, 7), p(12, 11, 11), p(20, 1, 100)]
    assert jobwatch.tree_rss(10, found) == 5 + 7 + 11
    assert jobwatch.tree_rss(12, found) == 11
    assert jobwatch.tree_rss(99, found) == 0


def test_compile_cache_says_who_asked_for_none(project: Project) -> None:
    """The summary's "compile cache: none" names the one place that asked for it."""
    path = project()
    flag = resolve(Flags(matrix=path, compile_cache="none"), {"WHEELFORGE_COMPILE_CACHE": "ccache"})
    assert (flag.compile_cache, flag.compile_cache_source) == ("none", "--compile-cache none")
    env = resolve(Flags(matrix=path), {"WHEELFORGE_COMPILE_CACHE": "none"})
    assert env.compile_cache_source == "WHEELFORGE_COMPILE_CACHE=none"
    assert compilecache.none_reason("none", env.compile_cache_source) == (
        "asked for by WHEELFORGE_COMPILE_CACHE=none"
    )
    path.write_text(path.read_text() + "compile-cache: none\n")
    matrix = resolve(Flags(matrix=path), {})
    assert matrix.compile_cache_source == f"{path.name}'s compile-cache: none"
    auto = resolve(Flags(matrix=path), {"WHEELFORGE_COMPILE_CACHE": "auto"})
    assert auto.compile_cache_source == "WHEELFORGE_COMPILE_CACHE=auto"  # the first place wins


@pytest.mark.parametrize("tool", ["ccache", "sccache"])
def test_what_sccaches_server_compiled_is_unmeasured_not_its_clients_cost(
    project: Project, tmp_path: Path, tool: str
) -> None:
    """jobwatch sees the processes of ninja's job. Through ccache the compiler runs there; through
    sccache the client hands the compile to its server, so the job's tiny figures are not the
    compile's: unknown (None), left out of the history, and the summary says why."""
    from wheelforge.build.results import VariantResult
    from wheelforge.cli import build_screen as render

    matrix = load_matrix(project())
    exe = tmp_path / tool
    cache = compilecache.CompileCache(tool=tool, exe=exe, base=tmp_path)  # type: ignore[arg-type]
    inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), compile_cache=cache)
    plan = plan_for(matrix, tmp_path, inputs=inputs)
    outputs = [plan.command_path(s.object) for s in plan.compile.steps]
    client = jobwatch.Measured(peak=9 << 20, largest=8 << 20, cpu_seconds=0.01, samples=40)
    run = ninja.NinjaRun(
        ran=("NVCC",),
        seconds=dict.fromkeys(outputs, 30.0),
        measured=dict.fromkeys(outputs, client),
        peak=65 << 20,
    )
    stats = compilecache.CacheStats(
        tool=tool, requests=1, hits=0, misses=1, uncached=0, location="x", detail={}
    )  # type: ignore[arg-type]
    jobs = compiling.job_reports(plan, run, stats, compiling.served_rules(plan))
    assert "nvcc" in {j.rule for j in jobs}
    result = VariantResult.__new__(VariantResult)
    for name in {f.name for f in dataclasses.fields(VariantResult)}:
        object.__setattr__(result, name, None)
    object.__setattr__(result, "jobs", jobs)
    object.__setattr__(result, "compile_cache", stats)
    (line, *_) = render.compile_costs(result)
    if tool == "ccache":
        assert all(j.cpu_seconds == 0.01 and j.peak == 9 << 20 for j in jobs)
        assert line == f"compiles: {len(jobs)}, {0.01 * len(jobs):.1f} s of CPU; the slowest:"
        return
    assert all(j.cpu_seconds is None and j.peak is None and j.largest is None for j in jobs)
    compiling.remember(tmp_path, jobs)
    assert jobcosts.load(tmp_path) == {}  # nothing said of what compiling costs
    assert line.endswith("in sccache's server (CPU, memory not measured); the slowest:")
    assert "s of CPU" not in line


def test_a_job_first_seen_before_its_exec_is_still_measured(tmp_path: Path) -> None:
    """A child of ninja read between its fork and its exec still shows ninja's command line
    (more often on a busy machine): it is asked again, not taken for no compile for good."""
    stat = "{pid} (x) S {ppid} 1 100 0 0 0 0 0 0 0 7 0 0 0 20 0 1 0 0 1000 50 x"
    samples = [
        jobwatch.parse_stat(100, stat.format(pid=100, ppid=1)),
        jobwatch.parse_stat(201, stat.format(pid=201, ppid=100)),
    ]
    watch = jobwatch.JobWatch(outputs=("obj/a.cpp.o",), proc=tmp_path)
    watch._session = 100
    cmdline = tmp_path / "201" / "cmdline"
    cmdline.parent.mkdir()
    cmdline.write_bytes(b"ninja\0-C\0build\0")
    watch.sample([s for s in samples if s is not None])
    assert "obj/a.cpp.o" not in watch.jobs
    cmdline.write_bytes(b"/bin/sh\0-c\0c++ -c a.cpp -o obj/a.cpp.o\0")
    watch.sample([s for s in samples if s is not None])
    assert watch.jobs["obj/a.cpp.o"].samples == 1


def test_the_wrappers_costs_make_every_compile_known() -> None:
    """What each compile's wrapper wrote (foundation/jobcost.py): its CPU time replaces the
    watch's glimpses; its largest process is a floor of the peak; a compile the watch never
    saw is known all the same."""
    text = (
        '["obj/a.cu.o", 3.25, 419430400]\n'
        '["obj/b.cpp.o", 0.031, 20971520]\n'
        '["obj/c.cpp.o", 0.5, 1'  # cut short: a wrapper killed while writing
    )
    costs = jobcost.parse(text)
    assert costs == {"obj/a.cu.o": (3.25, 400 << 20), "obj/b.cpp.o": (0.031, 20 << 20)}
    seen = {
        "obj/a.cu.o": jobwatch.Measured(
            peak=600 << 20, largest=300 << 20, cpu_seconds=2.0, samples=9
        )
    }
    merged = jobwatch.with_costs(seen, costs)
    a, b = merged["obj/a.cu.o"], merged["obj/b.cpp.o"]
    assert (a.cpu_seconds, a.peak, a.largest, a.known) == (3.25, 600 << 20, 400 << 20, True)
    assert (b.cpu_seconds, b.peak, b.largest, b.samples, b.known) == (
        0.031,
        20 << 20,
        20 << 20,
        0,
        True,
    )
    assert not jobwatch.Measured().known
