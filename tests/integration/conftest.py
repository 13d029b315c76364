"""Fixtures the integration modules share (functions and example projects are in helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheelforge cache (``--cache-dir``) for the whole session, never the user's: a torch
    environment or a provisioned toolkit is made once, by the first test that needs it, and
    reused by the others (each torch 2.13 environment is a minute of pip and ~1 GB)."""
    return tmp_path_factory.mktemp("shared-cache")
