"""Reading ninja as it runs: job names from its status lines, outcomes from its FAILED lines and
its log, times and estimates from .ninja_log, phases from the jobs' processes; and the screen
that shows them (foundation/progress.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import ninja
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import log, proctree
from wheelforge.foundation.progress import JobProgress, Running, job_line, remaining, shorten
from wheelforge.toolchain import ninjafeed

from .fakes import plan_for

Project = Callable[..., Path]


def test_job_names_from_descriptions_and_from_commands(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    cu = next(s for s in plan.compile.steps if s.source.suffix == ".cu")
    assert ninja._job_name(f"NVCC {cu.source}", plan) == "NVCC csrc/kernel.cu"
    # ninja -v prints the command line instead of the description.
    obj, src = plan.command_path(cu.object), plan.command_path(cu.source)
    command = f"/usr/bin/nvcc -MF {obj}.d -c {src} -o {obj}"
    assert ninja._job_name(command, plan) == "NVCC csrc/kernel.cu"
    assert ninja._job_name(f"/usr/bin/g++ -shared -o {plan.links[0].library} a.o", plan).startswith(
        "LINK "
    )


def test_the_ninja_log_gives_the_last_builds_times_and_this_ones(tmp_path: Path) -> None:
    log_file = tmp_path / ".ninja_log"
    log_file.write_text("# ninja log v7\n0\t1500\t0\t/b/old.o\tabc\n")
    reader = ninjafeed.NinjaLog(log_file)
    assert reader.before == {"/b/old.o": 1.5} and reader.seconds == {}
    with log_file.open("a") as f:
        f.write("10\t2510\t0\t/b/a.o\tdef\n20\t")  # the second line is still being written
    reader.read()
    assert reader.seconds == {"/b/a.o": 2.5}
    with log_file.open("a") as f:
        f.write("320\t0\t/b/b.o\t123\n")
    reader.read()
    assert reader.seconds["/b/b.o"] == 0.3


def test_progress_without_a_terminal_is_one_line_per_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = JobProgress(["NVCC csrc/a.cu", "CXX csrc/b.cpp", "LINK _C.abi3.so"], parallel=2)
    assert progress.live is None  # no terminal here: nothing is redrawn
    progress.finished("CXX csrc/b.cpp", 1.25, output=["csrc/b.cpp:3: warning: unused x"])
    progress.finished("NVCC csrc/a.cu", 4.0, ok=False, code=2)
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "  [1/3] CXX csrc/b.cpp 1.2s",
        "    csrc/b.cpp:3: warning: unused x",
        "  [2/3] NVCC csrc/a.cu failed (exit code 2) after 4.0s",
    ]
    log.set_quiet(True)
    try:
        quiet = JobProgress(["CXX csrc/b.cpp"], parallel=1)
        quiet.finished("CXX csrc/b.cpp", 1.0)
        assert capsys.readouterr().err == ""
    finally:
        log.set_quiet(False)


def test_without_a_terminal_the_first_running_lines_come_after_a_minute(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A minute after ninja started, its first jobs have run a moment less (0:59): they are
    reported then, not a minute later (seen in a CI log of grouped_gemm: first line at 1:59)."""
    progress = JobProgress(["NVCC csrc/a.cu", "NVCC csrc/b.cu", "LINK _C.abi3.so"], parallel=2)
    progress.running([Running(job="NVCC csrc/a.cu", seconds=10.0)])
    assert capsys.readouterr().err == ""  # not a minute yet
    progress.start -= 60
    progress._reported -= 60  # a minute later
    progress.running([Running(job="NVCC csrc/a.cu", seconds=59.6, phase="cicc compute_90"),
                      Running(job="NVCC csrc/b.cu", seconds=20.0)])  # fmt: skip
    assert capsys.readouterr().err.splitlines() == [
        "  … NVCC csrc/a.cu: running for 0:59, cicc compute_90 now"
    ]
    progress.close()


def _feed(tmp_path: Path, jobs: list[str]) -> tuple[ninjafeed.Feed, JobProgress, Path]:
    log_file = tmp_path / ".ninja_log"
    log_file.write_text("# ninja log v7\n")
    progress = JobProgress(jobs, parallel=1, build_log=tmp_path / "build.log")
    outputs = {job: f"obj/{job.split()[-1]}.o" for job in jobs}
    feed = ninjafeed.Feed(
        progress,
        ninjafeed.NinjaLog(log_file),
        name_of=lambda description: description,
        output_of=outputs.__getitem__,
    )
    return feed, progress, log_file


