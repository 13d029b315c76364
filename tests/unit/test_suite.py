"""The suite's own layout: nothing imports from a test module (shared code lives in
tests/integration/helpers.py and tests/unit/fakes.py), and unit tests run before integration
tests."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import REPO, conftest

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
