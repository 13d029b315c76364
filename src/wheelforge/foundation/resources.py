"""What this machine lends a build: its cores and its memory, read from the kernel.

The memory a build may use is the smallest of what the kernel says is available
(``MemAvailable`` in ``/proc/meminfo``: free memory plus what the page cache can give back) and
what each enclosing cgroup still allows (v2 ``memory.max`` less ``memory.current``; v1
``memory.limit_in_bytes`` less ``memory.usage_in_bytes``), the cgroup's own parents included: a
container, a CI runner's slice or ``systemd-run --scope -p MemoryMax=``. The cores are the ones
the process may run on (``sched_getaffinity``), fewer when a cgroup's CPU quota
(``cpu.max``, v1 ``cpu.cfs_quota_us``) says so.

Every reader takes the text it parses, so tests give it files' contents; the functions that
read the real files are thin.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit number.
_V1_UNLIMITED = 1 << 62


@dataclass(frozen=True, kw_only=True)
class MemoryLimit:
    """The bytes a build may use, and what set them (for the summary: "7.5 GiB (cgroup
    /sys/fs/cgroup/ci.slice memory.max)")."""

    bytes: int
    source: str


def meminfo_available(text: str) -> int | None:
    """``MemAvailable`` of a ``/proc/meminfo`` text, in bytes (the kernel writes kB)."""
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemAvailable":
            words = rest.split()
            if words and words[0].isdigit():
                return int(words[0]) * 1024
    return None


def cgroup_paths(text: str) -> tuple[str | None, str | None]:
    """The v2 path and the v1 memory path of a ``/proc/self/cgroup`` text."""
    v2 = v1 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        number, controllers, path = parts
        if number == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _number(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


def cgroup_room(
    read: Callable[[Path], str | None], root: Path, path: str, *, v2: bool
) -> tuple[int, Path] | None:
    """The least room any cgroup from *path* up to *root* leaves (its limit less its usage),
    and the folder of the tightest; None when none of them has a limit. *read* returns a
    file's text, or None when it cannot be read."""
    limit_file, usage_file = (
        ("memory.max", "memory.current")
        if v2
        else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    )
    best: tuple[int, Path] | None = None
    folder = root / path.strip("/")
    while True:
        limit = _number(read(folder / limit_file))  # "max" (v2) reads as no limit
        if limit is not None and limit < _V1_UNLIMITED:
            room = max(0, limit - (_number(read(folder / usage_file)) or 0))
            if best is None or room < best[0]:
                best = (room, folder)
        if folder == root or not folder.is_relative_to(root):
            return best
        folder = folder.parent


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def available_memory(
    read: Callable[[Path], str | None] = _read, cgroup_root: Path = Path("/sys/fs/cgroup")
) -> MemoryLimit | None:
    """What this process's build may use: the tightest of MemAvailable and every enclosing
    cgroup's room; None when the kernel says nothing (not Linux)."""
    found: list[MemoryLimit] = []
    available = meminfo_available(read(Path("/proc/meminfo")) or "")
    if available is not None:
        found.append(MemoryLimit(bytes=available, source="MemAvailable"))
    v2, v1 = cgroup_paths(read(Path("/proc/self/cgroup")) or "")
    for path, root, is_v2 in ((v2, cgroup_root, True), (v1, cgroup_root / "memory", False)):
        if path is None:
            continue
        room = cgroup_room(read, root, path, v2=is_v2)
        if room is not None:
            name = "memory.max" if is_v2 else "memory.limit_in_bytes"
            found.append(MemoryLimit(bytes=room[0], source=f"cgroup {room[1]} {name}"))
    return min(found, key=lambda m: m.bytes) if found else None


def cpu_quota(text: str | None) -> float | None:
    """Cores a v2 ``cpu.max`` text (``"200000 100000"``, ``"max 100000"``) allows."""
    words = (text or "").split()
    if len(words) == 2 and words[0].isdigit() and words[1].isdigit() and int(words[1]) > 0:
        return int(words[0]) / int(words[1])
    return None


def cores(
    read: Callable[[Path], str | None] = _read, cgroup_root: Path = Path("/sys/fs/cgroup")
) -> int:
    """The cores this process may keep busy: its CPU affinity, fewer under a cgroup v2 CPU
    quota (rounded up: a quota of 1.5 cores keeps two compilers busy most of the time)."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = allowed or 1
    v2, _ = cgroup_paths(read(Path("/proc/self/cgroup")) or "")
    if v2 is not None:
        quota = cpu_quota(read(cgroup_root / v2.strip("/") / "cpu.max"))
        if quota is not None:
            count = min(count, max(1, math.ceil(quota)))
    return count
