"""Variants built side by side (issue 33): how many at once (the jobserver's slots, the memory
split), the jobserver's tokens, each variant's outcome and output kept apart, an error stopping
the rest, and a shared folder compiled by the first variant that links it."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import compiling, together
from wheelforge.build.jobserver import TOKEN, Jobserver
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import log, proc, progress
from wheelforge.foundation.errors import BuildError, Interrupted
from wheelforge.planning.jobcosts import GIB
from wheelforge.planning.parallelism import Schedule, variants_at_once
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import compilecache

from .fakes import plan_for

Project = Callable[..., Path]


def _schedule(peak: float = 1.0, memory: float | None = 16.0, **kw: object) -> Schedule:
    return Schedule(
        jobs=None,
        nvcc_threads=1,
        peak=int(peak * GIB),
        memory=int(memory * GIB) if memory is not None else None,
        **kw,  # type: ignore[arg-type]
    )


def test_one_variant_or_one_job_is_the_sequential_build() -> None:
    assert variants_at_once([_schedule()], jobs=8) == 1
    assert variants_at_once([_schedule()] * 3, jobs=1) == 1


def test_as_many_at_once_as_the_jobserver_has_slots() -> None:
    assert variants_at_once([_schedule()] * 3, jobs=4) == 3
    assert variants_at_once([_schedule()] * 6, jobs=4) == 4  # a ninja needs a slot of its own
    assert variants_at_once([_schedule(memory=None)] * 3, jobs=4) == 3  # the cores decide


def test_the_memory_is_split_the_largest_peaks_fitting_together() -> None:
    # Each variant alone reaches 5 GiB with all its jobs at once; 16 GiB holds three of them.
    assert variants_at_once([_schedule(5)] * 4, jobs=4) == 3
    assert variants_at_once([_schedule(9), _schedule(1), _schedule(1)], jobs=4) == 3
    assert variants_at_once([_schedule(9), _schedule(8), _schedule(1)], jobs=4) == 1
    # the smallest budget any schedule names binds
    assert variants_at_once([_schedule(5), _schedule(5, memory=9)], jobs=4) == 1


def test_a_schedule_that_binds_the_memory_builds_its_variants_in_turn() -> None:
    """A heavy pool or a lowered -j holds only within one ninja, and a jobserver client takes
    no -j: beside another variant it would not hold."""
    pooled = _schedule(heavy=("a.cu",), heavy_depth=1)
    reduced = _schedule(reduced=True)
    assert variants_at_once([pooled, _schedule()], jobs=4) == 1
    assert variants_at_once([_schedule(), reduced], jobs=4) == 1


def _plans(project: Project, tmp_path: Path, n: int, **compile: object) -> list[VariantPlan]:
    plan = plan_for(load_matrix(project()), tmp_path)
    free = _schedule(peak=0.5, memory=64)
    made = []
    for i in range(n):
        p = dataclasses.replace(plan, build_dir=tmp_path / f"v{i}")
        made.append(
            dataclasses.replace(p, compile=dataclasses.replace(p.compile, schedule=free, **compile))
        )
    return made


def test_at_once_keeps_to_the_tools_that_cannot_share(project: Project, tmp_path: Path) -> None:
    assert together.at_once(_plans(project, tmp_path, 1), {}) == 1
    assert together.at_once(_plans(project, tmp_path, 3, jobs=4), {}) == 3
    assert together.at_once(_plans(project, tmp_path, 3, jobs=1), {}) == 1  # -j 1: as ever
    # a make that runs wheelforge lends its own jobserver: each ninja joins that one, in turn
    outer = {"MAKEFLAGS": " -j8 --jobserver-auth=fifo:/tmp/x"}
    assert together.at_once(_plans(project, tmp_path, 3, jobs=None), outer) == 1
    # sccache's one server counts one session's compiles
    sccache = compilecache.CompileCache(tool="sccache", exe=Path("/usr/bin/sccache"), base=tmp_path)
    assert together.at_once(_plans(project, tmp_path, 3, compile_cache=sccache), {}) == 1


def _in_fifo(server: Jobserver) -> int:
    """How many tokens the FIFO holds now (read through its path, as ninja opens it, and put
    back)."""
    assert server.fifo is not None
    fd = os.open(server.fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        try:
            tokens = os.read(fd, 64)
        except BlockingIOError:
            return 0
        os.write(fd, tokens)
        return len(tokens)
    finally:
        os.close(fd)


def test_the_jobserver_holds_a_token_for_each_ninja_beyond_the_first() -> None:
    """n ninjas at once: n implicit slots, n - 1 of them tokens held here, so with what the
    FIFO lends their jobs never more than `jobs` compiles run in all."""
    server = Jobserver(4)
    try:
        assert server.fifo is None  # nothing made before a ninja starts
        server.take()  # the first ninja: this process's own slot
        flags = server.makeflags()
        assert server.fifo is not None and server.fifo.exists()
        assert flags == f" -j4 --jobserver-auth=fifo:{server.fifo}"
        assert (server.held, _in_fifo(server)) == (0, 3)
        server.take()
        server.take()  # three ninjas: two tokens held, one left for their jobs
        assert (server.held, _in_fifo(server)) == (2, 1)
        server.take()
        assert (server.held, _in_fifo(server)) == (3, 0)
        stopped = []

        def stop() -> None:
            stopped.append(1)
            raise Interrupted

        with pytest.raises(Interrupted):  # none left: it waits, asking whether to stop
            server.take(stop)
        assert stopped
        server.give()
        server.give()  # two ninjas left: one token held, two back for the jobs
        assert (server.held, _in_fifo(server)) == (1, 2)
        server.give()
        server.give()  # none left: every token back in the FIFO
        assert (server.held, _in_fifo(server)) == (0, 3)
    finally:
        folder = server.fifo.parent if server.fifo else None
        server.close()
    assert folder is not None and not folder.exists()


def test_no_more_ninjas_than_the_memory_allows(tmp_path: Path) -> None:
    server = Jobserver(4, ninjas=2)
    try:
        server.take()
        server.take()
        tries = []

        def stop() -> None:
            tries.append(1)
            if len(tries) > 2:
                raise Interrupted

        with pytest.raises(Interrupted):  # tokens are left, but two ninjas run already
            server.take(stop)
        assert _in_fifo(server) == 2
    finally:
        server.close()


def test_a_ninja_under_the_jobserver_reads_what_the_fifo_holds() -> None:
    """A client (ninja) reads the tokens through the FIFO's path, as ninja opens it."""
    server = Jobserver(3)
    try:
        server.makeflags()
        assert server.fifo is not None
        fd = os.open(server.fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.read(fd, 8) == TOKEN * 2
        finally:
            os.close(fd)
    finally:
        server.close()


def test_outcomes_keep_the_plans_order_and_each_variants_lines_stay_together(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plans = _plans(project, tmp_path, 3)
    first_may_end = threading.Event()

    def build_one(plan: VariantPlan) -> str:
        name = plan.build_dir.name
        log.info(f"{name} starts")
        if name == "v0":
            first_may_end.wait(5)  # the first ends last
        else:
            time.sleep(0.05)
        log.info(f"{name} ends")
        if name == "v2":
            first_may_end.set()
        return name if name != "v1" else f"{name} failed"  # a failure is its own outcome

    outcomes = together.build(plans, build_one, workers=3)
    assert outcomes == ["v0", "v1 failed", "v2"]
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert lines == [f"v{i} {what}" for i in range(3) for what in ("starts", "ends")]


def test_one_worker_builds_in_turn_in_the_calling_thread(project: Project, tmp_path: Path) -> None:
    seen = []
    together.build(
        _plans(project, tmp_path, 3),
        lambda p: seen.append(threading.current_thread()),
        workers=1,
    )
    assert seen == [threading.main_thread()] * 3


def test_an_error_stops_the_others_and_goes_on_up(project: Project, tmp_path: Path) -> None:
    plans = _plans(project, tmp_path, 3)
    started: list[str] = []

    def build_one(plan: VariantPlan) -> str:
        started.append(plan.build_dir.name)
        if plan.build_dir.name == "v0":
            raise RuntimeError("a bug")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            proc.refuse_if_stopped()  # as a tool about to start would be refused
            time.sleep(0.01)
        return "never"

    with pytest.raises(RuntimeError, match="a bug"):
        together.build(plans, build_one, workers=2)
    assert "v2" not in started  # the plan no thread had begun is not started
    proc.refuse_if_stopped()  # and tools may start again afterwards


def test_stop_all_refuses_every_tool_until_resume() -> None:
    proc.stop_all(Interrupted)
    try:
        with pytest.raises(Interrupted):
            proc.refuse_if_stopped()
    finally:
        proc.resume()
    proc.refuse_if_stopped()


def test_held_lines_are_printed_whole_when_released(capsys: pytest.CaptureFixture[str]) -> None:
    kept = log.Held()
    with log.held(kept):
        log.info("one")
        with log.unheld():
            log.info("now")
        log.info("two")
    assert capsys.readouterr().err.split() == ["now"]
    kept.release()
    assert capsys.readouterr().err.split() == ["one", "two"]


def test_a_shared_folder_is_compiled_by_the_first_variant_that_links_it(
    project: Project, tmp_path: Path
) -> None:
    plans = _plans(project, tmp_path, 2)
    host = dataclasses.replace(plans[0], build_dir=tmp_path / "host-0123456789abcdef")
    plans = [dataclasses.replace(p, host=host) for p in plans]
    order: list[str] = []
    with compiling.shared_in_order(plans):
        waiting = threading.Thread(
            target=lambda: (compiling._turn(host, plans[1]), order.append("b"))
        )
        waiting.start()
        time.sleep(0.3)
        compiling._turn(host, plans[0])  # the first's turn comes at once
        order.append("a")
        compiling._done_with_shared(plans[0], host)
        waiting.join(5)
    assert order == ["a", "b"]


def test_the_board_counts_every_ninja_and_names_jobs_by_their_variant() -> None:
    board = progress.JobBoard()
    with progress.shown(board):
        a = progress.JobProgress(["NVCC k/x.cu", "LINK a.so"], 4, tag="a-cu130")
        b = progress.JobProgress(["NVCC k/x.cu", "LINK b.so"], 4, tag="b-cu130")
        a.finished("NVCC k/x.cu", 1.0)
        b.running([progress.Running(job="NVCC k/x.cu", seconds=3.0)])  # from its processes
        line = board.line(80).plain
        assert "1/4" in line and "b:x.cu" in line
        a.close()  # one ninja left: its jobs need no variant
        assert "b:" not in board.line(80).plain and "x.cu" in board.line(80).plain
        b.close()
    assert progress.short_tags(["a-cu130", "b-cu130"]) == {"a-cu130": "a", "b-cu130": "b"}
    assert progress.short_tags(["sm80-cu128", "sm80-cu129"]) == {
        "sm80-cu128": "sm80-cu128",
        "sm80-cu129": "sm80-cu129",
    }


def test_a_failure_is_no_stop(project: Project, tmp_path: Path) -> None:
    """A variant's BuildError is its VariantFailure (variant.py), never an interruption of the
    others: build() hands back what build_one returned."""

    def build_one(plan: VariantPlan) -> BuildError | str:
        return BuildError("broken") if plan.build_dir.name == "v0" else "ok"

    outcomes = together.build(_plans(project, tmp_path, 3), build_one, workers=3)
    assert isinstance(outcomes[0], BuildError) and outcomes[1:] == ["ok", "ok"]


def test_the_boards_line_names_fewer_jobs_legibly_at_80_columns() -> None:
    running = [
        progress.Running(job=f"NVCC {v}:{name}", seconds=20)
        for v in ("a", "b")
        for name in ("activation_cuda.cu", "norm_cuda.cu")
    ]
    line = progress.job_line(
        80, done=6, total=13, elapsed=27, left=None, running=running, floors=(20, 16)
    ).plain
    assert "a:activation_cuda.cu 0:20 · a:norm_cuda.cu 0:20 +2" in line and len(line) <= 80
