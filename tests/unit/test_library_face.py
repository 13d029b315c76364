"""The library face (issue 42): each feature package's ``__init__`` names its entry, and the top
package re-exports run_build, check and inspect, lazily, so ``import wheelforge`` (which the
quick no-op and ``--version`` pay for) imports nothing but itself and foundation/lazy.py."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.unit.fakes import LAYERS

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
FEATURES = LAYERS[1:]  # every layer above foundation has a face


@pytest.mark.parametrize("package", ["wheelforge", *(f"wheelforge.{p}" for p in FEATURES)])
def test_every_name_of_the_face_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = [n for n in module.__all__ if not n.startswith("__")]
    assert names, f"{package} names no library entry"
    for name in names:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError):
        module.no_such_entry  # noqa: B018


def test_the_top_level_entries_are_the_libraries() -> None:
    import wheelforge
    from wheelforge.binaries.checkwheels import run_check
    from wheelforge.build.orchestration import run_build
    from wheelforge.packaging.inspectwheels import run_inspect

    assert (wheelforge.run_build, wheelforge.check, wheelforge.inspect) == (
        run_build,
        run_check,
        run_inspect,
    )


@pytest.mark.parametrize("package", ["", *FEATURES])
def test_an_init_imports_only_the_lazy_helper_at_run_time(package: str) -> None:
    init = PACKAGE / package / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    run_time = []
    for node in tree.body:  # a TYPE_CHECKING block is an ast.If: not run
        if isinstance(node, ast.ImportFrom):
            run_time += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            run_time += [a.name for a in node.names]
    assert set(run_time) <= {"typing.TYPE_CHECKING", "wheelforge.foundation.lazy"}
