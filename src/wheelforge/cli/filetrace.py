"""What one run of wheelforge looked at on disk, for the quick no-op (cli/quicknoop.py):
every file it opened (to read or to write), every folder it listed, every path it asked
``os.stat``/``os.lstat`` about (present or absent), each with its stat when first seen; the
files it marked used (``os.utime``), the locks it took (``fcntl.flock``), whether it changed a
file or started a process; and what it wrote to stdout and stderr, chunk by chunk.

From Python's audit events (PEP 578: ``open``, ``os.listdir``, ``os.scandir``, ``os.utime``,
``fcntl.flock``, ``subprocess.Popen``, ...) and, since a stat raises none, from ``os.stat`` and
``os.lstat`` replaced while the trace lasts (``pathlib``, ``os.path`` and ``shutil.which`` call
them). Standard library only.
"""

# os.path, not pathlib: Path.resolve() and friends call os.stat and os.lstat, which this module
# replaces while it traces.
# ruff: noqa: PTH100, PTH115, PTH208

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

Stat = list[int] | None  # [kind, size, mtime_ns, inode]; None: absent
DIR = 0o04  # S_IFDIR >> 12
_os_stat = os.stat  # the real one: traced() replaces os.stat and os.lstat while it traces
# The audit events of calls that change a file or folder (besides open for writing).
_CHANGES = frozenset({"os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.chmod",
                      "os.truncate", "os.symlink", "os.link", "shutil.move",
                      "shutil.copyfile", "shutil.rmtree"})  # fmt: skip


def stat_of(path: str, *, follow: bool = True) -> Stat:
    try:
        st = _os_stat(path, follow_symlinks=follow)
    except (OSError, ValueError):
        return None
    return [st.st_mode >> 12, st.st_size, st.st_mtime_ns, st.st_ino]


def relaxed(seen: Stat) -> Stat:
    """A folder's stat without its size and mtime, which change with any entry made or
    removed in it (quicknoop.py says which folders are watched so)."""
    return [seen[0], 0, 0, seen[3]] if seen is not None else None


def listing(path: str) -> str | None:
    try:
        names = sorted(os.listdir(path))
    except (OSError, ValueError):
        return None
    return hashlib.sha256("\0".join(names).encode()).hexdigest()


class Tee:
    """A standard stream that also keeps what is written to it, for the record. What goes to
    its binary buffer instead is not kept, and the run is not recorded."""

    def __init__(self, stream: TextIO, number: int, trace: Trace) -> None:
        self._stream = stream
        self._number = number
        self._trace = trace

    def write(self, text: str) -> int:
        written = self._stream.write(text)  # click tries write(b"") first: that raises here
        if text:
            self._trace.screen.append((self._number, text))
        return written

    @property
    def buffer(self) -> Any:
        self._trace.spawned = True
        self._trace.why = "wrote bytes to a standard stream"
        return self._stream.buffer

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, flush, ...
        return getattr(self._stream, name)


class Trace:
    """What one full run looked at, from the audit events of ``open``, ``os.listdir``,
    ``os.scandir`` and ``fcntl.flock``, and from ``os.stat``/``os.lstat`` (which raise no
    event), and whether it wrote a file or started a process."""

    def __init__(self) -> None:
        self.stat: dict[str, list[Any]] = {}  # path → [follow, stat at first sight]
        self.read: dict[str, Stat] = {}
        self.listed: dict[str, str | None] = {}
        self.written: dict[str, Stat] = {}  # path → its stat before the run first wrote it
        self.touched: set[str] = set()  # os.utime: marked last used, content unchanged
        self.locks: set[str] = set()
        self.spawned = False
        self.why = ""  # what made the run unrecordable (an event's name), for tests
        self.screen: list[tuple[int, str]] = []

    def saw(self, path: object, *, follow: bool = True) -> None:
        if self.spawned:
            return  # a run that started a process is never recorded: nothing more to note
        name = _name(path)
        if name is not None and name not in self.stat:
            self.stat[name] = [follow, stat_of(name, follow=follow)]

    def event(self, event: str, args: tuple[Any, ...]) -> None:
        if self.spawned:
            return  # as in saw(): a cold build's thousands of events cost nothing more
        if event == "open":
            path, mode, flags = args
            name = _name(path)
            if name is None:
                return
            writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
            )
            if writes:
                self.written.setdefault(name, stat_of(name))
            elif name not in self.read:
                self.read[name] = stat_of(name)
        elif event in ("os.listdir", "os.scandir"):
            name = _name(args[0] if args and args[0] is not None else ".")
            if name is not None and name not in self.listed:
                self.listed[name] = listing(name)
        elif event == "os.utime":
            name = _name(args[0])
            if name is not None:
                self.touched.add(name)
        elif event == "fcntl.flock" and args[1] & (fcntl.LOCK_EX | fcntl.LOCK_SH):
            if (name := _name(args[0])) is not None:  # the descriptor's file
                self.locks.add(name)
        elif event in _CHANGES:
            name = _name(args[0]) if args else None
            if not (event == "os.mkdir" and name is not None and _isdir(name)):
                self.written.setdefault(name or "?", stat_of(name) if name else [-1])
        elif event.startswith(("subprocess.", "os.exec", "os.posix_spawn", "os.fork",
                               "os.system", "os.spawn", "pty.")):  # fmt: skip
            self.spawned = True
            self.why = event


def _isdir(name: str) -> bool:
    seen = stat_of(name)
    return seen is not None and seen[0] == DIR


def _name(path: object) -> str | None:
    if isinstance(path, int):
        # An open file, as filelock 3's os.fchmod of the lock file it opened: its path.
        try:
            name = os.readlink(f"/proc/self/fd/{path}")
        except OSError:
            return None
        return name if name.startswith("/") else None
    try:
        name = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
    except TypeError:
        return None
    return os.path.abspath(name)


_current: Trace | None = None  # the one trace of this process


_inside = threading.local()  # the hook's own listdir and stat raise events too


def _hook(event: str, args: tuple[Any, ...]) -> None:
    trace = _current
    if trace is not None and not getattr(_inside, "busy", False):
        _inside.busy = True
        try:
            trace.event(event, args)
        except Exception as exc:  # an odd event's arguments must never fail the run
            trace.spawned = True  # and the run is not recorded
            trace.why = f"{event}: {exc!r}"
        finally:
            _inside.busy = False


_hooked = False


def tracing() -> bool:
    return _current is not None


@contextlib.contextmanager
def traced() -> Iterator[Trace]:
    """Trace this process until the block ends (one trace at a time)."""
    global _current, _hooked  # noqa: PLW0603 - one trace per process, the CLI's
    trace = Trace()
    if not _hooked:
        sys.addaudithook(_hook)  # audit hooks cannot be removed: one, idle between traces
        _hooked = True
    real_lstat = os.lstat

    def traced_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        trace.saw(path, follow=kwargs.get("follow_symlinks", True))
        return _os_stat(path, *args, **kwargs)

    def traced_lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        trace.saw(path, follow=False)
        return real_lstat(path, *args, **kwargs)

    out, err = sys.stdout, sys.stderr
    sys.stdout = Tee(out, 1, trace)
    sys.stderr = Tee(err, 2, trace)
    os.stat, os.lstat = traced_stat, traced_lstat
    _current = trace
    try:
        yield trace
    finally:
        _current = None
        os.stat, os.lstat = _os_stat, real_lstat
        sys.stdout, sys.stderr = out, err
