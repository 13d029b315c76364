"""The one bounded reader: every file wheelforge reads whole (matrix.yaml, pyproject.toml, setup.py
and the sources `init` scans, headers, its own stamps and cache entries) is read here.

Only a regular file is read, and only up to a cap. A FIFO would block forever, ``/dev/zero`` or
``/dev/urandom`` never end (a ``MemoryError`` after gigabytes), a directory or a socket is no
text: each is refused by name, from ``stat`` before anything is opened, and again from
``fstat`` on what was opened (``O_NONBLOCK``: opening a FIFO that appeared meanwhile does not
wait for a writer). A file larger than its cap is refused before it is read, and one that grows
while it is read is cut at the cap and refused. Files of the kernel (``/proc/version``) say
they are empty and are read like any other, within the cap.

Every refusal is one line naming the file and what to do (FileRefused, a ConfigError: exit 2);
a missing file is FileNotFoundError, which each caller words for itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from wheelforge.foundation.errors import ConfigError

KiB, MiB = 1 << 10, 1 << 20
# What a file of each kind may weigh. Generous: a 300,000-arch-set matrix is 8 MB.
CONFIG_CAP = 16 * MiB  # matrix.yaml, pyproject.toml, setup.py, sources scanned by `init`
HEADER_CAP = 16 * MiB  # C/C++ headers scanned (crt/host_config.h, torch's stable headers)
STATE_CAP = 64 * MiB  # wheelforge's own stamps and cache entries
PACKED_CAP = 4 << 30  # a file packed into a wheel or an sdist (the largest CUDA libraries: ~1 GiB)
_CHUNK = 1 * MiB

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(ConfigError):
    """A file wheelforge would read is not one it can read: not a regular file, too large,
    unreadable or not text (exit 2)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path} could not be read: {problem}")
        self.path = str(path)
        self.problem = problem


def kind_of(mode: int) -> str | None:
    """What a file of *mode* is when it is not a regular file ("a FIFO (named pipe)"), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"


def _refuse_kind(mode: int, display: str) -> None:
    kind = kind_of(mode)
    if kind is not None:
        raise FileRefused(display, f"it is {kind}, not a regular file; name a file")


def _open(path: Path, shown: str) -> int:
    """A descriptor of the regular file *path*, opened without waiting (a FIFO never blocks)."""
    try:
        _refuse_kind(path.stat().st_mode, shown)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        raise FileRefused(shown, str(exc.strerror)) from None
    try:
        _refuse_kind(os.fstat(fd).st_mode, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_regular(path: Path, *, display: str | None = None) -> Iterator[BinaryIO]:
    """The regular file *path* open for reading in blocks (a wheel hashed, a toolkit archive):
    what is not a regular file is refused as read_bytes refuses it."""
    fd = _open(path, display or str(path))
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as file:
        yield file


def read_bytes(path: Path, *, cap: int, display: str | None = None) -> bytes:
    """The bytes of the regular file *path* (symlinks followed), at most *cap* of them.
    *display* names it in errors (default: the path)."""
    shown = display or str(path)
    fd = _open(path, shown)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise FileRefused(shown, f"it is {_size(size)}, above the cap of {_size(cap)} for it")
        return _read_capped(fd, cap, shown)
    finally:
        os.close(fd)


def _read_capped(fd: int, cap: int, shown: str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
        except OSError as exc:
            raise FileRefused(shown, str(exc.strerror)) from None
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > cap:
            raise FileRefused(shown, f"it holds more than the cap of {_size(cap)} for it")


def read_text(path: Path, *, cap: int, display: str | None = None, errors: str = "strict") -> str:
    """The UTF-8 text of the regular file *path*, within *cap* bytes. With ``errors="strict"``
    bytes that are not UTF-8 are refused, naming where they are."""
    data = read_bytes(path, cap=cap, display=display)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileRefused(
            display or str(path),
            f"it is not UTF-8 text (byte {data[exc.start]:#04x} on line {line}); save it as UTF-8",
        ) from None
