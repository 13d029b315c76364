"""Running the ninja from PyPI on a variant's build.ninja (planning/ninjafile.py writes it):
its jobs as they finish, its log, its deps log, and a failed run as a BuildError."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge.foundation import jobcost, log, proc, proctree, readers, removal, writers
from wheelforge.foundation.diagnostics import Diagnostic, parse_compiler_output
from wheelforge.foundation.errors import BuildError, EnvironmentProblem
from wheelforge.planning import hostshare, ninjafile
from wheelforge.planning.parallelism import default_parallelism
from wheelforge.planning.plan import CompileStep, VariantPlan
from wheelforge.toolchain import ninjafeed

if TYPE_CHECKING:  # what runs ninja loads these; a no-op build starts none (its start-up time)
    from wheelforge.build import jobwatch
    from wheelforge.build.jobserver import Jobserver

NINJA_HINT = "pip install ninja"
_SHARED: list[Jobserver] = []  # the jobserver of variants built side by side (sharing())


@contextlib.contextmanager
def sharing(jobserver: Jobserver) -> Iterator[None]:
    """Within this block every ninja run runs in a slot of *jobserver*, as its client: no -j
    (which would turn the client off), MAKEFLAGS naming the FIFO (build/jobserver.py)."""
    _SHARED.append(jobserver)
    try:
        yield
    finally:
        _SHARED.remove(jobserver)


def executable() -> Path:
    import ninja as ninja_pkg

    exe = Path(ninja_pkg.BIN_DIR) / "ninja"
    if not exe.is_file():
        raise EnvironmentProblem(f"ninja was not found at {exe}: {NINJA_HINT}")
    return exe


def pending_jobs(plan: VariantPlan) -> list[str]:
    """The steps ninja would run now (``NVCC kernels/csrc/x.cu``), in its order: a dry run
    (``-n``), which runs nothing and writes no log."""
    args: list[str | Path] = [executable(), "-C", plan.build_dir, "-n", *_jobs_flag(plan)]
    result = proc.run(
        args, hint=NINJA_HINT, env={"NINJA_STATUS": ninjafeed.STATUS}, timeout=proc.PROBE_S
    )
    return [
        _job_name(m[2], plan)
        for ln in result.stdout.splitlines()
        if (m := ninjafeed.STATUS_RE.match(ln))
    ]


def commands(build_ninja_dir: Path) -> list[str]:
    """Every command of a build.ninja, as ninja would run it (``ninja -t commands``)."""
    result = proc.run(
        [executable(), "-C", build_ninja_dir, "-t", "commands"],
        hint=NINJA_HINT,
        timeout=proc.PROBE_S,
    )
    return result.stdout.splitlines()


def _jobs_flag(plan: VariantPlan) -> list[str]:
    jobs = plan.compile.jobs
    return ["-j", str(jobs)] if jobs is not None else []


_VERBS = ("CXX", "CC", "NVCC", "LINK", *ninjafile.SPLIT_VERBS.values())
GENERATE = "GENERATE"  # a generate step's job: GENERATE <its name>


def _job_name(description: str, plan: VariantPlan) -> str:
    """``NVCC /abs/kernels/csrc/x.cu`` → ``NVCC kernels/csrc/x.cu``. With -vv ninja prints the
    command instead of the description: the job is then the step whose output it names."""
    verb, _, target = description.partition(" ")
    if verb in _VERBS:
        code = ""
        if verb == ninjafile.SPLIT_VERBS["nvcc_device"]:  # DEVICE <source> <code>
            target, _, code = target.rpartition(" ")
        # The build file names paths relative to the build folder (plan.command_path).
        shown = _display(Path(os.path.normpath(plan.build_dir / target)), plan)
        return f"{verb} {shown} {code}" if code else f"{verb} {shown}"
    if verb == GENERATE:
        return description
    for step in plan.compile.steps:
        names = (plan.command_path(step.object), str(step.object))
        if any(f" {name} " in f" {description} " for name in names):
            return job_of(step, plan)
    for link in plan.links:
        if plan.command_path(link.library) in description:
            return f"LINK {_display(link.library, plan)}"
    for edge in plan.compile.generate:
        if f" --name {edge.name} " in f" {description} ":
            return f"{GENERATE} {edge.name}"
    return description


def job_of(step: CompileStep, plan: VariantPlan) -> str:
    """A compile step's job as the screen names it: ``NVCC kernels/x.cu``, ``DEVICE
    kernels/x.cu sm_90`` (its description, ninjafile.py)."""
    verb = ninjafile.SPLIT_VERBS.get(step.rule, step.rule.upper())
    shown = f"{verb} {_display(step.source, plan)}"
    return f"{shown} {step.code}" if step.code else shown


def _outputs(plan: VariantPlan) -> dict[str, str]:
    """Each job's output as .ninja_log names it (for its duration)."""
    outputs = {job_of(s, plan): plan.command_path(s.object) for s in plan.compile.steps}
    for link in plan.links:
        outputs[f"LINK {_display(link.library, plan)}"] = plan.command_path(link.library)
    for edge in plan.compile.generate:
        if edge.outputs:
            outputs[f"{GENERATE} {edge.name}"] = plan.command_path(edge.outputs[0])
    return outputs


