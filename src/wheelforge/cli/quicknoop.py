"""The quick no-op: a ``wheelforge build`` that the last identical run showed has nothing to do
is answered from a record of that run, before click, rich, PyYAML or any layer above this one
is imported (issue 33: a no-op was 80% imports).

The one owner of that decision. Standard library only, and of wheelforge's only its tracer
(cli/filetrace.py) and foundation/cachehome.py: the console script and ``python -m wheelforge``
ask :func:`replay` first (cli/entry.py).

What a record vouches for. A full run of ``build`` is *recorded* (:func:`recording`) when it
exited 0, started no process (no ninja, no probe, no import check) and wrote no file (only the
build folder's lock was taken): such a run decided "nothing to do" from the files it read and
the files it asked about, and its screen is a function of them. While it ran
(cli/filetrace.py), every file it opened, every folder it listed and every path it asked ``os.stat``/``os.lstat`` about
(present or absent: a toolkit appearing where discovery looked) was noted with its stat (size,
mtime_ns, inode; a folder's mtime changes when an entry is added or removed), and with it the
files of every module it imported (wheelforge's own, so an edit of an editable install counts,
and its dependencies'), each ``sys.path`` folder and each ``PATH`` folder. A path whose stat
changed while the run was reading leaves no record.

The record is found by a key of everything else the run was given: wheelforge's version, the
arguments, the working folder, the whole environment (every variable the settings chain, the
probes and rich read, and any other), the interpreter and its ``sys.path``, the user, and for
each standard stream whether it is a terminal and its size (rich's width and colours). The
record holds the screen as written, stdout and stderr chunk by chunk, and it is replayed
when every noted path still has its stat; a file the run only read whose stat changed is still
good when its sha256 is the recorded one (a checkout that rewrote matrix.yaml unchanged).
Anything else (no record, a changed path, a lock held by another wheelforge, a record that
cannot be read) is the full path, which decides as before and records again.

Not replayed, so always the full path: ``--report`` (its document has the run's time),
``-v``/``--verbose``, ``--help``, ``--dry-run``, ``--verify-reproducible`` and ``--cache-dir``
(the record lives in the default cache, which that flag replaces).
"""

# os.path, not pathlib: Path.resolve() and friends call os.stat and os.lstat, which this module
# replaces while it traces a run (cli/filetrace.py), and the quick path makes no Path
# object per watched file.
# ruff: noqa: PTH100, PTH109, PTH120

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from wheelforge import __version__
from wheelforge.cli import filetrace
from wheelforge.cli.filetrace import DIR, Trace, listing, relaxed, stat_of
from wheelforge.foundation.cachehome import RECORDS, default_cache

_FORMAT = 1
_KEPT = 64  # records kept, the newest (one per project, command, environment and terminal)
_CAP = 64 << 20  # a record larger than this is not read
_SHA_CAP = 4 << 20  # read files larger than this are vouched for by their stat alone
_NOT_REPLAYED = ("--report", "--verbose", "--help", "--dry-run", "--verify-reproducible",
                 "--cache-dir", "--version")  # fmt: skip
_NOT_REPLAYED_SHORT = frozenset("vh")  # -v, -vv, -h, and in a cluster (-qv)
# Variables only the shell keeps for itself, different between two identical commands.
_SHELL_ONLY = frozenset({"_", "OLDPWD"})

_PROCESS_OWN = ("/proc/self/", f"/proc/{os.getpid()}/", "/dev/fd/", "/proc/thread-self/")


def replayable(argv: Sequence[str]) -> bool:
    """Whether *argv* is a ``build`` whose screen a record may give."""
    if not argv or argv[0] != "build":
        return False
    for arg in argv[1:]:
        if arg == "--":
            return False
        if arg.startswith("--"):
            if arg.split("=", 1)[0] in _NOT_REPLAYED:
                return False
        elif arg.startswith("-") and len(arg) > 1 and _NOT_REPLAYED_SHORT & set(arg[1:]):
            return False
    return True


