"""What ninja says while it runs, turned into job outcomes for foundation/progress.JobProgress.

- A job's outcome is its exit code's: ninja prints ``FAILED: [code=N] <outputs>`` right after
  the status line of a job that exited non-zero (status.cc BuildEdgeFinished), and records a
  job in ``.ninja_log`` only when it succeeded (build.cc FinishCommand). What a job printed
  (its stderr merged into its stdout) is its output, whatever it says.
- Its time is the one ninja logs. ninja writes the log after it has printed the job's output,
  so the reader never waits for the log: a ticker thread looks for it (waiting in the reader
  would stop reading the pipe that ninja is writing that very output into).
- The last build's times, from the same ``.ninja_log``, are the estimate.
- What a running job does now: its processes (foundation/proctree.py), named the way
  ``nvcc --time`` names its phases (cicc, ptxas with their archs, cudafe++, fatbinary, gcc).
  nvcc's own reports cannot serve: ``--time`` writes a row as each phase ends, but nvcc 13.0
  crashes (SIGSEGV) on ``-E --time`` without ``-o``, which is how ccache preprocesses, so it
  would make every ccache miss uncacheable; ``-v`` and ``--dryrun`` print to the job's output,
  which ninja holds back until the job has ended.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge.foundation import numbers, proctree, readers

if TYPE_CHECKING:  # the live display loads with ninja's run; a no-op build starts neither
    from wheelforge.foundation.progress import JobProgress, Running

# ninja prints this for each job (NINJA_STATUS); without a terminal, when the job ends.
STATUS = "[wheelforge %f/%t] "
STATUS_RE = re.compile(r"^\[wheelforge (\d+)/\d+\] (.+)$", re.ASCII)
# ninja 1.12 and newer name the exit code; older ones print "FAILED: <outputs>".
FAILED_RE = re.compile(r"^FAILED: (?:\[code=([0-9]{1,9})\] )?")
TICK_S = 0.5
# How long the end waits for ninja's log of the last job: ninja has exited by then.
_END_WAIT_S = 1.0


class NinjaLog:
    """``.ninja_log``: ``start_ms<TAB>end_ms<TAB>mtime<TAB>output<TAB>hash`` lines (build_log.cc),
    appended and flushed as each job succeeds. What it held when this build began is the last
    build's times (*before*); what is appended afterwards is this build's (*seconds*)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seconds: dict[str, float] = {}
        self.read()
        self.before = self.seconds
        self.seconds = {}

    def read(self) -> None:
        try:
            with readers.open_regular(self.path) as file:
                file.seek(self.offset)
                data = file.read(readers.STATE_CAP)  # what ninja appended since
        except (OSError, readers.FileRefused):
            return
        complete = data.rfind(b"\n") + 1
        self.offset += complete
        for line in data[:complete].decode(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) < 4:
                continue  # the "# ninja log v5" header
            start, end = (numbers.whole(f, high=numbers.MAX_EPOCH * 1000) for f in fields[:2])
            if start is not None and end is not None:
                self.seconds[fields[3]] = (end - start) / 1000


_DEVICE_ARCH_RE = re.compile(r"^-?-arch(?:=|$)")


def _arch(argv: Sequence[str]) -> str | None:
    """cicc's ``-arch compute_90``, ptxas's ``-arch=sm_90``."""
    for i, word in enumerate(argv):
        if _DEVICE_ARCH_RE.match(word):
            value = (
                word.split("=", 1)[1] if "=" in word else (argv[i + 1] if i + 1 < len(argv) else "")
            )
            return value or None
    return None


_HOST = ("gcc", "g++", "cc", "c++", "clang", "clang++", "cc1plus", "cc1")


def phase_of(process: proctree.Process) -> str | None:
    """What one process of a job is doing, in nvcc's own names for its phases (``--time``):
    None for a shell, a launcher or a compiler driver waiting for its tools."""
    name = process.program
    if name in ("cicc", "ptxas"):
        arch = _arch(process.argv)
        return f"{name} {arch}" if arch else name
    if name in ("cudafe++", "fatbinary", "nvlink"):
        return name
    if name in ("as",):
        return "assembling"
    if name in ("ld", "collect2", "ld.gold", "ld.lld"):
        return "linking"
    if name.startswith(_HOST) and name not in ("ccache", "sccache"):
        return "preprocessing" if "-E" in process.argv else "compiling"
    return None


def phases(processes: Sequence[proctree.Process]) -> str | None:
    """The phases of one job's processes (parents first), the innermost ones: ``cicc
    compute_90, ptxas sm_80`` while nvcc --threads runs two archs at once."""
    named = [(p, phase_of(p)) for p in processes]
    parents = {p.ppid for p, what in named if what}
    # A compiler driver (gcc) whose own tool (cc1plus) is named says nothing more.
    found = [what for p, what in named if what and p.pid not in parents]
    return ", ".join(dict.fromkeys(found)) or None


@dataclass
class _Ended:
    """A job whose status line ninja printed: its outcome is decided by what follows."""

    job: str
    output: str  # its output file, as .ninja_log names it
    ok: bool | None = None  # None: not known yet
    code: int | None = None
    lines: list[str] = field(default_factory=list)
    shown: bool = False


