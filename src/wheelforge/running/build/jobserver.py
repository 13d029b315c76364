"""One GNU make jobserver shared by the ninjas of variants built side by side
(running/build/together.py), so that however many run at once, at most ``jobs`` compiles run
in all.

ninja 1.13 is a jobserver client (src/jobserver-posix.cc, src/ninja.cc SetupJobserverClient):
it reads ``MAKEFLAGS``, and with ``--jobserver-auth=fifo:PATH`` runs its first job in the slot
its parent lent it (the implicit slot) and each further one only with a token, a byte it
reads from the FIFO and writes back when the job ends (also when it fails, or is interrupted:
build.cc, real_command_runner.cc ClearJobTokens). An explicit ``-j`` (or ``-n``) turns the
client off, so a ninja run here gets none. As GNU make does, this process owns one slot and
the FIFO holds ``jobs - 1`` tokens: the first ninja runs in this process's slot, each other
ninja first takes a token here, which it holds for that ninja's implicit slot until it ends.

The FIFO is made when the first ninja starts (a no-op build writes nothing) in a folder of its
own in the temporary folder, and removed with it.
"""

from __future__ import annotations

import contextlib
import os
import select
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from wheelforge.foundation import removal

TOKEN = b"+"  # GNU make's; a client writes back the byte it read
_WAIT_S = 0.2  # between looks for a token, and at whether the build was stopped


class Jobserver:
    """The slots of *jobs* compiles at once (see the module notes)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._lock = threading.Lock()
        self._own_free = True  # this process's own slot, lent to the first ninja
        self._folder: Path | None = None
        self._fd: int | None = None

    @property
    def fifo(self) -> Path | None:
        return self._folder / "fifo" if self._folder is not None else None

    def makeflags(self) -> str:
        """MAKEFLAGS for a ninja that runs in a slot of this jobserver (as GNU make 4.4 spells
        it); the FIFO is made now if it is not there yet."""
        self._open()
        return f" -j{self.jobs} --jobserver-auth=fifo:{self.fifo}"

    def _open(self) -> int:
        with self._lock:
            if self._fd is None:
                self._folder = Path(tempfile.mkdtemp(prefix="wheelforge-jobserver-"))
                fifo = self._folder / "fifo"
                os.mkfifo(fifo, 0o600)
                # Read and write, so the FIFO never sees its last writer go (no EOF, no EPIPE).
                self._fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
                os.write(self._fd, TOKEN * (self.jobs - 1))
            return self._fd

    def take(self, stopped: Callable[[], None] = lambda: None) -> bytes | None:
        """A slot for one ninja: this process's own (None) when free, else a token from the
        FIFO, waited for; *stopped* is asked between looks (it raises when the build stops)."""
        with self._lock:
            if self._own_free:
                self._own_free = False
                return None
        fd = self._open()
        while True:
            stopped()
            with contextlib.suppress(BlockingIOError):
                if token := os.read(fd, 1):
                    return token
            select.select([fd], [], [], _WAIT_S)

    def give(self, token: bytes | None) -> None:
        """The slot take() gave back."""
        if token is None:
            with self._lock:
                self._own_free = True
            return
        os.write(self._open(), token)

    @contextlib.contextmanager
    def slot(self, stopped: Callable[[], None] = lambda: None) -> Iterator[None]:
        token = self.take(stopped)
        try:
            yield
        finally:
            self.give(token)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._folder is not None:
                removal.remove(self._folder, within=self._folder.parent)
                self._folder = None
