"""Where wheelforge's user cache lives. Standard library only, so the quick no-op path
(cli/quicknoop.py) and the settings chain read it from the same one place."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache() -> Path:
    """The user cache: $XDG_CACHE_HOME/wheelforge, else ~/.cache/wheelforge."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wheelforge"