def _terminal(fd: int) -> list[int] | None:
    try:
        if not os.isatty(fd):
            return None
        size = os.get_terminal_size(fd)
    except OSError:
        return [0, 0]
    return [size.columns, size.lines]


def _key(argv: Sequence[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _SHELL_ONLY}
    given = {
        "format": _FORMAT,
        "wheelforge": __version__,
        "argv": list(argv),
        "cwd": os.getcwd(),
        "env": sorted(env.items()),
        "python": [sys.executable, sys.version, sys.path],
        "user": os.getuid(),
        "streams": [_terminal(fd) for fd in (0, 1, 2)],
    }
    return hashlib.sha256(json.dumps(given).encode()).hexdigest()[:32]


def _record_path(argv: Sequence[str]) -> Path:
    return default_cache() / RECORDS / f"{_key(argv)}.json"


def _read_regular(path: str, cap: int | None) -> Iterator[bytes]:
    """The blocks of the regular file *path* (None: not one, or over *cap* bytes): a FIFO or
    a device is refused from fstat, never waited on. readers.py is the project's reader; this
    module loads nothing of wheelforge's (its dataclasses pull in inspect)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (cap is not None and st.st_size > cap):
            raise OSError(f"{path}: not a regular file within {cap} bytes")
        while block := os.read(fd, 1 << 20):
            yield block
    finally:
        os.close(fd)


def _sha256(path: str) -> str | None:
    try:
        digest = hashlib.sha256()
        for block in _read_regular(path, None):
            digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


# ---- replaying ---------------------------------------------------------------------------


def replay(argv: Sequence[str]) -> bool:
    """Print the recorded screen of this very command, and say True, when the record still
    holds; False (nothing printed) sends the caller down the full path."""
    if not replayable(argv):
        return False
    try:
        record = json.loads(b"".join(_read_regular(str(_record_path(argv)), _CAP)))
        if not isinstance(record, dict) or record.get("format") != _FORMAT:
            return False
        screen = [(int(n), str(text)) for n, text in record["screen"]]
        with _locks([str(p) for p in record["locks"]]) as free:
            if not free or not _holds(record):
                return False
            _show(screen)
            for path in [
                *record["touched"],
                str(_record_path(argv)),
            ]:  # last used, as the full path marks them
                with contextlib.suppress(OSError):
                    os.utime(str(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


def _show(screen: Sequence[tuple[int, str]]) -> None:
    """The screen as the recorded run wrote it, stdout and stderr in their order. Once begun
    it is the answer: a closed pipe ends it as it would end the full path's."""
    with contextlib.suppress(OSError):
        for number, text in screen:
            out = sys.stdout if number == 1 else sys.stderr
            out.write(text)
            out.flush()


def _holds(record: dict[str, Any]) -> bool:
    """Whether every path the recorded run looked at still has its stat (a file it only read:
    or its sha256)."""
    for path, (follow, seen, loose) in record["stat"].items():
        now = stat_of(path, follow=bool(follow))
        if (relaxed(now) if loose else now) != seen:
            return False
    for path, (seen, sha) in record["read"].items():
        if stat_of(path) != seen and (sha is None or _sha256(path) != sha):
            return False
    return all(listing(path) == seen for path, seen in record["listed"].items())


@contextlib.contextmanager
def _locks(paths: Sequence[str]) -> Iterator[bool]:
    """Hold every lock the recorded run held (the build folder's lock file, the output folder)
    while the record is replayed: another wheelforge building there is the full path's to wait
    for, and what it changes is the next check's."""
    fds: list[int] = []
    free = True
    try:
        for path in paths:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # quick no-ops side by side
            except OSError:
                free = False
                break
        yield free
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the flock


# ---- recording ---------------------------------------------------------------------------


@contextlib.contextmanager
def recording(argv: Sequence[str]) -> Iterator[_Recording]:
    """Trace the full run of *argv* (a no-op for a command :func:`replayable` refuses); the
    caller says how it ended with ``done(exit_code)``, and a pure no-op is recorded then."""
    session = _Recording(argv)
    if not replayable(argv) or filetrace.tracing():
        yield session
        return
    with filetrace.traced() as session.trace:
        yield session
    try:
        session.save()
    except Exception:  # recording is never the run's failure: no record then
        from wheelforge.foundation import removal

        with contextlib.suppress(Exception):
            removal.remove(_record_path(argv), within=default_cache() / RECORDS)


class _Recording:
    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.trace: Trace | None = None
        self.exit_code: int | None = None

    def done(self, exit_code: int) -> None:
        self.exit_code = exit_code

    def save(self) -> None:
        """Write the record of a pure no-op (see the module's docstring); drop a stale one
        otherwise, so it is never replayed over a run that did something."""
        trace = self.trace
        if trace is None:
            return
        path = _record_path(self.argv)
        record = self._record(trace) if self.exit_code == 0 and not trace.spawned else None
        from wheelforge.foundation import removal, writers  # the full path has them loaded

        folder = default_cache() / RECORDS
        with contextlib.suppress(OSError, removal.RemovalRefused):
            if record is None:
                removal.remove(path, within=folder)
                return
            folder.mkdir(parents=True, exist_ok=True)
            writers.write_atomic(path, json.dumps(record))
            kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
            for old in kept[:-_KEPT]:
                removal.remove(old, within=folder)

    @staticmethod
    def _record(trace: Trace) -> dict[str, Any] | None:
        # A file made and removed (a writability probe) leaves nothing behind; the lock file
        # is taken by every run.
        transient = {n for n, before in trace.written.items() if before is None}
        written = {n for n, before in trace.written.items() if stat_of(n) != before}
        if written - trace.locks:
            trace.why = f"wrote {sorted(written - trace.locks)[0]}"
            return None
        skip = transient | (trace.locks & set(trace.written)) | trace.touched
        watched = {**trace.stat}
        for name in _code_and_path():
            watched.setdefault(name, [True, stat_of(name)])
        probed = {os.path.dirname(n) for n in transient}
        stat = {}
        for name, (follow, seen) in watched.items():
            if name in skip or name.startswith(_PROCESS_OWN):
                continue  # the next run's own, or marked used (its bytes are the fact)
            now = stat_of(name, follow=follow)
            # A folder the run made a file in and removed it (a writability probe), or one it
            # only lstat'ed (realpath's walk over a path's folders: is it a link?), is watched
            # without its size and mtime: another program's file in /tmp is none of its facts.
            loose = now is not None and now[0] == DIR and (name in probed or not follow)
            if (relaxed(now) != relaxed(seen)) if loose else (now != seen):
                trace.why = f"{name} changed while the run looked"
                return None
            stat[name] = [follow, relaxed(now) if loose else now, loose]
        read = {}
        for name, seen in trace.read.items():
            if name in stat or name in skip - trace.touched or name.startswith(_PROCESS_OWN):
                continue
            touched = name in trace.touched
            if stat_of(name) != seen and not touched:
                trace.why = f"{name} changed while the run read it"
                return None
            small = seen is not None and seen[1] <= _SHA_CAP and not name.endswith(".pyc")
            if touched and not small:
                trace.why = f"{name} is marked used and too large to hash"
                return None
            read[name] = [None if touched else seen, _sha256(name) if small else None]
        listed = {}
        for name, seen in trace.listed.items():
            if name.startswith(_PROCESS_OWN) or _within(name, transient):
                continue  # a folder the run made, walked and took away is its own
            if listing(name) != seen:
                trace.why = f"{name} changed while the run listed it"
                return None
            listed[name] = seen
        return {"format": _FORMAT, "stat": stat, "read": read, "listed": listed,
                "touched": sorted(trace.touched), "locks": sorted(trace.locks),
                "screen": trace.screen}  # fmt: skip


def _within(name: str, folders: set[str]) -> bool:
    """Whether *name* is one of *folders* or inside one."""
    return any(name == f or name.startswith(f + "/") for f in folders)


def _code_and_path() -> Iterator[str]:
    """The files of every module imported, each sys.path folder and each PATH folder."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            yield os.path.abspath(file)
    for folder in sys.path:
        yield os.path.abspath(folder or ".")
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        yield os.path.abspath(folder or ".")
