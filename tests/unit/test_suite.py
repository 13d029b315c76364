"""The suite's own layout: nothing imports from a test module (shared code lives in
tests/integration/helpers.py and tests/unit/fakes.py), unit tests run before integration
tests, and a unit test can start no process and reach no network."""

from __future__ import annotations

import ast
import multiprocessing
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import REPO, conftest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TESTS = REPO / "tests"


def _imported(path: Path) -> list[str]:
    """Every module *path* imports, relative imports resolved against its package."""
    package = ".".join(path.relative_to(REPO).parent.parts)
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names.append(module)
            names += [f"{module}.{a.name}" for a in node.names]  # `from . import test_x`
    return names


def test_no_module_imports_a_test_module() -> None:
    found = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        if "projects" not in path.relative_to(TESTS).parts
        for name in _imported(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert found == [], (
        f"move shared code to tests/integration/helpers.py or unit/fakes.py: {found}"
    )


def test_relative_imports_resolve() -> None:
    assert "tests.unit.fakes.plan_for" in _imported(TESTS / "unit" / "test_plan.py")
    assert "tests.integration.helpers" in _imported(TESTS / "integration" / "test_build.py")


@dataclass
class _Item:
    nodeid: str
    markers: list[str] = field(default_factory=list)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.markers.append(mark.name)


def test_unit_tests_run_first_then_integration_tests_in_their_order() -> None:
    items = [
        _Item("tests/integration/test_b.py::one"),
        _Item("tests/unit/test_z.py::one"),
        _Item("tests/integration/test_a.py::two"),
        _Item("tests/unit/test_a.py::two"),
    ]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/unit/test_z.py::one",
        "tests/unit/test_a.py::two",
        "tests/integration/test_b.py::one",
        "tests/integration/test_a.py::two",
    ]
    assert [i.markers for i in items] == [[], [], ["integration"], ["integration"]]


def _spawned_child() -> None:  # what a multiprocessing child would run; it never starts
    pass


@pytest.mark.parametrize(
    "attempt",
    [
        lambda: subprocess.run(["true"], check=False),
        lambda: os.system("true"),
        lambda: os.posix_spawnp("true", ["true"], os.environ),
        # a program that is not there: were the guard gone, exec fails instead of replacing pytest
        lambda: os.execvp("/nonexistent/wheelforge-guard", ["x"]),
        lambda: multiprocessing.get_context("spawn").Process(target=_spawned_child).start(),
        # os.fork, through multiprocessing: were the guard gone, the child would only return
        lambda: multiprocessing.get_context("fork").Process(target=_spawned_child).start(),
        lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
        lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b"x", ("::1", 9)),
        lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).bind(("127.0.0.1", 0)),
        lambda: socket.getaddrinfo("pypi.org", 443),
        lambda: urllib.request.urlopen("https://pypi.org/simple/", timeout=1),
    ],
    ids=[
        "subprocess",
        "os.system",
        "posix_spawnp",
        "exec",
        "multiprocessing-spawn",
        "multiprocessing-fork",
        "tcp",
        "udp",
        "bind",
        "dns",
        "urlopen",
    ],
)
def test_a_unit_test_cannot_start_a_process_or_reach_the_network(
    attempt: Callable[[], object],
) -> None:
    """tests/conftest.py's guard, seen from a unit test: every way out fails loudly."""
    with pytest.raises((AssertionError, urllib.error.URLError)) as raised:
        attempt()
    error = raised.value
    message = str(error.reason if isinstance(error, urllib.error.URLError) else error)
    assert message.startswith("unit tests must not"), message


def test_a_unix_socket_and_ip_literals_stay_usable(tmp_path: Path) -> None:
    """The hostile fixtures bind UNIX sockets; an address given as digits needs no lookup."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
    assert socket.getaddrinfo("127.0.0.1", 9, type=socket.SOCK_STREAM)


def test_the_readme_command_is_the_unit_run_and_ci_runs_every_step() -> None:
    """The README's second line runs the unit tests (pyproject's testpaths); .ci/run runs it, the
    integration tests by path and each marker but sweep over all of tests/, so every test but a
    sweep runs in CI."""
    first_block = (REPO / "README.md").read_text(encoding="utf-8").split("\n\n")[1].splitlines()
    assert first_block[1].strip() == ".venv/bin/python -m pytest"
    pytest_options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "pytest"
    ]["ini_options"]
    assert pytest_options["testpaths"] == ["tests/unit"]
    steps = [
        line.split('" ', 1)[1]
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.startswith('step "tests: ')
    ]
    assert steps == [
        ".venv/bin/python -m pytest",
        ".venv/bin/python -m pytest tests/integration",
        '.venv/bin/python -m pytest tests -m "network and not sweep"',
        '.venv/bin/python -m pytest tests -m "slow and not network and not sweep"',
        '.venv/bin/python -m pytest tests -m "bench_smoke and not network"',
    ]
    markers = {m.split(":", 1)[0] for m in pytest_options["markers"]}
    # each has its step above
    assert markers == {"integration", "network", "slow", "sweep", "bench_smoke"}