class Feed:
    """ninja's lines and log → JobProgress (see the module docstring). *name_of* turns a status
    line's description into the job's name, *output_of* a job into its output file."""

    def __init__(
        self,
        progress: JobProgress,
        ninja_log: NinjaLog,
        *,
        name_of: Callable[[str], str],
        output_of: Callable[[str], str],
        on_command: Callable[[str], None] | None = None,
    ) -> None:
        self.progress = progress
        self.log = ninja_log
        self.name_of = name_of
        self.output_of = output_of
        self.on_command = on_command
        self.ran: list[str] = []
        self._current: _Ended | None = None
        self._waiting: list[_Ended] = []
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ninja: int | None = None

    def line(self, text: str) -> None:
        """One line of ninja's output, as it comes."""
        with self._lock:
            status = STATUS_RE.match(text)
            current = self._current
            if status is not None:
                if current is not None and current.ok is None:
                    current.ok = True  # no FAILED line came right after its status line
                job = self.name_of(status[2])
                if self.on_command is not None:
                    self.on_command(status[2])
                self.ran.append(job)
                self._current = _Ended(job=job, output=self.output_of(job))
                self._waiting.append(self._current)
                self.progress.ended(job)
            elif current is not None and current.ok is None and (failed := FAILED_RE.match(text)):
                current.ok = False
                current.code = int(failed[1]) if failed[1] else None
            elif current is not None and not text.startswith("ninja: "):
                if current.ok is None:
                    current.ok = True
                if current.shown:
                    self.progress.more_output(text)
                else:
                    current.lines.append(text)
            self._settle()

    def tick(self) -> None:
        """From the ticker: this build's log read on, and what the running jobs do now."""
        with self._lock:
            self.log.read()
            self._settle()
            running = self._running()
            if running is not None:
                self.progress.running(running)

    def _settle(self, *, final: bool = False) -> None:
        """Show each ended job whose outcome is known: failed (its FAILED line), or succeeded
        and logged (with its time); at the end, those ninja never logged as they are."""
        for ended in list(self._waiting):
            seconds = self.log.seconds.get(ended.output)
            if ended.ok is False:
                lines = ended.lines[1:]  # the first line after FAILED is the command
                started = self._started.get(ended.job)
                took = time.monotonic() - started if started is not None else None
                self.progress.finished(ended.job, took, ok=False, code=ended.code, output=lines)
            elif seconds is not None or final:
                # Logged: it exited 0. Not logged at the end: ninja stopped before logging it.
                self.progress.finished(ended.job, seconds, output=ended.lines)
            else:
                continue
            ended.shown = True
            self._waiting.remove(ended)

    def _running(self) -> list[Running] | None:
        """The jobs ninja has running now, from its child processes; None when they can't be
        read (no /proc)."""
        from wheelforge.foundation.progress import Running

        if self._ninja is None:
            return None
        processes = proctree.session(self._ninja)
        if not processes:
            return None
        now = time.monotonic()
        found = []
        for child in (p for p in processes if p.ppid == self._ninja):
            job = self._job_of(child)
            if job is None:
                continue
            started = self._started.setdefault(job, now)
            found.append(
                Running(
                    job=job,
                    seconds=now - started,
                    phase=phases(proctree.descendants(child.pid, processes)),
                )
            )
        return found

    def _job_of(self, shell: proctree.Process) -> str | None:
        """The job a child of ninja (``/bin/sh -c <command>``) runs: the one whose output its
        command writes."""
        command = shell.argv[-1] if shell.argv else ""
        try:
            words = set(shlex.split(command))
        except ValueError:
            words = set(command.split())
        # A shell given one simple command execs it (dash does): the child of ninja is then
        # the compiler or its launcher (ccache nvcc ... -o obj/x.o), its own argv the words.
        words.update(shell.argv)
        for job in self.progress.left:
            if self.output_of(job) in words:
                return job
        return None

    def watch(self, ninja_pid: int) -> None:
        """Read the jobs of the ninja with this pid (it leads its own session)."""
        with self._lock:
            self._ninja = ninja_pid

    def close(self) -> None:
        """ninja has exited: its log is complete; every job it ended is shown."""
        deadline = time.monotonic() + _END_WAIT_S
        with self._lock:
            if self._current is not None and self._current.ok is None:
                self._current.ok = True
            while self._waiting and time.monotonic() < deadline:
                self.log.read()
                self._settle()
                if self._waiting:
                    time.sleep(0.01)
            self._settle(final=True)

    @contextlib.contextmanager
    def ticking(self, find_ninja: Callable[[], int | None]) -> Iterator[None]:
        """A daemon thread that ticks every TICK_S until the block ends; *find_ninja* gives the
        ninja's pid once it has started (None until then)."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(TICK_S):
                if self._ninja is None and (pid := find_ninja()) is not None:
                    self.watch(pid)
                self.tick()

        thread = threading.Thread(target=run, name="wheelforge-ninja-feed", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)
