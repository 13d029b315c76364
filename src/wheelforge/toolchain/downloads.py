"""The downloads a person waits for: pip installing torch into an environment (about 5 GB for a
CUDA build), pip or apt-get fetching a toolkit (about 1 GB).

pip's own progress bars need a terminal on pip's stdout, which would leave wheelforge without
its lines (and a CI log without a bar at all). So pip's output is read as lines, and the bytes
come from the file pip is downloading into: pip runs with a temporary folder of wheelforge's
own (TMPDIR), where its download grows. At a terminal that is one live bar per download (rich's:
bytes, rate, time left) and a line per finished file; elsewhere (CI, a file) a line per
finished file with its size and rate (pip's own words) and, for a long one, a line every half
minute. With --quiet nothing is shown. apt-get's lines pass through (``Get:1 ... [1,234 kB]``,
``Fetched 1,234 MB in 30s (41 MB/s)``)."""

from __future__ import annotations

import contextlib
import re
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge.foundation import log, proc, removal
from wheelforge.foundation.errors import ToolError
from wheelforge.foundation.progress import clock, shorten

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

_DOWNLOADING = re.compile(r"^\s*Downloading (\S+) \(([\d.]+) (k|M|G)?B\)")
_CACHED = re.compile(r"^\s*Using cached (\S+) \(([\d.]+) (k|M|G)?B\)")
# pip's finished bar, printed once where its stdout is not a terminal: "━━━ 40.7/40.7 MB 68.7 MB/s"
_FINISHED = re.compile(r"━+\s+(\S+/\S+ \S?B)\s+(\S+ \S?B/s)")
_INSTALLING = re.compile(r"^Installing collected packages: (.*)$")
_APT_SHOWN = re.compile(r"^(Get:\d+ |Fetched |Hit:\d+ |Err:\d+ )")
_UNITS = {None: 1, "k": 1000, "M": 1000**2, "G": 1000**3}  # pip writes SI units
TICK_S = 0.5
INSTALL_TICK_S = 2.0
REPORT_EVERY_S = 30.0


def _size(number: str, unit: str | None) -> int:
    return int(float(number) * _UNITS[unit])


