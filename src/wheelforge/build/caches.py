"""The user cache (``~/.cache/wheelforge``): what it holds, how much disk each entry takes and
when it was last used (`wheelforge cache list`), and removing what has not been used for a while
(`wheelforge cache prune`) without touching an entry another wheelforge is using or creating.

Each entry's facts stay with its owner: envs.py names the environments' folder, marker and
lock; toolkit.py and provision.py the toolkits'; repair.py the kept repairs; probecache.py the
probes; fsutil.py the temporary folders of an interrupted creation."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.foundation import fsutil, locks, log, removal, writers
from wheelforge.foundation.cachehome import RECORD_RE, RECORDS
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging.repair import REPAIRS
from wheelforge.planning import jobcosts
from wheelforge.toolchain import compilecache, envs, provision
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.probecache import PROBES

# What each entry is. An environment holds one torch, for the builds that compile against it
# (an unstable-ABI variant) and for `wheelforge test` alike.
ENV, TOOLKIT, REPAIR, PROBE, UNFINISHED = "torch env", "toolkit", "repairs", "probes", "unfinished"
# What wheelforge keeps at the cache's top, one entry each: (kind, what it is, its name there).
HISTORY, DIST = "job costs", "sccache-dist"
_TOP = (
    (HISTORY, "what compiles cost, for scheduling the next build", jobcosts.HISTORY),
    (DIST, "toolchains packed for sccache-dist", compilecache.DIST_TOOLCHAINS),
)
# What lies in one of the cache's folders without the marker wheelforge writes into each entry
# it makes: a user's folder, another tool's files. Listed, never removed (a prune once removed
# any folder in envs/ as "incomplete").
FOREIGN = "not wheelforge's"
# The names wheelforge gives its kept repairs (<32 hex>/, holding the wheel and its sha256) and
# its probe results (<kind>/<24 hex>.json): repair.py and probecache.py.
_REPAIR_RE = re.compile(r"[0-9a-f]{32}")
_PROBE_RE = re.compile(r"[0-9a-f]{24}\.json")
DAY_S = 86400
# A temporary folder of a creation (fsutil.staged_folder) is left alone this long, and only
# while nobody holds the lock of the entry it stands in for.
UNFINISHED_AFTER_S = 3600
_REMOVING = ".removing"  # an entry renamed aside while it is removed: no longer an entry


@dataclass(frozen=True, kw_only=True)
class CacheEntry:
    kind: str  # ENV, TOOLKIT, REPAIR, PROBE, UNFINISHED or FOREIGN (never removed)
    name: str  # what it is: "torch 2.13.0+cpu, Python 3.12 (torch-2.13.0-0123456789)"
    path: Path
    size: int  # bytes on disk, symlinks not followed, hard links counted once
    last_used: float  # seconds since the epoch: the marker's mtime, else the newest in the folder


@dataclass(frozen=True, kw_only=True)
class CacheListing:
    root: Path
    exists: bool
    entries: tuple[CacheEntry, ...]

    @property
    def total(self) -> int:
        return sum(e.size for e in self.entries)


@dataclass(frozen=True, kw_only=True)
class PruneResult:
    root: Path
    exists: bool
    dry_run: bool
    unused_for_days: int | None  # None: --all, or entries named
    removed: tuple[CacheEntry, ...]  # (with dry_run: that would be removed)
    busy: tuple[CacheEntry, ...]  # skipped: another wheelforge holds its lock
    names: tuple[str, ...] = ()
    foreign: tuple[
        CacheEntry, ...
    ] = ()  # skipped: wheelforge did not make it (no marker)  # the entries asked for by name (then unused_for_days is None)

    @property
    def freed(self) -> int:
        return sum(e.size for e in self.removed)

    @property
    def removed_pooled(self) -> tuple[CacheEntry, ...]:
        """What was removed, the kept repairs and the probe results pooled (pooled)."""
        return pooled(self.removed, self.root)


@dataclass(frozen=True, kw_only=True)
class _Item:
    """One removable thing, with the lock to hold while removing it (None: needs none)."""

    entry: CacheEntry
    lock: Path | None


def _usage(path: Path, seen: set[tuple[int, int]]) -> tuple[int, float]:
    """Bytes on disk under *path* (du: blocks, symlinks not followed, each inode counted once in
    *seen*) and the newest mtime there."""
    size, newest = 0, 0.0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            st = current.lstat()
        except OSError:
            continue  # removed meanwhile
        newest = max(newest, st.st_mtime)
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            size += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError):
                stack.extend(current.iterdir())
    return size, newest


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _entries(
    folder: Path | None,
    kind: str,
    *,
    marker: str,
    describe: Callable[[Path], str | None],
    lock_of: Callable[[Path], Path],
    seen: set[tuple[int, int]],
) -> Iterator[_Item]:
    """The entries of *folder* (envs/ or toolkits/): whole ones by their *marker*, and the
    temporary folders of creations (``.<name>.<pid>.tmp``) and of removals."""
    if folder is None or not folder.is_dir():
        return
    for child in sorted(folder.iterdir()):
        if child.is_symlink() or not child.is_dir():
            continue  # the lock files; nothing wheelforge makes
        size, newest = _usage(child, seen)
        target = fsutil.staged_target(child.name)
        if target is not None or child.name.endswith(_REMOVING):
            name = f"unfinished {kind} {target}" if target else f"{kind} being removed"
            lock = lock_of(folder / target) if target else None
            yield _Item(
                entry=CacheEntry(
                    kind=UNFINISHED, name=name, path=child, size=size, last_used=newest
                ),
                lock=lock,
            )
            continue
        if not _regular(child / marker):
            yield _foreign(child, size, newest, f"no {marker}")
            continue
        used = _mtime(child / marker) or newest
        what = describe(child) or f"{marker} unreadable"
        yield _Item(
            entry=CacheEntry(
                kind=kind, name=f"{what} ({child.name})", path=child, size=size, last_used=used
            ),
            lock=lock_of(child),
        )


def _regular(path: Path) -> bool:
    """Whether *path* is a regular file itself (a marker is never a link: one linked in from
    elsewhere is not one wheelforge wrote)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _foreign(path: Path, size: int, newest: float, why: str) -> _Item:
    """What a user or another tool put into the cache: listed with why it is not wheelforge's,
    never removed."""
    entry = CacheEntry(
        kind=FOREIGN, name=f"{path.name}: {why}", path=path, size=size, last_used=newest
    )
    return _Item(entry=entry, lock=None)


