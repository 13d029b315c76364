"""``wheelforge cache list --json`` and ``cache prune --json``: the cache's entries, and what a
prune removed (or, with --dry-run, would remove) and skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from wheelforge.build.caches import CacheEntry, CacheListing, PruneResult
from wheelforge.documents.kinds import DocumentKind, doc
from wheelforge.foundation.document import schema_version

# 2: an environment's kind is "torch env" (it was "test env"); prune says the names asked for.
# 3: entries without wheelforge's marker are "not wheelforge's", listed, and skipped by prune.
# 4: the job-cost history and sccache-dist's toolchains are entries ("job costs", "sccache-dist").
VERSION = 4


@dataclass(frozen=True, kw_only=True)
class CacheEntryDoc:
    kind: str = field(
        metadata=doc(
            "torch env, toolkit, repairs, probes, job costs, sccache-dist, unfinished, "
            "not wheelforge's"
        )
    )
    name: str
    path: str
    size: int = field(metadata=doc("bytes on disk (symlinks not followed, hard links once)"))
    last_used: str = field(metadata=doc("ISO 8601, UTC"))


@dataclass(frozen=True, kw_only=True)
class CacheListDocument:
    """wheelforge cache list --json."""

    schema_version: int = schema_version(VERSION)
    cache: str = field(metadata=doc("the cache folder"))
    exists: bool
    entries: tuple[CacheEntryDoc, ...]
    total: int = field(metadata=doc("bytes of all entries"))


@dataclass(frozen=True, kw_only=True)
class CachePruneDocument:
    """wheelforge cache prune --json."""

    schema_version: int = schema_version(VERSION)
    cache: str = field(metadata=doc("the cache folder"))
    exists: bool
    dry_run: bool = field(metadata=doc("true: nothing was removed; removed says what would be"))
    unused_for_days: int | None = field(metadata=doc("--unused-for; null with --all or names"))
    names: tuple[str, ...] = field(metadata=doc("the entries asked for by name (prune NAME...)"))
    removed: tuple[CacheEntryDoc, ...] = field(
        metadata=doc("each entry removed; each kept repair and probe file is its own entry")
    )
    busy: tuple[CacheEntryDoc, ...] = field(
        metadata=doc("the entries skipped: another wheelforge holds their lock")
    )
    foreign: tuple[CacheEntryDoc, ...] = field(
        metadata=doc("the entries skipped: no marker of wheelforge's, so not made by it")
    )
    freed: int = field(metadata=doc("bytes removed (or that would be)"))


LIST_KIND = DocumentKind("cache-list", CacheListDocument, VERSION, "wheelforge cache list --json")
PRUNE_KIND = DocumentKind(
    "cache-prune", CachePruneDocument, VERSION, "wheelforge cache prune --json"
)


def entry_doc(e: CacheEntry) -> CacheEntryDoc:
    used = datetime.fromtimestamp(e.last_used, tz=timezone.utc).isoformat(timespec="seconds")
    return CacheEntryDoc(kind=e.kind, name=e.name, path=str(e.path), size=e.size, last_used=used)


def list_document(listing: CacheListing) -> CacheListDocument:
    return CacheListDocument(
        cache=str(listing.root),
        exists=listing.exists,
        entries=tuple(entry_doc(e) for e in listing.entries),
        total=listing.total,
    )


def prune_document(result: PruneResult) -> CachePruneDocument:
    return CachePruneDocument(
        cache=str(result.root),
        exists=result.exists,
        dry_run=result.dry_run,
        unused_for_days=result.unused_for_days,
        names=result.names,
        removed=tuple(entry_doc(e) for e in result.removed),
        busy=tuple(entry_doc(e) for e in result.busy),
        foreign=tuple(entry_doc(e) for e in result.foreign),
        freed=result.freed,
    )
