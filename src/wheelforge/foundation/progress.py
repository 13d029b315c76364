"""Compile jobs as they run and finish, on the one logger's console (log.py).

At a terminal: one live line that keeps its label, count and times at any width and shortens
the file names of the jobs still running instead (with what each runs now, when its processes
say: ``cicc compute_90``). Elsewhere (CI, a file): one line per finished job, and every minute
a line per job still running. Either way a job's line says what its exit code said, and what
it printed (warnings, ``ptxas -v``) is shown under it as output, never as a failure.

The times of the last build of the same folder (ninja's .ninja_log, read by
toolchain/ninjafeed.py) give an estimate of what is left."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.text import Text

from wheelforge.foundation import log

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.live import Live

# Lines of a successful job's output shown under it (all of them with -v; build.log has them).
OUTPUT_LINES = 8
# Without a terminal: a line per job still running after this long, and again as often.
REPORT_AFTER_S = 60.0
# ...counting a job that started this much after ninja as running that long: at the first
# report the first jobs have run a moment less than ninja (0:59), and would wait another minute.
_STARTED_AFTER_S = 10.0
_LINK = "LINK "


@dataclass(frozen=True, kw_only=True)
class Running:
    """A job that is running now."""

    job: str  # "NVCC csrc/ops.cu"
    seconds: float  # how long it has run
    phase: str | None = None  # what it runs now, e.g. "cicc compute_90"


def clock(seconds: float) -> str:
    """``0:42``, ``6:02``, ``1:02:03``."""
    s = max(0, int(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def shorten(name: str, width: int) -> str:
    """*name* within *width* characters: its middle replaced by one ``…``, so the start and
    the extension stay (``fast_hada…_cuda.cu``)."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    tail = max(1, (width - 1) // 2)
    return name[: width - 1 - tail] + "…" + name[-tail:]


def remaining(
    running: Sequence[tuple[str, float]],
    queued: Sequence[str],
    expected: Mapping[str, float],
    parallel: int,
) -> float | None:
    """Seconds until the last job ends, if each takes what it took in the last build: the
    running ones (job, seconds so far) finish first, then the queued ones take the first free
    of *parallel* slots in ninja's order, and the link starts when every compile is done.
    None when a job has no time from the last build, or runs well past it."""
    if any(job not in expected for job, _ in running) or any(j not in expected for j in queued):
        return None
    if any(so_far > expected[job] * 1.1 + 5 for job, so_far in running):
        return None  # slower than last time: the last build's times say nothing more
    # A job running a little longer than last time is taken to end soon.
    slots = [max(1.0, expected[job] - so_far) for job, so_far in running]
    slots += [0.0] * max(0, parallel - len(slots))
    end = max(slots, default=0.0)
    for job in queued:
        if job.startswith(_LINK):  # the link waits for every compile
            start = end
        else:
            slots.sort()
            start = slots.pop(0)
        finish = start + expected[job]
        slots.append(finish)
        end = max(end, finish)
    return end


