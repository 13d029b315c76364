"""A cache of tool probes (torch, nvcc, the host compiler's version), so a rebuild with nothing
changed starts no process to ask them again.

An entry is keyed by what was asked (the program's path, the environment variables that steer
it) and is valid while every file it watches has the size and modification time it had when
the probe ran: the program itself, the folders packages are installed into (installing or
removing one changes the folder's mtime), the files that carry the version. Anything else is a
miss, and a miss only costs the probe it would have run anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wheelforge import __version__
from wheelforge.foundation import cachefiles, writers
from wheelforge.foundation.document import to_document

PROBES = "probes"  # <cache>/probes/<kind>/<key>.json
# Bumped when the shape of a probe's value changes, so old entries are never misread.
_FORMAT = 3

Stat = tuple[int, int] | None  # (size, mtime_ns); None: the path does not exist


def stat_of(path: str | Path) -> Stat:
    try:
        st = os.stat(path)  # noqa: PTH116 - one call, no Path object: this runs for every watched file
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def fingerprint(paths: Iterable[str | Path]) -> dict[str, Stat]:
    return {str(p): stat_of(p) for p in paths}


def unchanged(watched: Mapping[str, Stat]) -> bool:
    """Whether every watched path still has the recorded size and mtime (or is still absent)."""
    return all(stat_of(path) == recorded for path, recorded in watched.items())


def _entry_path(cache: Path, kind: str, key: Mapping[str, object]) -> Path:
    text = json.dumps(
        {"kind": kind, "key": key, "format": _FORMAT, "wheelforge": __version__}, sort_keys=True
    )
    return cache / PROBES / kind / (hashlib.sha256(text.encode()).hexdigest()[:24] + ".json")


@dataclass(frozen=True, kw_only=True)
class ProbeEntry:
    """A probe's entry: what was asked, what it watches, and the probe's answer (checked by the
    probe's own shape: the answer of a tool or a torch child, kept as it came)."""

    key: Mapping[str, Any]
    watch: Mapping[str, Stat]  # path → [size, mtime_ns], or null (the path did not exist)
    value: Mapping[str, Any]


def lookup(
    cache: Path | None, kind: str, key: Mapping[str, object], shape: cachefiles.Shape = dict
) -> dict[str, Any] | None:
    """The cached value for *key*, if its watched files are unchanged; an entry that is not of
    the shape written (its value of *shape*) is discarded with a note (cachefiles.load)."""
    if cache is None:
        return None
    path = _entry_path(cache, kind, key)
    entry = cachefiles.load(path, ProbeEntry, what="the probe result", within=cache)
    if entry is not None and not cachefiles.fits(entry.value, shape):
        cachefiles.discard(path, "the probe result", cache, "not the probe's answer")
        return None
    if entry is None or not unchanged(entry.watch):
        return None
    value = dict(entry.value)
    with contextlib.suppress(OSError):  # last used, for `wheelforge cache prune`
        os.utime(path)
    return value


def store(
    cache: Path | None,
    kind: str,
    key: Mapping[str, object],
    value: Mapping[str, object],
    watch: Iterable[str | Path],
) -> None:
    """Record *value*; a cache that cannot be written is no error (the next run probes again)."""
    if cache is None:
        return
    entry = ProbeEntry(key=key, watch=fingerprint(watch), value=value)
    text = json.dumps(to_document(entry), indent=1) + "\n"
    with contextlib.suppress(OSError):
        writers.write_if_changed(_entry_path(cache, kind, key), text)


def cached(
    cache: Path | None,
    kind: str,
    key: Mapping[str, object],
    probe: Callable[[], tuple[dict[str, Any], Iterable[str | Path]]],
    *,
    shape: cachefiles.Shape = dict,
) -> dict[str, Any]:
    """The value for *key*: from the cache (when it has *shape*, cachefiles.fits), else from
    *probe* (which also names what to watch)."""
    hit = lookup(cache, kind, key, shape)
    if hit is not None:
        return hit
    value, watch = probe()
    store(cache, kind, key, value, watch)
    return value
