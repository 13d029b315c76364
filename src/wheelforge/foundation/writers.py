"""The one writer: every file wheelforge writes whole goes through here, and the file it replaces
is never read.

A regular file (or one that does not exist yet) is written into a temporary file beside it and
renamed over it, so a reader sees the old file or the whole new one; a symlink to a regular
file is kept and the file it names is replaced. A target that is a stream is written straight
through, as ``-`` is: wheelforge's own stdout or stderr under another name (``/dev/stdout``,
``/dev/fd/1``, ``/proc/self/fd/1``: written to that descriptor, never renamed over, which as root
would replace the ``/dev/stdout`` symlink with a regular file), a terminal, a FIFO that someone
reads, ``/dev/null``. Anything else is refused by name: a folder, a device (``/dev/full``), a
FIFO nobody reads (it would block forever), a socket, a file of the kernel (``/proc/version``).

``open_output`` decides all this before any work, so ``--report`` on a bad target fails before
the build rather than after it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.foundation.readers import kind_of

# How long a stream that stopped reading (a FIFO's reader, a paused terminal) may stall a write.
STALL_S = 60.0
# Folders whose files belong to the kernel: never created, renamed or replaced there.
_KERNEL = ("/proc/", "/sys/")

Target = Literal["file", "stream", "fd1", "fd2"]


class TargetRefused(ConfigError):
    """A file wheelforge was asked to write is not one it can replace (exit 2)."""


class ReadByTheBuild(TargetRefused):
    """A file wheelforge was asked to write is one the build reads (exit 2): nothing is written
    to it, not even the report of the failure."""


def _same_file(st: os.stat_result, fd: int) -> bool:
    try:
        mine = os.fstat(fd)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


def _is_devnull(st: os.stat_result) -> bool:
    try:
        null = Path(os.devnull).stat()
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def classify(path: Path, *, what: str) -> Target:
    """How *path* is written ("file": atomically replaced; "stream": written through; "fd1",
    "fd2": this process's stdout or stderr), or TargetRefused naming *what* (``--report PATH``)."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # not there: the folder check says more
        st = None
    except OSError as exc:
        raise TargetRefused(f"{what}: cannot be examined: {exc.strerror}") from None
    if st is not None:
        for fd, name in ((1, "fd1"), (2, "fd2")):
            if _same_file(st, fd):
                return name  # type: ignore[return-value]
        if stat.S_ISFIFO(st.st_mode) or _is_devnull(st):
            return "stream"
        if stat.S_ISCHR(st.st_mode) and _is_terminal(path):
            return "stream"
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise TargetRefused(
                f"{what} is {kind}, not a regular file; name a file to write, or '-' for stdout"
            )
    real = os.path.realpath(path)
    if real.startswith(_KERNEL) or real in ("/proc", "/sys"):
        raise TargetRefused(
            f"{what} is a file of the kernel ({real}), not one wheelforge may replace; name a "
            "file to write"
        )
    return "file"


def _is_terminal(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


@dataclass
class Output:
    """A file a user named for wheelforge to write (``--report PATH``), checked when opened;
    a FIFO is held open from then on, so its reader sees no end before the output."""

    path: Path
    what: str
    target: Target
    fd: int | None = None

    def write(self, data: str | bytes) -> Path | None:
        """Write *data* (once); returns the file written, None for a stream. Never reads it."""
        blob = data.encode() if isinstance(data, str) else data
        if self.target in ("fd1", "fd2"):
            (sys.stdout if self.target == "fd1" else sys.stderr).flush()
            _write_all(int(self.target[2]), blob, self.what)
            return None
        if self.fd is not None:
            try:
                _write_all(self.fd, blob, self.what)
            finally:
                self.close()
            return None
        real = Path(os.path.realpath(self.path))
        try:
            write_atomic(real, blob)
        except OSError as exc:
            raise EnvironmentProblem(f"{self.what}: cannot write it: {exc.strerror}") from None
        return real

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def open_output(path: Path, *, what: str, reads: Sequence[Path] = ()) -> Output:
    """Check *path* now, before any work, for what Output.write will do at the end: refuse its
    kind, a folder where no temporary file can be made, a FIFO nobody reads (opened now), and
    any of the files the command *reads* (its matrix), however spelled: ``./matrix.yaml``, a
    symlink or a hard link to it (``--report matrix.yaml`` replaced the matrix by the report)."""
    _refuse_input(path, what, reads)
    target = classify(path, what=what)
    if target == "stream":
        return Output(path=path, what=what, target=target, fd=_open_stream(path, what))
    if target == "file":
        folder = Path(os.path.realpath(path)).parent
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".wheelforge-probe-")
        except OSError as exc:
            raise EnvironmentProblem(f"{what}: cannot write there: {exc.strerror}") from None
        os.close(fd)
        Path(tmp).unlink()
    return Output(path=path, what=what, target=target)


def _refuse_input(path: Path, what: str, reads: Sequence[Path]) -> None:
    """TargetRefused when *path* is one of the files *reads* (the same file: device and inode,
    so every spelling and link of it), or a symlink that a write would turn into one."""
    try:
        mine = path.stat()
    except OSError:
        mine = None
    real = Path(os.path.realpath(path))
    for read in reads:
        try:
            theirs = read.stat()
        except OSError:
            continue
        same = mine is not None and (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
        if same or real == Path(os.path.realpath(read)):
            raise TargetRefused(
                f"{what}: that is {read}, which this command reads; the report would replace "
                "it: name another file (build-report.json)"
            )


def write_output(path: Path, data: str | bytes, *, what: str) -> Path | None:
    """Write *data* to *path*, a file a user named, checked as open_output checks it."""
    return open_output(path, what=what).write(data)


def _open_stream(path: Path, what: str) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader: opening it blocking would hang
            raise TargetRefused(
                f"{what} is a FIFO (named pipe) that nobody reads; start its reader first, or "
                "name a file"
            ) from None
        raise EnvironmentProblem(f"{what}: cannot write it: {exc.strerror}") from None


def _write_all(fd: int, blob: bytes, what: str) -> None:
    """All of *blob* to *fd*, waiting at most STALL_S for a stream that stopped reading."""
    view = memoryview(blob)
    deadline = time.monotonic() + STALL_S
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise EnvironmentProblem(
                    f"{what}: its reader stopped reading for {STALL_S:.0f} s; the output is "
                    "incomplete"
                ) from None
            continue
        except OSError as exc:
            raise EnvironmentProblem(f"{what}: cannot write it: {exc.strerror}") from None
        view = view[written:]
        deadline = time.monotonic() + STALL_S


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace the file *path* (in a folder wheelforge writes: its build folder, its cache, the
    output) by *data*, atomically; *mode* defaults to the usual one under the umask. Never
    reads *path*; a target that is not a regular file is refused (TargetRefused)."""
    blob = data.encode() if isinstance(data, str) else data
    with contextlib.suppress(FileNotFoundError):
        kind = kind_of(path.stat().st_mode)
        if kind is not None:
            raise TargetRefused(f"{path} is {kind}, not a regular file; remove it")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=part_prefix(path.name), suffix=PART)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(blob)
        Path(tmp).chmod(mode if mode is not None else 0o666 & ~_umask())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise


PART = ".part"  # a file being written: .<name>.<pid>-<random>.part beside its target


def part_prefix(name: str) -> str:
    """The start of the temporary name of a file *name* being written by this process; the pid
    in it lets a later run tell a leftover of a killed process (removal.sweep) from a write in
    progress."""
    return f".{name}.{os.getpid()}-"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_if_changed(path: Path, text: str) -> bool:
    """Write *text* atomically unless the file already holds it (keeps mtimes, so ninja sees
    nothing new): the one writer that reads its target, a file of wheelforge's own folders,
    through the bounded reader (anything unreadable is replaced). Returns whether it wrote."""
    try:
        if readers.read_text(path, cap=readers.STATE_CAP) == text:
            return False
    except (FileNotFoundError, readers.FileRefused):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return True


def publish(src: Path, dest_dir: Path) -> Path:
    """Copy *src* into *dest_dir* atomically (readers see the old file or the whole new one,
    never a partial one, even across filesystems), under the usual mode."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    return copy(src, dest_dir / src.name)


def copy(src: Path, dest: Path) -> Path:
    """Copy the regular file *src* (read through readers.open_regular) to *dest*, atomically."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=part_prefix(dest.name), suffix=PART)
    try:
        with os.fdopen(fd, "wb") as out, readers.open_regular(src) as source:
            shutil.copyfileobj(source, out, 1 << 20)
        Path(tmp).chmod(0o666 & ~_umask())
        Path(tmp).replace(dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise
    return dest


def append_text(path: Path, text: str, *, what: str) -> None:
    """Append *text* to the file *path* (a log another tool owns: GitHub's step summary), or
    write it through when *path* is a stream; anything else is refused."""
    target = classify(path, what=what)
    if target != "file":
        write_output(path, text, what=what)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise EnvironmentProblem(f"{what}: cannot write it: {exc.strerror}") from None
    try:
        _write_all(fd, text.encode(), what)
    finally:
        os.close(fd)


def probe(folder: Path, size: int) -> None:
    """Write *size* bytes into a new file in *folder*, synced, and remove it: OSError when the
    folder cannot take them (EACCES, EROFS, ENOSPC, a quota), nothing left behind either way."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".wheelforge-probe-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()


def unwritable(exc: OSError, folder: Path, what: str) -> EnvironmentProblem:
    """The one line for *what* (``cache prune``) failing to write in the cache *folder*: the
    file it could not change, why, and the fix (a read-only or full file system, no permission:
    issue 39, where EROFS was a traceback)."""
    where = exc.filename or folder
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        fix = "free space there"
    else:
        fix = "make it writable (remount it read-write, or fix its permissions)"
    return EnvironmentProblem(
        f"{what}: cannot write in the cache {folder}: {where}: {why}; {fix}, or give --cache-dir "
        "a folder you can write"
    )


def require_writable(folder: Path, what: str, *, cache: Path) -> None:
    """Create *folder* (in the cache *cache*) and write a probe file there, before any work:
    a cache that cannot be written is one line (unwritable) rather than a traceback halfway."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe(folder, 1)
    except OSError as exc:
        raise unwritable(exc, cache, what) from None