def _children(folder: Path | None, depth: int) -> Iterator[Path]:
    """What lies *depth* levels below *folder*, sorted, never through a symlink (a glob would
    follow ``probes/<kind> -> elsewhere/`` and list what is there)."""
    if folder is None:
        return
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return
    for child in children:
        if child.is_symlink():
            continue
        if depth == 1:
            yield child
        elif child.is_dir():
            yield from _children(child, depth - 1)


def _files(
    folder: Path | None, kind: str, depth: int, seen: set[tuple[int, int]]
) -> Iterator[_Item]:
    """Kept repairs (folders, *depth* 1) or probe results (files, *depth* 2), one item each;
    what does not have the name and shape wheelforge gives them is FOREIGN."""
    if folder is None:
        return
    for child in _children(folder, depth):
        size, newest = _usage(child, seen)
        why = _not_kept_repair(child) if kind == REPAIR else _not_probe(child)
        if why is not None:
            yield _foreign(child, size, newest, why)
            continue
        name = child.relative_to(folder).as_posix()
        yield _Item(
            entry=CacheEntry(kind=kind, name=name, path=child, size=size, last_used=newest),
            lock=None,
        )


def _not_kept_repair(path: Path) -> str | None:
    """Why *path* is not a repair wheelforge kept (``<32 hex>/`` holding ``*.whl`` and
    ``sha256``), None when it is one."""
    if not _REPAIR_RE.fullmatch(path.name):
        return "not named like a kept repair, 32 hex digits"
    if path.is_symlink() or not path.is_dir():
        return "not a folder, as a kept repair is"
    try:
        inside = list(path.iterdir())
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    odd = [
        p.name for p in inside if not _regular(p) or not (p.suffix == ".whl" or p.name == "sha256")
    ]
    return f"holds {odd[0]}, which wheelforge does not keep there" if odd else None


def _not_probe(path: Path) -> str | None:
    """Why *path* is not a probe result wheelforge wrote (``<kind>/<24 hex>.json``, or a quick
    no-op's record, ``quick-noop/<32 hex>.json``), None when it is one."""
    if path.parent.name == RECORDS.name:
        if RECORD_RE.fullmatch(path.name) and _regular(path):
            return None
        return "not a quick no-op's record: those are files named <32 hex digits>.json"
    if _PROBE_RE.fullmatch(path.name) and _regular(path):
        return None
    return "not a probe result: those are files named <24 hex digits>.json"


def _check_root(root: Path) -> bool:
    """Whether the cache exists; a file in its place is refused."""
    if root.exists() and not root.is_dir():
        raise ConfigError(
            f"the cache {root} is a file, not a folder; pass --cache-dir a folder (or remove "
            "the file)"
        )
    return root.exists()


def _own(root: Path, name: str) -> Path | None:
    """The folder *name* of the cache, or a path that does not exist when it is a symlink: a
    folder linked in from elsewhere is not the cache's to list or to prune (once, a prune
    followed ``envs -> elsewhere/`` and removed what was there)."""
    folder = root / name
    if folder.is_symlink():
        log.warning(
            f"{folder} is a symbolic link (to {folder.readlink()}); wheelforge leaves it and "
            "what it points to alone: replace it by a folder"
        )
        return None
    return folder