def run_env(plan: VariantPlan, *, jobserver: bool = False) -> dict[str, str]:
    """The compilers' environment: nvcc's threads, and with *jobserver* (ninja runs as the
    client of one) nvcc's --jobserver, so its threads and its split compile's partitions
    (planner.split_partitions) take tokens from it and run only on idle cores."""
    env = {"NINJA_STATUS": ninjafeed.STATUS}
    cache = plan.compile.compile_cache
    appended = []
    if plan.compile.nvcc_threads and not (cache and cache.splits_nvcc):  # else on the command
        # In nvcc's environment rather than on its command line: --threads changes how nvcc
        # schedules, never its output, so it must not change the ninja file (a rebuild) or a
        # compile cache's key (a miss on a machine with another core count). --jobserver the
        # same (its objects are byte for byte those without it).
        appended.append(f"--threads {plan.compile.nvcc_threads}")
    if jobserver and plan.compile.split_compile:
        appended.append("--jobserver")
    if appended:
        env["NVCC_APPEND_FLAGS"] = " ".join([os.environ.get("NVCC_APPEND_FLAGS", ""), *appended])
        env["NVCC_APPEND_FLAGS"] = env["NVCC_APPEND_FLAGS"].strip()
    return env


def _own_jobserver(plan: VariantPlan) -> Jobserver | None:
    """A jobserver of the plan's -j for a ninja run alone whose nvcc compiles are split
    (planner.split_partitions): ninja and nvcc's threads then share its slots, so the cores
    a compile's partitions use are the ones ninja leaves idle. None where none is needed, or
    where this process was given one (MAKEFLAGS: nvcc joins that one, as ninja does)."""
    if not plan.compile.split_compile or "--jobserver-auth" in os.environ.get("MAKEFLAGS", ""):
        return None
    from wheelforge.build.jobserver import Jobserver

    return Jobserver(plan.compile.jobs or default_parallelism(), ninjas=1)


@dataclass(frozen=True, kw_only=True)
class NinjaRun:
    """What one ninja run did: the steps it ran (``CXX``, ``NVCC``, ``LINK``), and what each
    compile cost, by its output as the commands spell it."""

    ran: tuple[str, ...]
    seconds: Mapping[str, float]  # wall time, from .ninja_log
    # memory and CPU: each compile's wrapper (foundation/jobcost.py) and /proc (jobwatch.py)
    measured: Mapping[str, jobwatch.Measured]
    peak: int  # bytes: the whole build's largest resident memory at one moment


