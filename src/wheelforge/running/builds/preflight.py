"""Checks of the folders a build writes, before anything is compiled: each is created and
written to, so a folder that can't be (EACCES, a read-only or full file system, a path under
/proc) fails in one line naming it, not after the compile with a traceback. Output and build
folders inside a package folder that is packed into the wheel are refused: the next wheel
would carry the previous one, or the build's objects."""

from __future__ import annotations

import contextlib
import errno
import stat
from collections.abc import Iterator
from pathlib import Path

from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import fsutil, locks, readers, writers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem

# What the probe writes: enough to fail on a full file system rather than on its last block.
PROBE_BYTES = 1 << 20


def describe_os_error(exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        why += " (the file system is full; free space or choose another folder)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why += " (choose a folder you can write to)"
    return why


def probe_folder(path: Path, flag: str) -> None:
    """Create *path* and write a probe file into it; any failure names *flag* and the path."""
    with contextlib.suppress(OSError):  # what is there, links followed: a folder, or refused
        mode = path.stat().st_mode
        if not stat.S_ISDIR(mode):
            kind = readers.kind_of(mode) or "a file"
            raise EnvironmentProblem(f"{flag} {path} is {kind}, not a folder; name a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        writers.probe(path, PROBE_BYTES)
    except OSError as exc:
        where = Path(exc.filename) if exc.filename else path
        raise EnvironmentProblem(
            f"{flag} {path}: cannot write there: {where}: {describe_os_error(exc)}"
        ) from None


def refuse_packed(matrix: Matrix, folders: dict[str, Path]) -> None:
    """Refuse output and build folders inside a package folder that goes into the wheel."""
    for flag, folder in folders.items():
        for package in matrix.package.packages:
            if fsutil.resolved(folder).is_relative_to(fsutil.resolved(package)):
                raise ConfigError(
                    f"{flag} {folder} lies inside the package folder {package}, which is packed "
                    "into the wheel, so the next wheel would carry this folder's files; choose a "
                    "folder outside it"
                )


# Which folders may not lie in which: (inner, outer). The output folder holds wheels only (a
# build folder's files in it would be uploaded with them; a build folder's cleaning or a cache
# prune would reach the wheels); the cache is wheelforge's own, never a build's output.
_APART = (
    ("--out", "--build-dir"),
    ("--build-dir", "--out"),
    ("--out", "--cache-dir"),
    ("--cache-dir", "--out"),
    ("--build-dir", "--cache-dir"),
)


def refuse_nested(folders: dict[str, Path]) -> None:
    """Refuse an output, build or cache folder that is another of them or lies inside one,
    and an output or build folder inside another build's folder (one holding its lock)."""
    real = {flag: fsutil.resolved(folder) for flag, folder in folders.items()}
    for inner, outer in _APART:
        if inner in real and outer in real and real[inner].is_relative_to(real[outer]):
            same = "is" if real[inner] == real[outer] else "lies inside"
            raise ConfigError(
                f"{inner} {folders[inner]} {same} {outer} {folders[outer]}; give each its own "
                "folder, neither inside the other"
            )
    for flag in ("--out", "--build-dir"):
        if flag not in real:
            continue
        other = next((p for p in real[flag].parents if (p / locks.LOCK_NAME).is_file()), None)
        if other is not None and other != real.get("--build-dir"):
            raise ConfigError(
                f"{flag} {folders[flag]} lies inside {other}, another build's folder (it holds "
                f"{locks.LOCK_NAME}); choose a folder outside it"
            )


def preflight(matrix: Matrix, folders: dict[str, Path]) -> None:
    """*folders*: flag (``--out``) → folder. Refuse nested and packed ones, then probe each."""
    refuse_nested(folders)
    refuse_packed(matrix, folders)
    for flag, folder in folders.items():
        probe_folder(folder, flag)


@contextlib.contextmanager
def tidy(folders: dict[str, Path]) -> Iterator[None]:
    """Of *folders*, those the block creates (preflight, or a build) and leaves empty are removed
    when it ends, however it ends: a refused or failed build leaves no empty ``--out`` behind."""
    made = [top for top in map(fsutil.missing_top, folders.values()) if top is not None]
    try:
        yield
    finally:
        for top in made:
            fsutil.remove_if_empty(top)
