"""Shared fixtures. Unit tests (tests/unit) must not start processes: a fixture makes any
attempt fail loudly. Integration tests (tests/integration) run real tools, are marked, and run
after the unit tests. Their shared helpers are in tests/integration/helpers.py."""

from __future__ import annotations

import subprocess

import pytest

from tests import REPO

__all__ = ["REPO"]  # the old home of REPO; import it from tests


@pytest.fixture(autouse=True)
def _no_subprocess_in_unit_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "integration" in request.keywords:
        return
    if "tests/unit" not in request.node.nodeid.replace("\\", "/"):
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"unit tests must not start processes: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


def is_integration(item: pytest.Item) -> bool:
    return "tests/integration" in item.nodeid.replace("\\", "/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks tests/integration's tests `integration`, and runs the unit tests first, then the
    integration tests (the README's order; each keeps its own order), however pytest is called."""
    for item in items:
        if is_integration(item):
            item.add_marker(pytest.mark.integration)
    items.sort(key=is_integration)


# The real projects' smoke tests are payloads: `wheelforge test` runs them against the projects'
# wheels (tests/integration/test_real_projects.py), never this suite's collection.
collect_ignore_glob = ["integration/projects/*"]
