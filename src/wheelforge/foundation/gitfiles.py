"""A git checkout read from its files, with no git process and no network: the git folder of a
checkout (``.git`` itself, or the folder a ``.git`` file names: a submodule, a worktree), the
commit it has checked out; and, when git is installed, the commit a superproject's gitlink pins
for a submodule path (asked of git: the index is git's own format)."""

from __future__ import annotations

import shutil
from pathlib import Path

from wheelforge.foundation import fsutil, proc, readers

_HEX = frozenset("0123456789abcdef")


def git_dir(folder: Path) -> Path | None:
    """The git folder of a checkout at *folder*: ``.git`` itself, or the folder a ``.git``
    file names (a submodule, a worktree); None when *folder* is no checkout's top."""
    dotgit = folder / ".git"
    if dotgit.is_dir():
        return dotgit
    if not dotgit.is_file():
        return None
    try:
        text = readers.read_text(dotgit, cap=readers.STATE_CAP, errors="replace").strip()
    except (OSError, readers.FileRefused):
        return None
    if not text.startswith("gitdir:"):
        return None
    found = fsutil.resolved(folder / text.removeprefix("gitdir:").strip())
    return found if found.is_dir() else None


def git_commit(folder: Path) -> str | None:
    """The commit checked out at *folder* (HEAD, a branch followed through its ref or the
    packed refs), read from the git folder's files; None when it is not a checkout."""
    gitdir = git_dir(folder)
    if gitdir is None:
        return None
    try:
        head = _read(gitdir / "HEAD").strip()
    except (OSError, readers.FileRefused):
        return None
    if not head.startswith("ref:"):
        return head if _is_commit(head) else None
    ref = head.removeprefix("ref:").strip()
    common = gitdir
    if (gitdir / "commondir").is_file():  # a worktree: refs live in the main git folder
        try:
            common = fsutil.resolved(gitdir / _read(gitdir / "commondir").strip())
        except (OSError, readers.FileRefused):
            return None
    for base in (gitdir, common):
        try:
            value = _read(base / ref).strip()
        except (OSError, readers.FileRefused):
            continue
        if _is_commit(value):
            return value
    for base in (gitdir, common):
        try:
            packed = _read(base / "packed-refs")
        except (OSError, readers.FileRefused):
            continue
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name == ref and _is_commit(sha):
                return sha
    return None


def _read(path: Path) -> str:
    """One of git's small files, through the bounded reader (a FIFO, a device or a huge file
    there is refused, never waited on)."""
    return readers.read_text(path, cap=readers.STATE_CAP, errors="replace")


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def gitlink(top: Path, path: str) -> str | None:
    """The commit the checkout at *top* pins for its submodule at *path* (relative, posix), asked
    of git (``ls-files --stage``); None without git, or when *path* is no gitlink there."""
    if not shutil.which("git"):
        return None
    result = proc.run(
        # core.fsmonitor off: a checkout's .git/config names a program that git runs on every
        # index read (ls-files too), and the checkout is the project's, not wheelforge's.
        ["git", "-c", "core.fsmonitor=false", "-C", top, "ls-files", "--stage", "--", path],
        hint="install git",
        check=False,
        timeout=proc.PROBE_S,
    )
    words = result.stdout.split()
    if result.returncode == 0 and len(words) >= 2 and words[0] == "160000":
        return words[1]
    return None


def submodules(top: Path) -> dict[str, str | None]:
    """The submodules *top*'s ``.gitmodules`` declares: path (relative, posix) → URL."""
    modules = top / ".gitmodules"
    if not modules.is_file():
        return {}
    import configparser

    parser = configparser.ConfigParser()
    try:
        parser.read_string(readers.read_text(modules, cap=readers.CONFIG_CAP), str(modules))
    except (configparser.Error, OSError, readers.FileRefused):
        return {}
    out: dict[str, str | None] = {}
    for section in parser.sections():
        path = parser.get(section, "path", fallback=None)
        if path:
            out[path.strip().strip("/")] = parser.get(section, "url", fallback=None)
    return out


def superproject(folder: Path) -> Path | None:
    """The top of the git checkout *folder* lies in (itself or a parent), if any."""
    return next((p for p in (folder, *folder.parents) if git_dir(p) is not None), None)