def _items(root: Path) -> list[_Item]:
    seen: set[tuple[int, int]] = set()
    env_entries = _entries(
        _own(root, envs.ENVS),
        ENV,
        marker=envs.MARKER,
        describe=envs.describe,
        lock_of=envs.lock_path,
        seen=seen,
    )
    toolkit_entries = _entries(
        _own(root, toolkit.TOOLKITS),
        TOOLKIT,
        marker=toolkit.TOOLKIT_JSON,
        describe=toolkit.describe_provisioned,
        lock_of=provision.lock_path,
        seen=seen,
    )
    return [
        *env_entries,
        *toolkit_entries,
        *_files(_own(root, REPAIRS), REPAIR, 1, seen),
        *_files(_own(root, PROBES), PROBE, 2, seen),
        *_top(root, seen),
    ]


def _top(root: Path, seen: set[tuple[int, int]]) -> Iterator[_Item]:
    """The job-cost history and sccache-dist's packed toolchains, each an entry of its own (no
    longer left out of the listing, nor out of a prune)."""
    for kind, what, name in _TOP:
        path = root / name
        if not os.path.lexists(path) or path.is_symlink():
            continue
        size, newest = _usage(path, seen)
        entry = CacheEntry(
            kind=kind, name=f"{name}: {what}", path=path, size=size, last_used=newest
        )
        yield _Item(entry=entry, lock=path.with_suffix(".lock") if kind == HISTORY else None)


def entries(root: Path) -> tuple[CacheEntry, ...]:
    """Every entry of *root* one by one (no pools): what `cache prune` looks at."""
    return tuple(i.entry for i in _items(root)) if _check_root(root) else ()


def list_cache(root: Path) -> CacheListing:
    """One entry per environment, toolkit and unfinished folder; the kept repairs and the probe
    results one entry each, as a whole."""
    if not _check_root(root):
        return CacheListing(root=root, exists=False, entries=())
    return CacheListing(
        root=root, exists=True, entries=pooled([i.entry for i in _items(root)], root)
    )


def pooled(entries: Sequence[CacheEntry], root: Path) -> tuple[CacheEntry, ...]:
    """*entries* with the kept repairs and the probe results of *root* pooled into one entry
    each (their count, size and newest use): hundreds of small files say nothing one by one."""
    kept: list[CacheEntry] = []
    pools: dict[str, list[CacheEntry]] = {REPAIR: [], PROBE: []}
    for entry in entries:
        pools.get(entry.kind, kept).append(entry)
    for kind, folder in ((REPAIR, REPAIRS), (PROBE, PROBES)):
        if members := pools[kind]:
            size = sum(e.size for e in members)
            used = max(e.last_used for e in members)
            name = f"{len(members)} {'kept repaired wheels' if kind == REPAIR else 'probe results'}"
            kept.append(
                CacheEntry(kind=kind, name=name, path=root / folder, size=size, last_used=used)
            )
    return tuple(kept)


def named(items: Sequence[_Item], names: Sequence[str], root: Path) -> list[_Item]:
    """The entries *names* name: an environment's or a toolkit's folder name (as `cache list`
    shows it in parentheses), ``repairs`` or ``probes`` for those pools, or an entry's path.
    A name that matches nothing is refused, with the names there are."""
    by_name: dict[str, list[_Item]] = {}
    for item in items:
        entry = item.entry
        pool = REPAIRS if entry.kind == REPAIR else PROBES if entry.kind == PROBE else None
        keys = {pool, str(root / pool)} if pool else {entry.path.name, str(entry.path)}
        for key in keys:
            by_name.setdefault(key, []).append(item)
    unknown = [n for n in names if n not in by_name and str(Path(n).absolute()) not in by_name]
    if unknown:
        known = sorted({i.entry.path.name for i in items if i.entry.kind not in (REPAIR, PROBE)})
        pools = ((REPAIRS, REPAIR), (PROBES, PROBE))
        known += [pool for pool, kind in pools if any(i.entry.kind == kind for i in items)]
        listed = ", ".join(known) if known else "none: the cache is empty"
        raise ConfigError(
            f"cache prune: no entry named {', '.join(repr(n) for n in unknown)} in {root}; "
            f"its entries: {listed} (wheelforge cache list shows them)"
        )
    chosen = [i for n in names for i in by_name.get(n) or by_name[str(Path(n).absolute())]]
    return list({id(i): i for i in chosen}.values())


