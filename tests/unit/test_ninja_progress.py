"""Reading ninja as it runs: job names from its status lines, job times from .ninja_log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.matrix.reader import load_matrix
from wheelforge.running.build import ninja

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
    assert ninja._job_name(f"/usr/bin/g++ -shared -o {plan.link.library} a.o", plan).startswith(
        "LINK "
    )


def test_job_times_from_the_ninja_log(tmp_path: Path) -> None:
    log_file = tmp_path / ".ninja_log"
    log_file.write_text("# ninja log v7\n0\t1500\t0\t/b/old.o\tabc\n")
    reader = ninja._NinjaLog(log_file)  # starts after what an earlier build logged
    with log_file.open("a") as f:
        f.write("10\t2510\t0\t/b/a.o\tdef\n20\t")  # the second line is still being written
    assert reader.duration("/b/a.o") == 2.5
    assert "/b/old.o" not in reader.seconds
    with log_file.open("a") as f:
        f.write("320\t0\t/b/b.o\t123\n")
    assert reader.duration("/b/b.o") == 0.3


def test_progress_without_a_terminal_is_one_line_per_job(capsys) -> None:  # type: ignore[no-untyped-def]
    from wheelforge.foundation import log

    progress = log.JobProgress(["NVCC csrc/a.cu", "CXX csrc/b.cpp", "LINK _C.abi3.so"], parallel=2)
    assert progress.live is None  # no terminal here: nothing is redrawn
    progress.finished("CXX csrc/b.cpp", 1.25)
    progress.finished("NVCC csrc/a.cu", None)  # not in .ninja_log: it failed
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "  [1/3] CXX csrc/b.cpp 1.2s",
        "  [2/3] NVCC csrc/a.cu failed",
    ]
    log.set_quiet(True)
    try:
        quiet = log.JobProgress(["CXX csrc/b.cpp"], parallel=1)
        quiet.finished("CXX csrc/b.cpp", 1.0)
        assert capsys.readouterr().err == ""
    finally:
        log.set_quiet(False)