def test_a_job_that_writes_to_stderr_and_exits_0_is_a_success_with_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ptxas -v, or warnings: ninja prints the job's output after its status line; the job is
    failed only by ninja's FAILED line (its exit code), never by what it printed. The reader
    never waits for the log (ninja writes it after the output that the reader must drain)."""
    feed, progress, log_file = _feed(tmp_path, ["NVCC ops.cu", "NVCC bad.cu", "LINK x.so"])
    feed.line("[wheelforge 1/3] NVCC ops.cu")
    feed.line("ptxas info    : Used 32 registers, used 1 barriers")
    feed.line("ptxas info    : Compile time = 3.1 ms")
    assert capsys.readouterr().err == ""  # succeeded, but not logged yet: its time is to come
    with log_file.open("a") as f:
        f.write("0\t41200\t0\tobj/ops.cu.o\tabc\n")
    feed.tick()
    feed.line("[wheelforge 2/3] NVCC bad.cu")
    feed.line("FAILED: [code=1] obj/bad.cu.o ")
    feed.line("nvcc -c bad.cu -o obj/bad.cu.o")
    feed.line('bad.cu(4): error: identifier "x" is undefined')
    feed.line("ninja: build stopped: subcommand failed.")
    feed.close()
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "  [1/3] NVCC ops.cu 41.2s",
        "    ptxas info    : Used 32 registers, used 1 barriers",
        "    ptxas info    : Compile time = 3.1 ms",
        "  [2/3] NVCC bad.cu failed (exit code 1)",
    ]
    assert feed.ran == ["NVCC ops.cu", "NVCC bad.cu"]


def test_a_jobs_long_output_is_cut_and_the_log_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed, _, log_file = _feed(tmp_path, ["NVCC ops.cu"])
    feed.line("[wheelforge 1/1] NVCC ops.cu")
    for i in range(20):
        feed.line(f"ptxas info: line {i}")
    with log_file.open("a") as f:
        f.write("0\t1000\t0\tobj/ops.cu.o\tabc\n")
    feed.close()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "  [1/1] NVCC ops.cu 1.0s"
    assert len(err) == 1 + 8 + 1
    assert err[-1] == f"    … 12 more lines in {tmp_path / 'build.log'} (-v shows them)"


def test_a_job_ninja_ended_but_never_logged_is_shown_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed, _, _ = _feed(tmp_path, ["CXX a.cpp"])
    feed.line("[wheelforge 1/1] CXX a.cpp")
    feed.close()
    assert capsys.readouterr().err.splitlines() == ["  [1/1] CXX a.cpp "]


def test_the_live_line_keeps_its_label_and_count_and_shortens_file_names() -> None:
    running = [
        Running(job="CXX csrc/fast_hadamard_transform.cpp", seconds=26, phase="compiling"),
        Running(job="NVCC csrc/fast_hadamard_transform_cuda.cu", seconds=26, phase="cicc compute_90"),
    ]  # fmt: skip
    for width in (80, 100):
        line = job_line(width, done=1, total=4, elapsed=26, left=None, running=running).plain
        assert len(line) <= width
        assert line.startswith("  compiling ") and " 1/4 0:26" in line
        assert "fast_had" in line
    wide = job_line(200, done=1, total=4, elapsed=26, left=70, running=running).plain
    assert "fast_hadamard_transform_cuda.cu 0:26 cicc compute_90" in wide
    assert "~1:10 left" in wide
    # Narrower still, the count and the times stay; the names give way first.
    narrow = job_line(40, done=1, total=4, elapsed=26, left=70, running=running).plain
    assert "1/4 0:26 ~1:10 left" in narrow and len(narrow) <= 40


def test_the_bar_gives_way_to_what_the_jobs_are_doing() -> None:
    running = [
        Running(job="NVCC csrc/ops.cu", seconds=108, phase="cudafe++"),
        Running(job="NVCC csrc/grouped_gemm.cu", seconds=108, phase="cicc compute_90"),
    ]
    jobs = "ops.cu 1:48 cudafe++ · grouped_gemm.cu 1:48 cicc compute_90"
    # At 90 columns the jobs and their phases fit only without the bar.
    line = job_line(90, done=0, total=3, elapsed=109, left=None, running=running).plain
    assert line == f"  compiling 0/3 1:49 · {jobs}"
    wide = job_line(100, done=0, total=3, elapsed=109, left=None, running=running).plain
    assert "━" in wide and wide.endswith(jobs)


def test_a_short_name_keeps_its_length_while_a_long_one_gives_way() -> None:
    running = [
        Running(job="NVCC kernels/csrc/activation_cuda.cu", seconds=26),
        Running(job="NVCC kernels/csrc/norm_cuda.cu", seconds=18),
    ]
    line = job_line(80, done=4, total=7, elapsed=41, left=None, running=running).plain
    assert line.endswith(" · activation_cuda.cu 0:26 · norm_cuda.cu 0:18")  # both fit whole
    line = job_line(66, done=4, total=7, elapsed=41, left=None, running=running).plain
    # Narrower, the bar goes first, then the long name gives way while the short one stays.
    assert line == "  compiling 4/7 0:41 · activati…_cuda.cu 0:26 · norm_cuda.cu 0:18"


def test_shorten_keeps_the_start_and_the_extension() -> None:
    assert shorten("ops.cu", 10) == "ops.cu"
    short = shorten("fast_hadamard_transform_cuda.cu", 15)
    assert len(short) == 15 and short.startswith("fast_h") and short.endswith("cuda.cu")


def test_the_estimate_follows_ninjas_order_and_waits_for_the_link() -> None:
    expected = {"CXX a": 10.0, "NVCC b": 100.0, "NVCC c": 50.0, "LINK x": 2.0}
    # Two slots: a (10) then c (50) beside b (100); the link after all of them.
    assert remaining([], ["CXX a", "NVCC b", "NVCC c", "LINK x"], expected, 2) == 102.0
    # b has run 40 s of its 100; c is queued.
    assert remaining([("NVCC b", 40.0)], ["NVCC c", "LINK x"], expected, 2) == 62.0
    assert remaining([], ["CXX a", "NVCC new"], expected, 2) is None
    # b runs far longer than last time: no estimate rather than "~0:01 left" for minutes.
    assert remaining([("NVCC b", 140.0)], ["LINK x"], expected, 2) is None


def _process(pid: int, ppid: int, *argv: str) -> proctree.Process:
    return proctree.Process(pid=pid, ppid=ppid, argv=argv)


def test_a_jobs_phase_is_named_after_what_nvcc_runs_now() -> None:
    nvcc = _process(11, 10, "/usr/local/cuda/bin/nvcc", "-c", "x.cu")
    cicc = _process(
        12, 11, "/usr/local/cuda/nvvm/bin/cicc", "--c++17", "-arch", "compute_90", "x.ii"
    )
    ptxas = _process(13, 11, "ptxas", "-arch=sm_80", "-m64", "x.ptx")
    assert ninjafeed.phases([nvcc, cicc, ptxas]) == "cicc compute_90, ptxas sm_80"
    gcc = _process(14, 11, "gcc", "-E", "-x", "c++", "x.cu")
    cc1plus = _process(15, 14, "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", "-E", "x.cu")
    assert ninjafeed.phases([nvcc, gcc, cc1plus]) == "preprocessing"
    assert ninjafeed.phases([nvcc]) is None
    cxx = _process(21, 20, "ccache", "c++", "-c", "a.cpp")
    assert ninjafeed.phases([cxx, _process(22, 21, "cc1plus", "a.cpp")]) == "compiling"


def test_the_process_tree_is_read_from_proc(tmp_path: Path) -> None:
    def fake(pid: int, ppid: int, sid: int, *argv: str, state: str = "S") -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) {state} {ppid} {pid} {sid} 0")
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    fake(100, 1, 100, "ninja", "-C", "build")
    fake(101, 100, 100, "/bin/sh", "-c", "nvcc -c x.cu -o obj/x.o")
    fake(102, 101, 100, "nvcc", "-c", "x.cu")
    fake(103, 102, 100, "cicc", state="Z")  # ended: left out
    fake(200, 1, 200, "other")
    (tmp_path / "self").mkdir()
    found = proctree.session(100, tmp_path)
    assert sorted(p.pid for p in found) == [100, 101, 102]
    assert [p.pid for p in proctree.descendants(100, found)] == [101, 102]
    assert [p.program for p in proctree.children(100, tmp_path)] == ["sh"]


def test_a_fresh_ninja_log_starts_with_its_header(tmp_path: Path) -> None:
    """The first build of a folder reads .ninja_log from its start: the header line has one
    field (a ValueError once, when the lines' fields were unpacked before being counted)."""
    log_file = tmp_path / ".ninja_log"
    reader = ninjafeed.NinjaLog(log_file)
    log_file.write_text("# ninja log v7\n10\t2510\t0\t/b/a.o\tdef\n٤\t5\t0\t/b/c.o\tx\n")
    reader.read()
    assert reader.seconds.get("/b/a.o") == 2.5
    assert "/b/c.o" not in reader.seconds  # not ASCII digits: no time, no traceback