def prune(
    root: Path,
    *,
    unused_for: int = 30,
    every: bool = False,
    dry_run: bool = False,
    now: float | None = None,
    names: Sequence[str] = (),
) -> PruneResult:
    """Remove the entries not used for *unused_for* days (*every*: all of them), and unfinished
    temporary folders older than an hour whose entry nobody is creating; with *names*, those
    entries (named()) whenever they were used. An entry whose lock another wheelforge holds is
    skipped; with *dry_run* nothing is removed."""
    if names:
        return _prune_named(root, names, dry_run=dry_run)
    if unused_for < 0:
        raise ConfigError(
            f"--unused-for {unused_for} is negative; give a number of days, 0 or more (0: "
            "everything not in use)"
        )
    unused_for_days = None if every else unused_for
    now = time.time() if now is None else now
    cutoff = now if unused_for_days is None else now - unused_for_days * DAY_S
    removed: list[CacheEntry] = []
    busy: list[CacheEntry] = []
    exists = _check_root(root)
    foreign: list[CacheEntry] = []
    for item in _items(root) if exists else []:
        entry = item.entry
        if entry.kind == FOREIGN:
            foreign.append(entry)
            continue
        stale = now - UNFINISHED_AFTER_S if entry.kind == UNFINISHED else cutoff
        # --all: every entry, but an unfinished folder only once it is an hour old
        if (unused_for_days is not None or entry.kind == UNFINISHED) and entry.last_used >= stale:
            continue
        outcome = _remove(item, root, dry_run=dry_run, stale=stale, every=unused_for_days is None)
        if outcome is not None:
            (removed if outcome else busy).append(entry)
    return PruneResult(
        root=root,
        exists=exists,
        dry_run=dry_run,
        unused_for_days=unused_for_days,
        removed=tuple(removed),
        busy=tuple(busy),
        foreign=tuple(foreign),
    )


def _prune_named(root: Path, names: Sequence[str], *, dry_run: bool) -> PruneResult:
    if not _check_root(root):
        raise ConfigError(
            f"cache prune: there is no cache at {root}, so nothing named {names[0]!r}"
        )
    removed: list[CacheEntry] = []
    busy: list[CacheEntry] = []
    for item in named(_items(root), names, root):
        if item.entry.kind == FOREIGN:
            raise ConfigError(
                f"cache prune: {item.entry.path} is not wheelforge's ({item.entry.name.split(': ', 1)[1]}), "
                "so wheelforge leaves it alone; remove it yourself if it is no longer needed"
            )
    for item in named(_items(root), names, root):
        outcome = _remove(item, root, dry_run=dry_run, stale=0.0, every=True)
        (removed if outcome else busy).append(item.entry)
    return PruneResult(
        root=root,
        exists=True,
        dry_run=dry_run,
        unused_for_days=None,
        removed=tuple(removed),
        busy=tuple(busy),
        names=tuple(names),
    )


def _remove(item: _Item, root: Path, *, dry_run: bool, stale: float, every: bool) -> bool | None:
    """Remove *item* under its lock: True when removed (or it would be), False when its lock is
    held, None when it was used after all (its marker touched since it was listed). A cache
    that cannot be written (its lock file, the rename aside) is one line naming it."""
    try:
        return _remove_locked(item, root, dry_run=dry_run, stale=stale, every=every)
    except OSError as exc:  # the entry was renamed aside whole, or left as it was
        raise writers.unwritable(exc, root, "cache prune") from None


def _remove_locked(
    item: _Item, root: Path, *, dry_run: bool, stale: float, every: bool
) -> bool | None:
    entry = item.entry
    # A dry run makes no lock file: where there is none, nobody holds it.
    lock = item.lock if item.lock and (not dry_run or item.lock.exists()) else None
    with locks.attempt(lock) if lock else contextlib.nullcontext(True) as free:
        if not free:
            return False
        if entry.kind in (ENV, TOOLKIT) and not every:
            marker = envs.MARKER if entry.kind == ENV else toolkit.TOOLKIT_JSON
            if (_mtime(entry.path / marker) or 0.0) >= stale:
                return None
        if not dry_run:
            _discard(entry.path, root)
    return True


def _discard(path: Path, root: Path) -> None:
    """Remove *path*, confined to the cache *root* (removal.remove). A folder is first renamed
    aside (one atomic step), so no later run finds half an entry in its place; an interrupted
    removal leaves a ``.removing`` folder that the next prune removes."""
    if path.is_symlink() or not path.is_dir():
        removal.remove(path, within=root)
        return
    aside = path.with_name(
        path.name if path.name.endswith(_REMOVING) else f".{path.name}.{os.getpid()}{_REMOVING}"
    )
    if not removal.confined(aside, within=root):
        removal.remove(aside, within=root)  # refused, naming where it leads
    with contextlib.suppress(FileNotFoundError):
        path.rename(aside)
    removal.remove(aside, within=root)
