"""Where wheelforge's user cache lives, and where in it the quick no-op keeps its records.
Standard library only, so the quick no-op path (cli/quicknoop.py), the settings chain and
`wheelforge cache` (build/caches.py) read it from one place."""

from __future__ import annotations

import os
import re
from pathlib import Path


def default_cache() -> Path:
    """The user cache: $XDG_CACHE_HOME/wheelforge, else ~/.cache/wheelforge."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wheelforge"


# The quick no-op's records: among the probe results (toolchain/probecache.PROBES), so
# `wheelforge cache list` counts them and `cache prune` removes the least recently used.
RECORDS = Path("probes", "quick-noop")
RECORD_RE = re.compile(r"[0-9a-f]{32}\.json")  # <key>.json: what `cache list` knows them by
