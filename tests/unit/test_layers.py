"""The package's layers (docs/architecture.md): imports point down only, and there is no cycle.

Read from the source with ``ast``, so a lazy import inside a function counts as much as one at
the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.fakes import LAYERS

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "wheelforge"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package: str | None = None) -> set[str]:
    """Absolute names of the wheelforge modules *path* imports (relative imports resolved
    against *package*, by default the one *path* is in)."""
    found: set[str] = set()
    if package is None:
        package = _module_name(path)
        if path.name != "__init__.py":
            package = package.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("wheelforge"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith("wheelforge"):
                continue
            found.add(base)
            # `from wheelforge.toolchain import toolkit` imports the module toolkit.
            for alias in node.names:
                candidate = PACKAGE.parent / Path(*base.split("."), alias.name)
                if candidate.with_suffix(".py").is_file() or candidate.is_dir():
                    found.add(f"{base}.{alias.name}")
    return found


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}

# Entry points that tools import by a fixed top-level name (PEP 517's build-backend), each in
# a layer like any other module.
TOP_LEVEL_LAYERS = {"wheelforge.build_meta": "cli"}


def _layer(module: str) -> str | None:
    if module in TOP_LEVEL_LAYERS:
        return TOP_LEVEL_LAYERS[module]
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer() -> None:
    loose = [
        m
        for m, p in MODULES.items()
        if _layer(m) is None and p.parent != PACKAGE and m != "wheelforge"
    ]
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == []
    # Only the package marker, `python -m wheelforge` and the PEP 517 backend stay at the top.
    assert top == ["__init__.py", "__main__.py", "build_meta.py"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m)))
def test_imports_point_down(module: str) -> None:
    mine = LAYERS.index(_layer(module))  # type: ignore[arg-type]
    upward = [
        imported
        for imported in _imports(MODULES[module])
        if _layer(imported) and LAYERS.index(_layer(imported)) > mine  # type: ignore[arg-type]
    ]
    assert upward == [], f"{module} imports from a higher layer"


def test_no_import_cycle() -> None:
    graph = {m: {i for i in _imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}
    # Package __init__ files are namespaces here: importing wheelforge.x is not a dependency cycle.
    graph = {m: {i for i in deps if MODULES[i].name != "__init__.py"} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


# init's rooms (src/wheelforge/adoption/): each may import from the rooms before it; the child
# runs in the build Python, which may not have wheelforge, so it imports none of it.
ADOPTION_ROOMS = ("record", "doors", "writer")


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[1] == "adoption" else None


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if _room(m) in (*ADOPTION_ROOMS, "child"))
)
def test_inits_rooms_point_one_way_and_the_child_stands_alone(module: str) -> None:
    imported = _imports(MODULES[module])
    if _room(module) == "child":
        if MODULES[module].name != "__init__.py":
            source = MODULES[module].read_text(encoding="utf-8")
            named = _all_imports(source)
            assert [n for n in named if n.startswith(("wheelforge", "."))] == [], module
        return
    mine = ADOPTION_ROOMS.index(_room(module))  # type: ignore[arg-type]
    later = [
        i
        for i in imported
        if _room(i) in ADOPTION_ROOMS and ADOPTION_ROOMS.index(_room(i)) > mine  # type: ignore[arg-type]
    ]
    assert later == [], f"{module} imports from a later room of adoption/"


def _all_imports(source: str) -> set[str]:
    """Every module name a source imports, absolute or relative (a relative one as '.x')."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_the_backend_is_cli_and_no_module_imports_it() -> None:
    assert _layer("wheelforge.build_meta") == "cli"
    importers = [m for m, p in MODULES.items() if "wheelforge.build_meta" in _imports(p)]
    assert importers == []


def test_the_checker_sees_a_planted_upward_import(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from wheelforge.cli import app\nfrom ..build import orchestration\n")
    found = _imports(planted, package="wheelforge.toolchain")
    assert {"wheelforge.cli.app", "wheelforge.build.orchestration"} <= found
    assert LAYERS.index(_layer("wheelforge.build.orchestration")) > LAYERS.index("toolchain")  # type: ignore[arg-type]


def test_the_layers_are_the_package_folders() -> None:
    """Every subpackage of wheelforge is a layer of the list above, and every layer a folder."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)


def test_no_file_name_repeats_across_packages() -> None:
    """A module's file name says which it is (issue 42): no two modules share one, so a path in a
    traceback, a grep or a review names one file."""
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.name, []).append(path.relative_to(PACKAGE).as_posix())
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def test_architecture_md_lists_the_layers_in_their_order() -> None:
    """docs/architecture.md's layer table, lowest first, is the list enforced here."""
    text = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip(" `") for line in table.splitlines() if line.startswith("| `")]
    assert rows == list(LAYERS)