def run(plan: VariantPlan, *, env: dict[str, str] | None = None) -> NinjaRun:
    """Run ninja for the variant, with *env* added to the compilers' environment, showing each
    job as it runs and finishes (toolchain/ninjafeed.py), and measuring what each costs
    (build/jobwatch.py)."""
    from wheelforge.build import jobwatch
    from wheelforge.foundation.progress import JobProgress

    # The fixed-pid library (planning/reproducible.py) is wheelforge's, not a job of the
    # project's: ninja builds it, the screen does not list it (JobProgress ignores a job it was
    # not given).
    todo = [job for job in pending_jobs(plan) if not job.startswith(f"{ninjafile.PRELOAD} ")]
    own = _own_jobserver(plan) if not _SHARED else None
    shared = _SHARED[-1] if _SHARED else own
    jobs = _jobs_flag(plan) if shared is None else []
    args: list[str | Path] = [executable(), "-C", plan.build_dir, *jobs]
    if log.verbosity() >= 2:
        args.append("-v")
    outputs = _outputs(plan)

    def output_of(job: str) -> str:
        # a job it was not told of: the last output (a shared folder links nothing)
        last = plan.links[-1].library if plan.links else plan.compile.steps[-1].object
        return outputs.get(job, plan.command_path(last))

    ninja_log = ninjafeed.NinjaLog(plan.build_dir / ".ninja_log")
    progress = JobProgress(
        todo,
        plan.compile.jobs or default_parallelism(),
        expected=expected_times(plan, todo, ninja_log.before, output_of),
        build_log=plan.build_dir / "build.log",
        tag=_tag(plan),
    )
    watch = jobwatch.JobWatch(outputs=tuple(outputs.values()))
    costs = plan.build_dir / jobcost.FILE  # each compile's wrapper appends its line
    _discard(costs, plan)

    def command(description: str) -> None:
        if log.verbosity() >= 2:
            log.detail(description)  # the full command line (ninja -v)

    feed = ninjafeed.Feed(
        progress,
        ninja_log,
        name_of=lambda d: _job_name(d, plan),
        output_of=output_of,
        on_command=command,
    )
    slot = shared.slot(proc.refuse_if_stopped) if shared else contextlib.nullcontext()
    try:
        with slot, feed.ticking(lambda: _ninja_pid(plan)):
            makeflags = {"MAKEFLAGS": shared.makeflags()} if shared else {}
            served = bool(makeflags) or "--jobserver-auth" in os.environ.get("MAKEFLAGS", "")
            result = proc.stream(
                args,
                hint=NINJA_HINT,
                env={
                    **run_env(plan, jobserver=served),
                    jobcost.ENV: str(costs),
                    **(env or {}),
                    **makeflags,
                },
                on_line=feed.line,
                timeout=proc.BUILD_S,
                on_start=watch.start,
            )
        feed.close()
    finally:
        watch.stop()
        progress.close()
        if own is not None:
            own.close()
        measured = jobwatch.with_costs(watch.jobs, _read_costs(costs))
        _discard(costs, plan)
    # Every variant's full log at a stable path, whether the build passed or not.
    writers.write_if_changed(plan.build_dir / "build.log", result.stdout)
    if result.returncode != 0:
        raise _failure(plan, result.stdout)
    ninja_log.read()
    return NinjaRun(
        ran=tuple(job.split(" ", 1)[0] for job in feed.ran),
        seconds=dict(ninja_log.seconds),
        measured=measured,
        peak=watch.peak,
    )


def _read_costs(path: Path) -> dict[str, tuple[float, int]]:
    """What the compiles' wrappers wrote (foundation/jobcost.py); none when no compile ran."""
    if not path.is_file():
        return {}
    try:
        return jobcost.parse(readers.read_text(path, cap=readers.STATE_CAP, errors="replace"))
    except (OSError, readers.FileRefused):
        return {}


def _discard(path: Path, plan: VariantPlan) -> None:
    """The costs file of a run (a killed run's left over): removed, so no run reads another's."""
    if path.is_file():
        removal.remove(path, within=plan.build_dir)


def _tag(plan: VariantPlan) -> str:
    """What names *plan*'s jobs beside other variants' (foundation/progress.JobBoard)."""
    if plan.build_dir.name.startswith(hostshare.HOST_PREFIX):
        return "shared"
    return plan.variant.id