def job_line(
    width: int,
    *,
    done: int,
    total: int,
    elapsed: float,
    left: float | None,
    running: Sequence[Running],
    floors: tuple[int, int] = (16, 10),
) -> Text:
    """The live line, never wider than *width*: the label, the count and the times first; then
    the running jobs, their file names shortened to what is left of the width. The bar (a
    tenth of the width, up to 20) goes when its room shows more of the jobs."""
    count = f"{done}/{total}"
    times = clock(elapsed) + (f" ~{clock(left)} left" if left is not None else "")
    head = len(f"  compiling  {count} {times}") + len(" · ")
    bar_width = min(20, width // 10) if width - head > 30 else 0
    jobs = _running_text(running, width - head - (bar_width + 1 if bar_width else 0), floors)
    if bar_width:
        without = _running_text(running, width - head, floors)
        if _shows(without, running) > _shows(jobs, running):
            bar_width, jobs = 0, without
    line = Text("  ")
    line.append("compiling", style="cyan")
    line.append(" ")
    if bar_width:
        filled = bar_width * done // total if total else bar_width
        line.append("━" * filled, style="magenta")
        line.append("━" * (bar_width - filled), style="dim")
        line.append(" ")
    line.append(f"{count} ")
    line.append(times, style="yellow")
    if jobs:
        line.append(" · ", style="dim")
        line.append(jobs)
    line.truncate(width)
    return line


def _shows(text: str, running: Sequence[Running]) -> tuple[int, int, int]:
    """How much of the running jobs *text* shows: their phases, the jobs, the names' letters."""
    phases = sum(1 for r in running if r.phase and f" {r.phase}" in text)
    jobs = sum(1 for r in running if f" {clock(r.seconds)}" in text)
    return phases, jobs, len(text)


def _running_text(running: Sequence[Running], room: int, floors: tuple[int, int] = (16, 10)) -> str:
    """The running jobs in *room* characters: each file's name, its time and phase. What gives
    way, in turn: the longest names (shortened, down to *floors*[0] characters: 16), the phases,
    the names again (down to *floors*[1]: 10), then the last jobs (counted as "+N")."""
    names = [Path(r.job.split(" ", 1)[-1]).name for r in running]
    for shown in range(len(running), 0, -1):
        more = f" +{len(running) - shown}" if shown < len(running) else ""
        for with_phase, floor in ((True, floors[0]), (False, floors[1])):
            tails = [
                f" {clock(r.seconds)}" + (f" {r.phase}" if with_phase and r.phase else "")
                for r in running[:shown]
            ]
            fixed = sum(len(t) for t in tails) + len(" · ") * (shown - 1) + len(more)
            cap = _cap([len(n) for n in names[:shown]], room - fixed)
            if cap is not None and cap >= min(floor, max(len(n) for n in names[:shown])):
                parts = [shorten(n, cap) + t for n, t in zip(names, tails, strict=False)]
                return " · ".join(parts) + more
    return f"+{len(running)}" if running and room >= len(f"+{len(running)}") else ""


def _cap(lengths: Sequence[int], budget: int) -> int | None:
    """The longest a name may be so that *lengths*, each cut to it, add up to *budget* at most
    (the short names keep their length, the long ones share what is left); None: not even 1."""
    if sum(lengths) <= budget:
        return max(lengths, default=0)
    for cap in range(max(lengths, default=0), 0, -1):
        if sum(min(n, cap) for n in lengths) <= budget:
            return cap
    return None


class _LiveLine:
    """The renderable rich's Live redraws: the job line at the console's width."""

    def __init__(self, progress: JobProgress | JobBoard) -> None:
        self.progress = progress

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.progress.line(options.max_width)


class JobProgress:
    """Compile jobs as they finish (module docstring). Thread-safe: toolchain/ninjafeed.py calls
    it from the thread reading ninja's output and from its ticker."""

    def __init__(
        self,
        jobs: Sequence[str],
        parallel: int,
        *,
        expected: Mapping[str, float] | None = None,
        build_log: Path | None = None,
        tag: str = "",
    ) -> None:
        self.tag = tag  # names its jobs on a JobBoard, beside other ninjas'
        self.board = _BOARDS[-1] if _BOARDS else None
        self.held = log.holding()  # what its lines are kept in (log.held), whichever thread
        self.left = list(jobs)  # in ninja's order: the first `parallel` of them are running
        self.jobs = frozenset(jobs)  # a job ninja runs that is not among them is not shown
        self.parallel = max(1, parallel)
        self.total = len(jobs)
        self.done = 0
        self.expected = dict(expected or {})
        self.build_log = build_log
        self.start = time.monotonic()
        self._seen: tuple[Running, ...] | None = None  # None: nobody said what runs
        self._index: dict[str, int] = {}  # each ended job's place in the count
        self._reported = self.start
        self._lock = threading.RLock()
        self.live: Live | None = None
        estimate = remaining([], self.left, self.expected, self.parallel)
        if log.quiet() or not self.total:
            return
        if self.board is not None:
            self.board.add(self)
        elif log.live_display():
            from rich.live import Live  # only a live display at a terminal needs it

            self.live = Live(
                _LiveLine(self),
                console=log.console,
                transient=True,
                refresh_per_second=4,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.live.start()
        elif estimate is not None and estimate >= 10:
            log.console.print(
                f"  {self.total} jobs, about {clock(estimate)} by the last build's times",
                highlight=False,
            )

    def running_now(self) -> list[Running]:
        """What runs now: as the processes said (running()), else ninja's order: the first
        `parallel` compiles still to finish, timed from the start."""
        if self._seen is not None:
            return list(self._seen)
        compiles = [job for job in self.left if not job.startswith(_LINK)] or self.left
        now = time.monotonic() - self.start
        return [Running(job=job, seconds=now) for job in compiles[: self.parallel]]

    def line(self, width: int) -> Text:
        with self._lock:
            running = self.running_now()
            queued = [job for job in self.left if job not in {r.job for r in running}]
            left = remaining(
                [(r.job, r.seconds) for r in running], queued, self.expected, self.parallel
            )
            return job_line(
                width,
                done=self.done,
                total=self.total,
                elapsed=time.monotonic() - self.start,
                left=left,
                running=running,
            )

    def ended(self, job: str) -> None:
        """ninja says *job* ended; its outcome (finished()) may come a moment later."""
        with self._lock:
            if job in self.left:
                self.left.remove(job)
                self.done += 1
                self._index[job] = self.done
            if self._seen is not None:
                self._seen = tuple(r for r in self._seen if r.job != job)

    def finished(
        self,
        job: str,
        seconds: float | None,
        *,
        ok: bool = True,
        code: int | None = None,
        output: Sequence[str] = (),
    ) -> None:
        """*job* ended: *ok* is its exit code's verdict (0), *output* what it printed. A job
        this progress was not given (a step of wheelforge's own) is not shown."""
        if job not in self.jobs:
            return
        with self._lock:
            if job in self.left:
                self.ended(job)
            took = f"{seconds:.1f}s" if seconds is not None else ""
            if not ok:
                took = f"failed (exit code {code})" if code is not None else "failed"
                took += f" after {seconds:.1f}s" if seconds is not None else ""
            if log.quiet():
                return
            style = "" if ok else "red"
            count = f"{self._index.get(job, self.done)}/{self.total}"
            live = self.live or (self.board is not None and self.board.live)
            head = f"  [dim]{count}[/dim] " if live else f"  [{count}] "
            self._print(
                head
                + escape(log.printable(f"{job} "))
                + (f"[{style}]{took}[/{style}]" if style else took)
            )
            if ok:
                self._output(output)

    def _output(self, output: Sequence[str]) -> None:
        shown = list(output) if log.verbosity() >= 1 else list(output[:OUTPUT_LINES])
        for text in shown:
            self._print(f"[dim]    {escape(log.printable(text))}[/dim]")
        if len(output) > len(shown):
            where = f" in {self.build_log}" if self.build_log else ""
            self._print(
                f"[dim]    … {len(output) - len(shown)} more lines{where} (-v shows them)[/dim]"
            )

    def more_output(self, text: str) -> None:
        """A line a job printed after its own line was shown."""
        with self._lock:
            if not log.quiet() and log.verbosity() >= 1:
                self._print(f"[dim]    {escape(log.printable(text))}[/dim]")

    def running(self, jobs: Sequence[Running]) -> None:
        """What runs now (from the jobs' processes); without a terminal, a line per job that
        has run for a minute or more, once a minute."""
        with self._lock:
            self._seen = tuple(r for r in jobs if r.job in self.left)
            now = time.monotonic()
            if self.live is not None or log.quiet() or now - self._reported < REPORT_AFTER_S:
                return
            if self.board is not None and self.board.live:
                return
            self._reported = now
            # Beside other variants, said now (their finished lines are held), with its variant.
            tag = f"{self.tag} " if self.board is not None and self.tag else ""
            for r in self._seen:
                if r.seconds < REPORT_AFTER_S - _STARTED_AFTER_S:
                    continue
                phase = f", {r.phase} now" if r.phase else ""
                last = self.expected.get(r.job)
                before = f"; {clock(last)} in the last build" if last is not None else ""
                said = f"  … {tag}{r.job}: running for {clock(r.seconds)}{phase}{before}"
                self._print(escape(log.printable(said)), now=self.board is not None)

    def _print(self, markup: str, *, now: bool = False) -> None:
        console = self.live.console if self.live is not None else log.console
        if now:
            with log.unheld():
                console.print(markup, highlight=False, soft_wrap=True)
        elif self.held is not None:
            with log.held(self.held):
                console.print(markup, highlight=False, soft_wrap=True)
        else:
            console.print(markup, highlight=False, soft_wrap=True)

    def close(self) -> None:
        with self._lock:
            if self.live is not None:
                self.live.stop()
                self.live = None
            if self.board is not None:  # nothing of it runs any more: the board's line says so
                self.left = []
                self._seen = ()


_BOARDS: list[JobBoard] = []


def short_tags(tags: Sequence[str]) -> dict[str, str]:
    """Each of *tags* (variant ids: ``a-cu130``) cut to the fewest of its ``-`` parts that
    still tell them all apart (``a``), so the live line has room for the file names."""
    unique = sorted(set(tags))
    longest = max((len(t.split("-")) for t in unique), default=1)
    for n in range(1, longest + 1):
        cut = {t: "-".join(t.split("-")[:n]) for t in unique}
        if len(set(cut.values())) == len(unique):
            return cut
    return {t: t for t in unique}


class JobBoard:
    """One live line for the ninjas of several variants running at once (at a terminal; none
    elsewhere): their jobs counted together, the running ones named with their variant
    (``a-cu130:ops.cu``). Each JobProgress made while it is shown (shown()) joins it instead of
    starting a live line of its own; its finished lines go where its variant's output goes."""

    def __init__(self) -> None:
        self.progresses: list[JobProgress] = []
        self.start = time.monotonic()
        self.live: Live | None = None
        self._lock = threading.Lock()

    def add(self, progress: JobProgress) -> None:
        with self._lock:
            self.progresses.append(progress)
            if self.live is not None or not log.live_display():
                return
            from rich.live import Live

            self.live = Live(
                _LiveLine(self),
                console=log.console,
                transient=True,
                refresh_per_second=4,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            with log.unheld():  # its control codes go out now, whoever started it
                self.live.start()

    def line(self, width: int) -> Text:
        with self._lock:
            progresses = list(self.progresses)
        running: list[Running] = []
        lefts: list[float | None] = []
        done = total = 0
        # Named with their variant only while more than one ninja runs.
        active = [p.tag for p in progresses if p.left]
        names = short_tags(active) if len(set(active)) > 1 else {}
        for p in progresses:  # each under its own lock, never under the board's
            with p._lock:
                # only what its processes say: a ninja still waiting for a slot runs nothing
                now = list(p._seen or ())
                queued = [job for job in p.left if job not in {r.job for r in now}]
                if p.left:
                    lefts.append(
                        remaining([(r.job, r.seconds) for r in now], queued, p.expected, p.parallel)
                    )
                done += p.done
                total += p.total
            for r in now:
                verb, _, name = r.job.partition(" ")
                tagged = f"{names[p.tag]}:{Path(name).name}" if p.tag in names else name
                running.append(Running(job=f"{verb} {tagged}", seconds=r.seconds, phase=r.phase))
        left = None if None in lefts else max((x for x in lefts if x is not None), default=None)
        return job_line(
            width,
            done=done,
            total=total,
            elapsed=time.monotonic() - self.start,
            left=left,
            running=running,
            # a variant's tag takes room of its own: fewer jobs named, each one legibly
            floors=(20, 16) if names else (16, 10),
        )

    def close(self) -> None:
        with self._lock:
            live, self.live = self.live, None
        if live is not None:
            with log.unheld():
                live.stop()


@contextlib.contextmanager
def shown(board: JobBoard) -> Iterator[JobBoard]:
    """Within this block every JobProgress made joins *board*; it is closed at the end."""
    _BOARDS.append(board)
    try:
        yield board
    finally:
        _BOARDS.remove(board)
        board.close()
