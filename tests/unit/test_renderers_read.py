"""Renderers read results, they decide nothing (issue 34): inspect's table and its --json read
a binary's loads-on from the result (BinaryContents.loads_on), check's table and --json read the
verdicts and counts from binaries/checkwheels.CheckResult, the build's summary and report read
VariantResult and BuildReport. So a renderer imports, from the layers that decide (binaries,
planning, toolchain, packaging, adoption, build), only their data: classes, type aliases and constants,
never a function or a module (binaries.loadson.loads_on, the rule modules, floors, provision)."""

from __future__ import annotations

import ast
import importlib
import typing
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "src" / "wheelforge"
RENDERERS = sorted(
    [
        *(PACKAGE / "cli").glob("*_screen.py"),
        PACKAGE / "cli" / "ci.py",
        *(PACKAGE / "documents").glob("*.py"),
    ]
)
DECIDING = ("binaries", "planning", "toolchain", "packaging", "adoption", "build")
# How a wheel member is named (x.whl!pkg/_C.abi3.so) is spelling, which the renderers share.
SPELLING = {("wheelforge.binaries.elf", "member_path"), ("wheelforge.binaries.elf", "split_member")}
# The list of documents (not a renderer): it names the build info's model module.
LISTS = {PACKAGE / "documents" / "schemas.py", PACKAGE / "documents" / "__init__.py"}


def _is_data(value: object, name: str) -> bool:
    """A class, a type alias (Literal, a union, tuple[...]) or a constant."""
    if isinstance(value, type) or name.isupper():
        return True
    return typing.get_origin(value) is not None or type(value).__module__ == "typing"


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) of every name a module imports from the deciding layers (lazy and
    TYPE_CHECKING imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            layer = node.module.split(".")[1] if node.module.startswith("wheelforge.") else ""
            if layer in DECIDING:
                found += [(node.module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (alias.name, "", node.lineno)
                for alias in node.names
                if alias.name.startswith("wheelforge.") and alias.name.split(".")[1] in DECIDING
            ]
    return found


@pytest.mark.parametrize(
    "path", [p for p in RENDERERS if p not in LISTS], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_a_renderer_imports_only_data_from_the_layers_that_decide(path: Path) -> None:
    wrong = []
    for module, name, line in _imports(path):
        if (module, name) in SPELLING:
            continue
        owner = importlib.import_module(module)
        value = getattr(owner, name, None) if name else owner
        if value is None and importlib.util.find_spec(f"{module}.{name}") is not None:
            value = importlib.import_module(f"{module}.{name}")  # a module imported by name
        if name == "" or not _is_data(value, name):
            wrong.append(f"{path.name}:{line}: {module} {name or '(module)'}")
    assert wrong == [], "a renderer computes what its result should carry:\n" + "\n".join(wrong)


def test_the_check_catches_a_renderer_that_computes(tmp_path: Path) -> None:
    """What the test above would say of inspect's table before issue 34 (it called loads_on)."""
    renderer = tmp_path / "render_x.py"
    renderer.write_text(
        "from wheelforge.binaries.loadson import LoadsOn, loads_on\n"
        "from wheelforge.binaries import floors\n"
    )
    found = _imports(renderer)
    assert [(m, n) for m, n, _ in found] == [
        ("wheelforge.binaries.loadson", "LoadsOn"),
        ("wheelforge.binaries.loadson", "loads_on"),
        ("wheelforge.binaries", "floors"),
    ]
    import wheelforge.binaries.loadson as loadson

    assert _is_data(loadson.LoadsOn, "LoadsOn") and not _is_data(loadson.loads_on, "loads_on")
