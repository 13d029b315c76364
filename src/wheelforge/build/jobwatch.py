"""What each compile costs while ninja runs it: a thread reads /proc a few times a second and
sums, per job, the resident memory and the CPU time of its processes (the compiler driver,
cicc, ptxas, cc1plus: whatever runs below the command ninja started), and the resident memory
of the whole build. The wall time of each job is ninja's own (``.ninja_log``).

ninja leads a session of its own (foundation/proc.py) and starts each command as its child, so a
job is a child of ninja and everything below it; its output file, named after ``-o`` in its
command line, says which compile step it is. Best effort and read-only, like ``top``: a process
may end between two reads (its last quarter second is not seen; a short compile on a busy
machine not at all), and shared pages count in each process that maps them (the sum errs high,
the safe side for a memory limit). What is exact comes from the wrapper each compile runs under
(foundation/jobcost.py: ``wait4``'s rusage), merged in by with_costs: the CPU time and the
largest process of every compile, however short.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
INTERVAL_S = 0.2


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One process, as /proc/<pid>/stat says."""

    pid: int
    ppid: int
    session: int
    rss: int  # bytes
    ticks: int  # utime + stime + cutime + cstime (its own, and its reaped children's)


def parse_stat(pid: int, text: str) -> Sample | None:
    """/proc/<pid>/stat: ``pid (comm) state ppid pgrp session ... utime stime cutime cstime ...
    rss ...`` (proc(5)); comm may hold spaces and parentheses."""
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 22:
        return None
    try:
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        return Sample(
            pid=pid,
            ppid=int(fields[1]),
            session=int(fields[3]),
            rss=int(fields[21]) * _PAGE,
            ticks=ticks,
        )
    except ValueError:
        return None


def read_samples(proc: Path = _PROC) -> list[Sample]:
    """Every readable process of the machine, as /proc says."""
    found: list[Sample] = []
    try:
        entries = [e for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            text = Path(entry.path, "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # ended meanwhile
        sample = parse_stat(int(entry.name), text)
        if sample is not None:
            found.append(sample)
    return found


def _argv(pid: int, proc: Path = _PROC) -> str:
    try:
        with (proc / str(pid) / "cmdline").open("rb") as file:
            raw = file.read(1 << 20)
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def output_of(command: str, outputs: Iterable[str]) -> str | None:
    """Which of *outputs* (as the commands spell them) *command* writes: the one after ``-o``."""
    words = f" {command} "
    for output in outputs:
        if f" -o {output} " in words or f" -o={output} " in words:
            return output
    return None


@dataclass
class Measured:
    """What the watch saw of one job, and what its wrapper measured (with_costs)."""

    peak: int = 0  # bytes: the largest sum of its processes' resident memory
    largest: int = 0  # bytes: its largest single process
    cpu_seconds: float = 0.0
    samples: int = 0
    exact: bool = False  # CPU time and largest process from the wrapper's wait4

    @property
    def known(self) -> bool:
        """Whether anything was measured of it."""
        return self.exact or self.samples > 0


def with_costs(
    seen: Mapping[str, Measured], costs: Mapping[str, tuple[float, int]]
) -> dict[str, Measured]:
    """The watch's jobs with what each compile's wrapper measured (foundation/jobcost.py): its
    CPU time (every process it waited for, to the end: exact) and its largest process; the
    peak, a sum at one moment only the watch sees, is never below that largest process."""
    merged = dict(seen)
    for output, (cpu, largest) in costs.items():
        watched = seen.get(output, Measured())
        merged[output] = Measured(
            peak=max(watched.peak, largest),
            largest=max(watched.largest, largest),
            cpu_seconds=cpu,
            samples=watched.samples,
            exact=True,
        )
    return merged


@dataclass
class JobWatch:
    """The thread that measures ninja's jobs; *outputs* are the step outputs, as the commands
    spell them (plan.command_path)."""

    outputs: tuple[str, ...]
    interval: float = INTERVAL_S
    proc: Path = _PROC
    jobs: dict[str, Measured] = field(default_factory=dict)
    peak: int = 0  # bytes: the largest sum over the whole build at one moment
    _session: int | None = None
    _roots: dict[int, str | None] = field(default_factory=dict)  # ninja's children → output
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, session: int) -> None:
        """Begin watching ninja's session (ninja's pid: foundation/proc.stream's on_start)."""
        self._session = session
        self._thread = threading.Thread(target=self._run, name="wheelforge-jobwatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample(read_samples(self.proc))
            self._stop.wait(self.interval)

    def sample(self, processes: list[Sample]) -> None:
        """Account one reading of /proc."""
        mine = [p for p in processes if p.session == self._session]
        self.peak = max(self.peak, sum(p.rss for p in mine))
        by_parent: dict[int, list[Sample]] = {}
        for p in mine:
            by_parent.setdefault(p.ppid, []).append(p)
        roots = by_parent.get(self._session or -1, [])
        live = {root.pid for root in roots}
        for gone in [pid for pid in self._roots if pid not in live]:
            del self._roots[gone]  # its job ended: the pid may come back as another's
        for root in roots:
            output = self._roots.get(root.pid)
            if output is None:
                # Asked again until it names one: a child read between ninja's fork and its
                # exec still has ninja's command line (more often so on a busy machine).
                output = output_of(_argv(root.pid, self.proc), self.outputs)
                self._roots[root.pid] = output
            if output is None:
                continue
            tree = _subtree(root, by_parent)
            job = self.jobs.setdefault(output, Measured())
            job.peak = max(job.peak, sum(p.rss for p in tree))
            job.largest = max(job.largest, *(p.rss for p in tree))
            job.cpu_seconds = max(job.cpu_seconds, sum(p.ticks for p in tree) / _HZ)
            job.samples += 1


def tree_rss(root: int, processes: list[Sample] | None = None) -> int:
    """The resident memory of the process *root* and everything below it, from one reading of
    /proc (*processes*, else read now); 0 when it is gone. The benchmarks' whole-build peak."""
    found = read_samples() if processes is None else processes
    by_parent: dict[int, list[Sample]] = {}
    for p in found:
        by_parent.setdefault(p.ppid, []).append(p)
    top = next((p for p in found if p.pid == root), None)
    return 0 if top is None else sum(p.rss for p in _subtree(top, by_parent))


def _subtree(root: Sample, by_parent: Mapping[int, list[Sample]]) -> list[Sample]:
    found = [root]
    todo = [root]
    while todo:
        for child in by_parent.get(todo.pop().pid, []):
            found.append(child)
            todo.append(child)
    return found