def si(n: float) -> str:
    """Bytes in pip's (and rich's download column's) decimal units: ``900.1 MB``."""
    for unit in ("B", "kB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def label(filename: str) -> str:
    """A wheel's distribution and version (``nvidia_cuda_nvcc 13.1.115``): its tags make a
    line fold at 80 columns and say nothing a person waits for; any other file as it is."""
    if filename.endswith(".whl") and filename.count("-") >= 4:
        name, version = filename.split("-")[:2]
        return f"{name} {version}"
    return filename


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


class PipProgress:
    """pip's lines → what it downloads and how fast, then what it installs (module docstring).
    *folder* is pip's TMPDIR, where each download grows; *target*, where it installs."""

    def __init__(self, folder: Path, target: Path | None = None) -> None:
        self.folder = folder
        self.target = target
        self.live = None if log.quiet() or not log.live_display() else self._live()
        self.task: TaskID | None = None
        self.name = ""  # what is under way: a file being downloaded, the install
        self.watched = folder  # the folder whose growth is its bytes
        self.total: int | None = 0
        self.base = 0
        self.started = 0.0
        self.reported = 0.0
        self.measured = 0.0
        self.packages = 0
        self.lock = threading.Lock()

    def _live(self) -> Progress:
        from rich.progress import (  # only a live display at a terminal needs them
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        progress = Progress(
            TextColumn("    {task.description}"),
            BarColumn(bar_width=None),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=log.console,
            transient=True,
        )
        progress.start()
        return progress

    def _say(self, text: str) -> None:
        if not log.quiet():
            console = self.live.console if self.live is not None else log.console
            console.print(f"    {text}", markup=False, highlight=False, soft_wrap=True)

    def line(self, text: str) -> None:
        with self.lock:
            if m := _DOWNLOADING.match(text):
                self._start(label(m[1]), self.folder, _size(m[2], m[3]))
            elif m := _CACHED.match(text):
                self._say(f"cached {label(m[1])} ({m[2]} {m[3] or ''}B)")
            elif (m := _FINISHED.search(text)) and self.name and self.watched == self.folder:
                self._finish(f"downloaded {self.name}: {m[1]} at {m[2]}")
            elif m := _INSTALLING.match(text):
                self.packages = len(m[1].split(", "))
                if self.target is None:
                    self._finish(None)
                    self._say(f"installing {self.packages} packages")
                else:
                    self._start(f"installing {self.packages} packages", self.target, None)
            elif text.startswith("Successfully installed"):
                said = f"installed {self.packages} packages"
                if self.target is not None and self.watched == self.target and self.name:
                    took = clock(time.monotonic() - self.started)
                    said += f": {si(self._bytes())} in {took}"
                self._finish(said)

    def _bytes(self) -> int:
        return max(0, _folder_bytes(self.watched) - self.base)

    def _start(self, name: str, watched: Path, total: int | None) -> None:
        self._finish(None)
        self.name, self.watched, self.total = name, watched, total
        self.base = _folder_bytes(watched)
        self.started = self.reported = self.measured = time.monotonic()
        if self.live is not None:
            self.task = self.live.add_task(shorten(self.name, 32), total=total)

    def _finish(self, said: str | None) -> None:
        if self.live is not None and self.task is not None:
            self.live.remove_task(self.task)
        self.task = None
        if said:
            self._say(said)
        self.name = ""

    def tick(self) -> None:
        """Bytes in the watched folder: the download (or the install) growing."""
        with self.lock:
            now = time.monotonic()
            # An install writes thousands of files: its folder is walked every few seconds.
            every = TICK_S if self.watched == self.folder else INSTALL_TICK_S
            if not self.name or now - self.measured < every:
                return
            self.measured = now
            done = self._bytes()
            if self.live is not None and self.task is not None:
                top = self.total if self.total is not None else done
                self.live.update(self.task, completed=min(done, top))
                return
            if now - self.reported >= REPORT_EVERY_S:
                self.reported = now
                rate = done / max(0.001, now - self.started)
                of = f" of {si(self.total)}" if self.total is not None else " written"
                self._say(
                    f"… {self.name}: {si(done)}{of} in {clock(now - self.started)} ({si(rate)}/s)"
                )

    def close(self) -> None:
        with self.lock:
            self._finish(None)
            if self.live is not None:
                self.live.stop()


@contextlib.contextmanager
def _ticking(tick: Callable[[], None]) -> Iterator[None]:
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(TICK_S):
            tick()

    thread = threading.Thread(target=run, name="wheelforge-download", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def pip(
    args: Sequence[str | Path], *, what: str, hint: str, target: Path | None = None
) -> proc.Result:
    """Run pip (its command line in *args*, from the interpreter on) with its downloads shown,
    and its install into *target*; a ToolError with the tail of its output when it fails."""
    if log.quiet():
        return proc.run([*args, "--quiet"], hint=hint, what=what, timeout=proc.DOWNLOAD_S)
    folder = Path(tempfile.mkdtemp(prefix="wheelforge-pip-"))
    progress = PipProgress(folder, target)
    try:
        with _ticking(progress.tick):
            result = proc.stream(
                [*args, "--progress-bar", "on"],
                hint=hint,
                on_line=progress.line,
                env={"TMPDIR": str(folder)},
                timeout=proc.DOWNLOAD_S,
            )
    finally:
        progress.close()
        removal.remove(folder, within=folder.parent)
    return _checked(result, what)


def apt_get(args: Sequence[str | Path], *, what: str, cwd: Path | None = None) -> proc.Result:
    """Run apt-get with its lines of what it fetched (and the total's rate) passed through."""
    if log.quiet():
        return proc.run([*args, "-q"], hint="apt-get", what=what, cwd=cwd, timeout=proc.DOWNLOAD_S)

    def on_line(line: str) -> None:
        if _APT_SHOWN.match(line):
            log.console.print(f"    {line.strip()}", markup=False, highlight=False, soft_wrap=True)

    streamed = proc.stream(args, hint="apt-get", on_line=on_line, cwd=cwd, timeout=proc.DOWNLOAD_S)
    return _checked(streamed, what)


def _checked(result: proc.Result, what: str) -> proc.Result:
    if result.returncode != 0:
        raise ToolError(
            f"{what} failed with exit code {result.returncode}: {shlex.join(result.args)}",
            details=proc.tail(result.stdout) if result.stdout.strip() else None,
        )
    return result
