"""Small file helpers: a file's sha256, atomic replacement of whole folders (and a pause of the
garbage collector for building large object trees). Writing files is foundation/writers.py's."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from wheelforge.foundation import readers, removal


def resolved(path: Path) -> Path:
    """*path* absolute with every symlink followed, like Path.resolve(), but a symlink loop
    (``m.yaml -> m.yaml``) is left as it is for the reader to name (ELOOP), instead of the
    RuntimeError that Path.resolve() raises."""
    return Path(os.path.realpath(path))


def escapes(path: Path, root: Path) -> Path | None:
    """Where *path* leads, every link followed, when that lies outside the folder *root*
    (``notes.txt -> /etc/shadow``, ``../x.py``, a folder linked in from elsewhere); None when
    it stays inside. A link inside the project that leads to another place inside is fine."""
    target = resolved(path)
    return None if target.is_relative_to(resolved(root)) else target


def escape_message(what: str, path: Path, target: Path, root: Path) -> str:
    """The one line a path leading out of the project gets: *what* names the key or file."""
    how = f"is a symbolic link to {target}" if path.is_symlink() else f"leads to {target}"
    return (
        f"{what}: {path} {how}, outside the project {root}; a wheel or an sdist would carry "
        "what is there: copy it into the project, or leave it out"
    )


def sha256(path: Path) -> str:
    """The hex sha256 of a file, read in blocks (a wheel or a toolkit archive is never held
    whole in memory)."""
    digest = hashlib.sha256()
    with readers.open_regular(path) as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


STAGED_SUFFIX = ".tmp"
_STAGED_RE = re.compile(r"\.(.+)\.([0-9]+)" + re.escape(STAGED_SUFFIX))


def staged_target(name: str) -> str | None:
    """The name of the folder that the temporary *name* of staged_folder stands in for
    (``.x.123.tmp`` → ``x``), else None."""
    match = _STAGED_RE.fullmatch(name)
    return match[1] if match else None


@contextlib.contextmanager
def staged_folder(final: Path) -> Iterator[Path]:
    """A temporary folder beside *final* (not created) that replaces *final* only when the block
    completes; an interrupted or failed block leaves no half-made *final* and no temporary."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{os.getpid()}{STAGED_SUFFIX}"
    removal.remove(tmp, within=final.parent)
    try:
        yield tmp
        removal.remove(final, within=final.parent)
        tmp.replace(final)
    finally:
        removal.remove(tmp, within=final.parent)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large, long-lived tree of objects is built (a
    matrix model, its variants), then freeze what exists (gc.freeze: out of the collector's
    sight from then on). Its passes over the growing heap tripled the time of a 300k-entry
    matrix, and later ones over the finished model slowed everything after it. Reference
    counting still frees everything acyclic."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def missing_top(path: Path) -> Path | None:
    """The outermost folder of *path* (itself included) that does not exist yet, if any."""
    top = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        top = folder
    return top


def remove_if_empty(top: Path) -> None:
    """Remove the folder *top* if it holds nothing but empty folders; anything else stays."""
    tree = list(os.walk(top, topdown=False))
    if any(
        files or any(Path(folder, d).is_symlink() for d in dirs) for folder, dirs, files in tree
    ):
        return
    with contextlib.suppress(OSError):  # something appeared meanwhile: it stays
        for folder, _dirs, _files in tree:
            Path(folder).rmdir()
