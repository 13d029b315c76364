"""One GNU make jobserver shared by the ninjas of variants built side by side
(build/together.py), so that however many run at once, at most ``jobs`` compiles run
in all.

ninja 1.13 is a jobserver client (src/jobserver-posix.cc, src/ninja.cc SetupJobserverClient):
it reads ``MAKEFLAGS``, and with ``--jobserver-auth=fifo:PATH`` runs its first job in the slot
its parent lent it (the implicit slot) and each further one only with a token, a byte it
reads from the FIFO and writes back when the job ends (also when it fails, or is interrupted:
build.cc, real_command_runner.cc ClearJobTokens). An explicit ``-j`` (or ``-n``) turns the
client off, so a ninja run here gets none. As GNU make does, this process owns one slot and
the FIFO holds ``jobs - 1`` tokens: while n ninjas run, this process holds n - 1 tokens for
their implicit slots (it takes one before starting a ninja beside others, and gives one back
when a ninja ends, so the ones still running can use it for their jobs).

The FIFO is made when the first ninja starts (a no-op build writes nothing) in a folder of its
own in the temporary folder, and removed with it. The folder is held (flock on its own
descriptor) while it is in use: one whose holder was killed (SIGKILL runs no cleanup) is removed
by the next build that compiles (sweep_once).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from wheelforge.foundation import log, removal

TOKEN = b"+"  # GNU make's; a client writes back the byte it read
PREFIX = "wheelforge-jobserver-"
_HELD_RE = re.compile(rf"^{PREFIX}[0-9]+-")  # held while in use: wheelforge-jobserver-<pid>-…
_OLD_AFTER_S = 24 * 3600  # a folder of before it was held: surely not in use after a day
_WAIT_S = 0.2  # between looks for a token, and at whether the build was stopped


class Jobserver:
    """The slots of *jobs* compiles at once, for at most *ninjas* ninjas at once (see the
    module notes)."""

    def __init__(self, jobs: int, *, ninjas: int | None = None) -> None:
        self.jobs = max(1, jobs)
        self.ninjas = max(1, min(ninjas or self.jobs, self.jobs))  # each needs a slot
        self._lock = threading.Lock()
        self._running = 0  # ninjas running in a slot of this jobserver
        self._held: list[bytes] = []  # tokens held for them: one fewer than they are
        self._folder: Path | None = None
        self._folder_fd: int | None = None  # flocked while the folder is in use
        self._fd: int | None = None

    @property
    def fifo(self) -> Path | None:
        return self._folder / "fifo" if self._folder is not None else None

    @property
    def held(self) -> int:
        """The tokens held for running ninjas' implicit slots (not in the FIFO)."""
        return len(self._held)

    def makeflags(self) -> str:
        """MAKEFLAGS for a ninja that runs in a slot of this jobserver (as GNU make 4.4 spells
        it); the FIFO is made now if it is not there yet."""
        self._open()
        return f" -j{self.jobs} --jobserver-auth=fifo:{self.fifo}"

    def _open(self) -> int:
        with self._lock:
            if self._fd is None:
                self._folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
                self._folder_fd = os.open(self._folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                fcntl.flock(self._folder_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new folder: free
                fifo = self._folder / "fifo"
                os.mkfifo(fifo, 0o600)
                # Read and write, so the FIFO never sees its last writer go (no EOF, no EPIPE).
                self._fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
                os.write(self._fd, TOKEN * (self.jobs - 1))
            return self._fd

    def take(self, stopped: Callable[[], None] = lambda: None) -> None:
        """A slot for one more ninja, waited for: the first runs in this process's own slot,
        each other one needs a token taken from the FIFO (and below *ninjas* running); *stopped*
        is asked between looks (it raises when the build stops)."""
        while True:
            stopped()
            with self._lock:
                if self._running == 0:
                    self._running = 1
                    return
                room = self._running < self.ninjas
            if room:
                fd = self._open()
                token = b""
                with contextlib.suppress(BlockingIOError):
                    token = os.read(fd, 1)
                if token:
                    with self._lock:
                        if self._running == 0:  # every ninja ended meanwhile: the own slot
                            os.write(fd, token)
                            self._running = 1
                            return
                        if self._running < self.ninjas:
                            self._held.append(token)
                            self._running += 1
                            return
                        os.write(fd, token)  # another took the room meanwhile
                    continue
                select.select([fd], [], [], _WAIT_S)
            else:
                time.sleep(_WAIT_S)

    def give(self) -> None:
        """A ninja ended: the token its slot no longer needs goes back to the FIFO, for the
        jobs of the ninjas still running (one fewer held than they are)."""
        with self._lock:
            self._running -= 1
            while len(self._held) > max(0, self._running - 1):
                assert self._fd is not None  # a token was held: the FIFO is there
                os.write(self._fd, self._held.pop())

    @contextlib.contextmanager
    def slot(self, stopped: Callable[[], None] = lambda: None) -> Iterator[None]:
        self.take(stopped)
        try:
            yield
        finally:
            self.give()

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._folder is not None:
                removal.remove(self._folder, within=self._folder.parent)
                self._folder = None
            if self._folder_fd is not None:
                os.close(self._folder_fd)
                self._folder_fd = None


def sweep(folder: Path | None = None, *, now: float | None = None) -> list[Path]:
    """Remove from the temporary *folder* the jobserver folders of builds that were killed:
    this user's, no longer held (the kernel drops a dead holder's flock), or of the time before
    they were held and older than a day. Returns what was removed."""
    folder = Path(tempfile.gettempdir()) if folder is None else folder
    now = time.time() if now is None else now
    removed = []
    with contextlib.suppress(OSError):
        for child in sorted(folder.glob(f"{PREFIX}*")):
            with contextlib.suppress(OSError, removal.RemovalRefused):
                st = child.lstat()
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                    continue
                if not _HELD_RE.match(child.name) and now - st.st_mtime < _OLD_AFTER_S:
                    continue
                fd = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: in use
                    if removal.remove(child, within=folder):
                        removed.append(child)
                finally:
                    os.close(fd)
    return removed


_swept = False


def sweep_once() -> None:
    """sweep(), once per process (the first ninja a build runs): -v names what it removed."""
    global _swept  # noqa: PLW0603 - once per process
    if _swept:
        return
    _swept = True
    for folder in sweep():
        log.detail(f"removed {folder}, the jobserver folder of a build that was killed")
