"""The one deletion guard: everything wheelforge deletes is deleted here, and only inside a folder
wheelforge owns (its cache, a build folder, the output folder, a temporary folder it made).

The check is made on the resolved path, after following links: the folder holding what is
removed must resolve to a place inside the owner's resolved folder, so a symlink on the way
(``<cache>/envs -> elsewhere/``, ``probes/<kind> -> /home/me``) can never turn a removal into one
outside. What is removed is never followed: a symlink is unlinked itself, a folder is removed by
``shutil.rmtree``, which does not descend into symlinks inside it.

``sweep`` removes what killed runs leave: temporary files (``.<name>.<pid>-<random>.part``,
writers.py) and staging folders (``stage-<pid>-<random>``) whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from pathlib import Path

from wheelforge.foundation.errors import EnvironmentProblem

# A leftover whose process is still alive is left alone unless it is older than this (a pid
# reused by another process).
STALE_AFTER_S = 86400
# .<name>.<pid>-<random>.part (writers.part_prefix) and stage-<pid>-<random> (a variant's
# staging folder, build/variant.py); the names before the pid was in them are matched too.
_LEFTOVER_RES = (
    re.compile(r"^\..+\.(?P<pid>[0-9]+)-[^.]+\.part$"),
    re.compile(r"^stage-(?P<pid>[0-9]+)-[^.]+$"),
    re.compile(r"^(?:\..+\.[^.]+\.part|stage-[^.]+)$"),  # no pid: old names
)


class RemovalRefused(EnvironmentProblem):
    """A removal would reach outside the folder wheelforge owns (exit 5)."""


def _inside(real: str, owner: str) -> bool:
    return real == owner or real.startswith(owner.rstrip("/") + "/")


def confined(path: Path, *, within: Path) -> bool:
    """Whether removing *path* stays inside *within*: the folder holding *path*, with every
    link on the way followed, lies in *within* resolved, and *path* is not *within* itself."""
    if path.name in ("", ".", ".."):
        return False
    owner = os.path.realpath(within)
    holder = os.path.realpath(path.parent)
    return _inside(holder, owner) and str(Path(holder, path.name)) != owner


def remove(path: Path, *, within: Path) -> bool:
    """Remove *path* (a file, a symlink itself, or a folder and all in it) if it is confined to
    *within*; returns whether something was removed. RemovalRefused when it is not confined."""
    if not confined(path, within=within):
        raise RemovalRefused(
            f"refused to remove {path}: it lies outside {within} once links are followed "
            f"({os.path.realpath(path.parent)}); wheelforge removes only what is in its own folders"
        )
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid <= 0x3FFFFF  # another user's process; beyond pid_max: none
    return True


def sweep(folder: Path, *, within: Path, now: float | None = None) -> list[Path]:
    """Remove from *folder* the temporary files and staging folders of runs that were killed
    (their process gone, or older than a day); returns what was removed."""
    now = time.time() if now is None else now
    removed = []
    try:
        children = list(folder.iterdir())
    except OSError:
        return []
    for child in children:
        m = next((m for r in _LEFTOVER_RES if (m := r.match(child.name))), None)
        if m is None:
            continue
        pid_text = m.groupdict().get("pid")
        try:
            age = now - child.lstat().st_mtime
        except OSError:
            continue
        alive = pid_text is not None and len(pid_text) < 8 and _alive(int(pid_text))
        if pid_text is None and age < STALE_AFTER_S / 24:
            continue  # an old-style name: perhaps in use by an older wheelforge right now
        if (alive and age < STALE_AFTER_S) or int(pid_text or 0) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if remove(child, within=within):
                removed.append(child)
    return removed
