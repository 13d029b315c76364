"""Inter-process locks (filelock, over flock(2), so a lock dies with the process that held it,
SIGKILL included: no stale lock files to clean up). One build per build folder, one writer per
cached test environment and per provisioned toolkit; a cache entry is pruned only while its
lock is free."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from wheelforge.foundation import log
from wheelforge.foundation.errors import EnvironmentProblem

LOCK_NAME = ".wheelforge.lock"


@contextmanager
def hold(path: Path, *, what: str, wait: bool = True) -> Iterator[None]:
    """Hold the lock file *path* for *what* (a phrase: "the build folder /x"). When another
    process holds it: wait, saying so once, or with ``wait=False`` fail at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        _acquire(lock, path, what, timeout=0)
    except Timeout:
        if not wait:
            raise EnvironmentProblem(
                f"{what} is in use by another wheelforge (lock {path}); let it finish, or drop "
                "--no-wait to wait for it"
            ) from None
        log.info(f"waiting for another wheelforge that is using {what} (lock {path})")
        # Polls with sleep: SIGINT and SIGTERM still end the wait.
        _acquire(lock, path, what, timeout=-1)
    try:
        yield
    finally:
        lock.release()


def _acquire(lock: FileLock, path: Path, what: str, *, timeout: float) -> None:
    """Take *lock*; a lock file that cannot be one (a symlink, which filelock refuses with
    ELOOP; a folder; no permission) is an EnvironmentProblem naming it, not a traceback."""
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise
    except OSError as exc:
        raise _unusable(path, what, exc) from None


def _unusable(path: Path, what: str, exc: OSError) -> EnvironmentProblem:
    kind = "a symbolic link" if path.is_symlink() else exc.strerror
    return EnvironmentProblem(
        f"the lock {path} of {what} cannot be taken ({kind}); remove it, wheelforge makes it again"
    )


@contextmanager
def attempt(path: Path) -> Iterator[bool]:
    """Hold the lock file *path* if it is free now, never waiting: yields whether it was taken
    (``wheelforge cache prune`` skips an entry another wheelforge holds)."""
    lock = FileLock(path)
    try:
        _acquire(lock, path, "a cache entry", timeout=0)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextmanager
def share(path: Path, *, what: str) -> Iterator[None]:
    """Hold the lock file *path* shared, as one of the users of *what* rather than its writer:
    any number of sharers at once, while hold() and attempt() (exclusive, the creator and
    `cache prune`) wait or give up. flock(2) itself: filelock has no shared mode (its
    ReadWriteLock is SQLite's, which flock's holders would not see)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # O_NOFOLLOW: a symlink there must not create or lock a file elsewhere
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise _unusable(path, what, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"waiting for another wheelforge that is changing {what} (lock {path})")
            fcntl.flock(fd, fcntl.LOCK_SH)  # a signal still ends the wait (PEP 475)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


@contextmanager
def hold_folder(folder: Path, *, what: str) -> Iterator[None]:
    """Hold *folder* itself exclusively (flock(2) on the folder's own descriptor: no lock file
    is left in it, so an output folder holds only wheels), waiting for another holder, saying
    so once. Two builds publishing into one ``--out`` from different build folders check and
    publish one after the other."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise EnvironmentProblem(f"{what} cannot be locked: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"waiting for another wheelforge that is publishing into {what}")
            fcntl.flock(fd, fcntl.LOCK_EX)  # a signal still ends the wait (PEP 475)
        yield
    finally:
        os.close(fd)
