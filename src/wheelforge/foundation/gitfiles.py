"""A git checkout read from its files, with no git process and no network: the git folder of a
checkout (``.git`` itself, or the folder a ``.git`` file names: a submodule, a worktree), the
commit it has checked out; and, when git is installed, the commit a superproject's gitlink pins
for a submodule path (asked of git: the index is git's own format)."""

from __future__ import annotations

import configparser
import shutil
from pathlib import Path

from wheelforge.foundation import proc

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
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    found = (folder / text.removeprefix("gitdir:").strip()).resolve()
    return found if found.is_dir() else None


def git_commit(folder: Path) -> str | None:
    """The commit checked out at *folder* (HEAD, a branch followed through its ref or the
    packed refs), read from the git folder's files; None when it is not a checkout."""
    gitdir = git_dir(folder)
    if gitdir is None:
        return None
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _is_commit(head) else None
    ref = head.removeprefix("ref:").strip()
    common = gitdir
    if (gitdir / "commondir").is_file():  # a worktree: refs live in the main git folder
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (gitdir, common):
        try:
            value = (base / ref).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if _is_commit(value):
            return value
    for base in (gitdir, common):
        try:
            packed = (base / "packed-refs").read_text(encoding="utf-8")
        except OSError:
            continue
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name == ref and _is_commit(sha):
                return sha
    return None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def gitlink(top: Path, path: str) -> str | None:
    """The commit the checkout at *top* pins for its submodule at *path* (relative, posix), asked
    of git (``ls-files --stage``); None without git, or when *path* is no gitlink there."""
    if not shutil.which("git"):
        return None
    result = proc.run(
        ["git", "-C", top, "ls-files", "--stage", "--", path], hint="install git", check=False
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
    parser = configparser.ConfigParser()
    try:
        parser.read(modules, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
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