def expected_times(
    plan: VariantPlan,
    todo: list[str],
    before: Mapping[str, float],
    output_of: Callable[[str], str],
) -> dict[str, float]:
    """Each pending job's expected seconds for the progress's estimate: its time in this build
    folder's last build (*before*: .ninja_log, by output), else, in a folder with no log of its
    own (a fresh clone, another variant), the same step's time in earlier builds anywhere
    (the plan's expected_seconds, from planning/jobcosts.py). A job with neither is absent."""
    expected = {job: before[output_of(job)] for job in todo if output_of(job) in before}
    for step in plan.compile.steps:
        job = job_of(step, plan)
        if step.expected_seconds is not None and job in todo:
            expected.setdefault(job, step.expected_seconds)
    return expected


def _ninja_pid(plan: VariantPlan) -> int | None:
    """The ninja this process runs for *plan* (one at a time), once it has started."""
    exe = str(executable())
    build_dir = str(plan.build_dir)
    for child in proctree.children(os.getpid()):
        if child.argv[:1] == (exe,) and build_dir in child.argv:
            return child.pid
    return None


def _failure(plan: VariantPlan, output: str) -> BuildError:
    from wheelforge.build import diagnose

    found = diagnose.failures(output)
    failed = found[0].failed if found else ""
    step = next((s for s in plan.compile.steps if plan.command_path(s.object) in failed), None)
    link = next((k for k in plan.links if plan.command_path(k.library) in failed), None)
    generated = diagnose.generate_failure(found[0]) if found else None
    if generated is not None:
        # The step's own line says what happened (its exit code, its deadline, an output it
        # did not write); its output is above, and in build.log.
        return BuildError(
            f"variant {plan.variant.id}: {generated}; its output is above, the whole log is "
            f"{plan.build_dir / 'build.log'}",
            details=diagnose.first_errors(found[0]),
        )
    what = (
        f"compiling {_display(step.source, plan)} failed"
        if step
        else f"linking {link.wheel_path} failed"
        if link and len(plan.links) > 1
        else "linking failed"
        if link
        else "the build failed"
    )
    if cause := proc.known_cause(output):  # the disk is full: said first, not in the details
        what += f": {cause}"
    # ninja's own status lines are noise in the compiler's output.
    shown = "\n".join(ln for ln in output.splitlines() if not ninjafeed.STATUS_RE.match(ln))
    # The failing command's first errors (not the tail of everything), then known causes; the
    # files in them named as the project names them, not from the build folder (../../../).
    first = diagnose.project_paths(
        diagnose.first_errors(found[0]) if found else proc.tail(shown), plan
    )
    hints = diagnose.hints("\n".join(found[0].output) if found else shown, plan)
    # The verdict comes last, after its details (log.error): the failing command's first
    # error line, and where the whole log is, stay on the screen however long the rest is.
    error = diagnose.first_error_line(found[0]) if found else None
    if error:
        error = diagnose.project_paths(error, plan)
    return BuildError(
        f"variant {plan.variant.id}: {what}"
        + (f": {error.strip()}" if error else "")
        + f"; the first errors are above, the whole log is {plan.build_dir / 'build.log'}",
        details="\n".join([first, *hints]),
        diagnostics=tuple(_from_build_dir(d, plan) for d in parse_compiler_output(shown)),
    )


def deps(plan: VariantPlan, *, check: bool) -> dict[str, list[str]] | None:
    """What ninja's deps log holds for *plan*'s build folder (``ninja -t deps``, ninja's public
    view of it: the binary ``.ninja_deps`` format is private to ninja), by target; None when
    ninja fails and not *check*."""
    args: list[str | Path] = [executable(), "-C", plan.build_dir, "-t", "deps"]
    result = proc.run(args, hint=NINJA_HINT, check=check, timeout=proc.PROBE_S)
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
    if plan.host is not None:  # the shared folder of its C++ and C compiles (hostshare.py)
        found.update(inputs(plan.host))
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
