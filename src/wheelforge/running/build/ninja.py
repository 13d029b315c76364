"""Running the ninja from PyPI on a variant's build.ninja (planning/ninjafile.py writes it):
its jobs as they finish, its log, its deps log, and a failed run as a BuildError."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import ninja as ninja_pkg

from wheelforge.foundation import fsutil, log, proc
from wheelforge.foundation.diagnostics import Diagnostic, parse_compiler_output
from wheelforge.foundation.errors import BuildError, EnvironmentProblem
from wheelforge.planning.parallelism import default_parallelism
from wheelforge.planning.plan import VariantPlan
from wheelforge.running.build import diagnose, jobwatch

NINJA_HINT = "pip install ninja"
# ninja prints this before each command it runs; we count the compile steps from it.
# Without a terminal, ninja prints it when each job ends (status.cc BuildEdgeFinished).
_STATUS = "[wheelforge %f/%t] "
_LOG_RETRIES = 40
_STATUS_RE = re.compile(r"^\[wheelforge (\d+)/\d+\] (.+)$")


def executable() -> Path:
    exe = Path(ninja_pkg.BIN_DIR) / "ninja"
    if not exe.is_file():
        raise EnvironmentProblem(f"ninja was not found at {exe}: {NINJA_HINT}")
    return exe


def pending_jobs(plan: VariantPlan) -> list[str]:
    """The steps ninja would run now (``NVCC kernels/csrc/x.cu``), in its order: a dry run
    (``-n``), which runs nothing and writes no log."""
    args: list[str | Path] = [executable(), "-C", plan.build_dir, "-n", *_jobs_flag(plan)]
    result = proc.run(args, hint=NINJA_HINT, env={"NINJA_STATUS": _STATUS})
    return [
        _job_name(m[2], plan) for ln in result.stdout.splitlines() if (m := _STATUS_RE.match(ln))
    ]


def commands(build_ninja_dir: Path) -> list[str]:
    """Every command of a build.ninja, as ninja would run it (``ninja -t commands``)."""
    result = proc.run([executable(), "-C", build_ninja_dir, "-t", "commands"], hint=NINJA_HINT)
    return result.stdout.splitlines()


def _jobs_flag(plan: VariantPlan) -> list[str]:
    jobs = plan.compile.jobs
    return ["-j", str(jobs)] if jobs is not None else []


_VERBS = ("CXX", "CC", "NVCC", "LINK")


def _job_name(description: str, plan: VariantPlan) -> str:
    """``NVCC /abs/kernels/csrc/x.cu`` → ``NVCC kernels/csrc/x.cu``. With -vv ninja prints the
    command instead of the description: the job is then the step whose output it names."""
    verb, _, target = description.partition(" ")
    if verb in _VERBS:
        # The build file names paths relative to the build folder (plan.command_path).
        return f"{verb} {_display(Path(os.path.normpath(plan.build_dir / target)), plan)}"
    for step in plan.compile.steps:
        names = (plan.command_path(step.object), str(step.object))
        if any(f" {name} " in f" {description} " for name in names):
            return f"{step.rule.upper()} {_display(step.source, plan)}"
    library = plan.command_path(plan.link.library)
    return f"LINK {_display(plan.link.library, plan)}" if library in description else description


class _NinjaLog:
    """Job durations from ``.ninja_log``, which ninja appends to (and flushes) as each job ends:
    ``start_ms<TAB>end_ms<TAB>mtime<TAB>output<TAB>hash`` (build_log.cc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.is_file() else 0
        self.seconds: dict[str, float] = {}

    def read(self) -> None:
        try:
            with self.path.open("rb") as file:
                file.seek(self.offset)
                data = file.read()
        except OSError:
            return
        complete = data.rfind(b"\n") + 1
        self.offset += complete
        for line in data[:complete].decode(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
                self.seconds[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000

    def duration(self, output: str) -> float | None:
        # ninja prints a job's status line just before it logs the job (build.cc FinishCommand):
        # give it a few milliseconds.
        for _ in range(_LOG_RETRIES):
            if output in self.seconds:
                break
            self.read()
            if output not in self.seconds:
                time.sleep(0.005)
        return self.seconds.get(output)


def run_env(plan: VariantPlan) -> dict[str, str]:
    env = {"NINJA_STATUS": _STATUS}
    cache = plan.compile.compile_cache
    if plan.compile.nvcc_threads and not (cache and cache.splits_nvcc):  # else on the command
        # In nvcc's environment rather than on its command line: --threads changes how nvcc
        # schedules, never its output, so it must not change the ninja file (a rebuild) or a
        # compile cache's key (a miss on a machine with another core count).
        appended = os.environ.get("NVCC_APPEND_FLAGS", "")
        env["NVCC_APPEND_FLAGS"] = f"{appended} --threads {plan.compile.nvcc_threads}".strip()
    return env


@dataclass(frozen=True, kw_only=True)
class NinjaRun:
    """What one ninja run did: the steps it ran (``CXX``, ``NVCC``, ``LINK``), and what each
    compile cost, by its output as the commands spell it."""

    ran: tuple[str, ...]
    seconds: Mapping[str, float]  # wall time, from .ninja_log
    measured: Mapping[str, jobwatch.Measured]  # memory and CPU, from /proc (jobwatch.py)
    peak: int  # bytes: the whole build's largest resident memory at one moment


def run(plan: VariantPlan, *, env: dict[str, str] | None = None) -> NinjaRun:
    """Run ninja for the variant, with *env* added to the compilers' environment, showing each
    job as it finishes and measuring what each costs (running/build/jobwatch.py)."""
    todo = pending_jobs(plan)
    args: list[str | Path] = [executable(), "-C", plan.build_dir, *_jobs_flag(plan)]
    if log.verbosity() >= 2:
        args.append("-v")
    outputs = {
        f"{s.rule.upper()} {_display(s.source, plan)}": plan.command_path(s.object)
        for s in plan.compile.steps
    }
    ninja_log = _NinjaLog(plan.build_dir / ".ninja_log")
    expected = {
        f"{s.rule.upper()} {_display(s.source, plan)}": s.expected_seconds
        for s in plan.compile.steps
        if s.expected_seconds is not None
    }
    progress = log.JobProgress(todo, plan.compile.jobs or default_parallelism(), expected)
    if (left := progress.time_left()) is not None:
        log.info(f"  about {left:.0f}s of compiling, by an earlier build's times")
    watch = jobwatch.JobWatch(outputs=tuple(outputs.values()))
    ran: list[str] = []

    def on_line(line: str) -> None:
        m = _STATUS_RE.match(line)
        if m is None:
            if log.verbosity() >= 1:
                log.detail(line)
            return
        job = _job_name(m[2], plan)
        if log.verbosity() >= 2:
            log.detail(m[2])  # the full command line (ninja -v)
        ran.append(job)
        output = outputs.get(job, plan.command_path(plan.link.library))
        progress.finished(job, ninja_log.duration(output))

    try:
        result = proc.stream(
            args,
            hint=NINJA_HINT,
            env={**run_env(plan), **(env or {})},
            on_line=on_line,
            on_start=watch.start,
        )
    finally:
        watch.stop()
        progress.close()
    # Every variant's full log at a stable path, whether the build passed or not.
    fsutil.write_if_changed(plan.build_dir / "build.log", result.stdout)
    if result.returncode != 0:
        raise _failure(plan, result.stdout)
    ninja_log.read()
    return NinjaRun(
        ran=tuple(job.split(" ", 1)[0] for job in ran),
        seconds=dict(ninja_log.seconds),
        measured=dict(watch.jobs),
        peak=watch.peak,
    )


def _failure(plan: VariantPlan, output: str) -> BuildError:
    found = diagnose.failures(output)
    failed = found[0].failed if found else ""
    step = next((s for s in plan.compile.steps if plan.command_path(s.object) in failed), None)
    what = (
        f"compiling {_display(step.source, plan)} failed"
        if step
        else "linking failed"
        if plan.command_path(plan.link.library) in failed
        else "the build failed"
    )
    # ninja's own status lines are noise in the compiler's output.
    shown = "\n".join(ln for ln in output.splitlines() if not _STATUS_RE.match(ln))
    # The failing command's first errors (not the tail of everything), then known causes.
    first = diagnose.first_errors(found[0]) if found else proc.tail(shown)
    hints = diagnose.hints("\n".join(found[0].output) if found else shown, plan)
    return BuildError(
        f"variant {plan.variant.id}: {what}; its first errors are below, the whole log is "
        f"{plan.build_dir / 'build.log'}",
        details="\n".join([first, *hints]),
        diagnostics=tuple(_from_build_dir(d, plan) for d in parse_compiler_output(shown)),
    )


def deps(plan: VariantPlan, *, check: bool) -> dict[str, list[str]] | None:
    """What ninja's deps log holds for *plan*'s build folder (``ninja -t deps``, ninja's public
    view of it: the binary ``.ninja_deps`` format is private to ninja), by target; None when
    ninja fails and not *check*."""
    args: list[str | Path] = [executable(), "-C", plan.build_dir, "-t", "deps"]
    result = proc.run(args, hint=NINJA_HINT, check=check)
    return parse_deps(result.stdout, plan.build_dir) if result.returncode == 0 else None


def parse_deps(text: str, build_dir: Path) -> dict[str, list[str]]:
    """``ninja -t deps`` output → target → the files it depends on (absolute paths).

    The format: a target line ``out.o: #deps 3, deps mtime 123 (VALID)``, then its deps
    indented, then a blank line."""
    deps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            current = None
        elif not line[0].isspace() and ": #deps" in line:
            target = line.split(": #deps", 1)[0]
            current = deps.setdefault(os.path.normpath(build_dir / target), [])
        elif current is not None:  # a relative dep is the build dir's (../../csrc/x.h)
            current.append(os.path.normpath(build_dir / line.strip()))
    return deps


def inputs(plan: VariantPlan) -> list[Path]:
    """Every file the last build of *plan* read: its sources and, from the depfiles ninja has
    recorded (``ninja -t deps``), every header they included, system and toolkit ones too."""
    found = {step.source for step in plan.compile.steps}
    for files in (deps(plan, check=True) or {}).values():
        found.update(Path(f) for f in files)
    return sorted(found)


def _from_build_dir(diagnostic: Diagnostic, plan: VariantPlan) -> Diagnostic:
    """A compiler names a file as its command did: relative to the build folder it ran in
    (plan.command_path). Made absolute, the report can name it relative to the project."""
    if Path(diagnostic.file).is_absolute():
        return diagnostic
    return dataclasses.replace(diagnostic, file=os.path.normpath(plan.build_dir / diagnostic.file))


def _display(source: Path, plan: VariantPlan) -> str:
    try:
        return str(source.relative_to(plan.project))
    except ValueError:
        return str(source)
