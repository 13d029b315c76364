"""One name per thing, read from its owner: no module of the package gives a second home to a
name another module defines (``write_if_changed = writers.write_if_changed`` in fsutil), and no
module, test or tool reaches a name through a module that only imported it
(``abicheck.demangle`` for ``symbols.demangle``). A move is then one edit in the owner and its
callers, and a reader finds a name where it is defined. A module reached through another
(``monkeypatch.setattr(envs.proc, "run", ...)``: the proc that envs calls) is the module
itself, not a second name, and is not counted.

Read with ``ast`` from the source; a name counts as one a module imported when the module binds
it at its top level by ``from wheelforge... import`` or ``import wheelforge...``, or by an
assignment of such a name or of an attribute of one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests import REPO

SRC = REPO / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((SRC / "wheelforge").rglob("*.py"))}


def _wheelforge_import(node: ast.stmt) -> Iterator[tuple[str, str]]:
    """(bound name, what it is) for each wheelforge name an import statement binds."""
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        if node.module.split(".")[0] == "wheelforge":
            for alias in node.names:
                yield alias.asname or alias.name, f"{node.module}.{alias.name}"
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == "wheelforge" and alias.asname:
                yield alias.asname, alias.name


def _root(value: ast.expr) -> str | None:
    """The name an expression of names and attributes starts from (``writers`` of
    ``writers.publish``), or None for anything else."""
    while isinstance(value, ast.Attribute):
        value = value.value
    return value.id if isinstance(value, ast.Name) else None


def _second_names(tree: ast.Module, imported: dict[str, str]) -> Iterator[tuple[int, str, str]]:
    """(line, name, what it names) of each top-level assignment that gives an imported name
    (or an attribute of one) a second name."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        root = _root(value)
        if root in imported:
            for target in targets:
                if isinstance(target, ast.Name):
                    yield node.lineno, target.id, ast.unparse(value)


@cache
def borrowed(module: str) -> dict[str, str]:
    """The names *module* binds at its top level that are another module's: name → owner's."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    imported: dict[str, str] = {}
    for node in tree.body:
        imported.update(_wheelforge_import(node))
    for _, name, value in _second_names(tree, imported):
        imported[name] = value
    return imported


def _is_module(dotted: str) -> bool:
    return dotted in MODULES


def reached_through(path: Path) -> Iterator[str]:
    """Each place *path* imports a name from, or reads it as an attribute of, a module that
    only imported it (``line: what (its owner)``)."""
    text = path.read_text(encoding="utf-8")
    if "wheelforge" not in text:
        return
    modules: dict[str, str] = {}  # a name bound to a wheelforge module → that module
    attributes: list[ast.Attribute] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute):
            attributes.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, dotted in _wheelforge_import(node):
                if _is_module(dotted):
                    modules[name] = dotted
                    continue
                owner, _, leaf = dotted.rpartition(".")
                source = borrowed(owner).get(leaf) if owner in MODULES else None
                if source and not _is_module(source):
                    yield f"{node.lineno}: from {owner} import {leaf} ({source})"
            if isinstance(node, ast.Import):
                modules.update((a.name, a.name) for a in node.names if _is_module(a.name))
    for node in attributes:
        value = node.value
        if isinstance(value, ast.Name):
            base = value.id
        # after `import wheelforge.foundation.proc`: `wheelforge.foundation.proc.run`
        elif isinstance(value, ast.Attribute):
            base = ast.unparse(value)
        else:
            continue
        module = modules.get(base)
        owner = borrowed(module).get(node.attr) if module else None
        if owner and not _is_module(owner):
            yield f"{node.lineno}: {base}.{node.attr} ({owner})"


def test_no_module_gives_another_modules_name_a_second_home() -> None:
    found = []
    for path in MODULES.values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = dict(item for node in tree.body for item in _wheelforge_import(node))
        found += [
            f"{path.relative_to(REPO)}:{line}: {name} = {value}"
            for line, name, value in _second_names(tree, imported)
        ]
    assert found == [], f"use the owner's name where it is needed: {found}"


def test_every_name_is_read_from_its_owner() -> None:
    files = sorted(
        p
        for top in ("src", "tests", "tools", "bench")
        for p in (REPO / top).rglob("*.py")
        if "projects" not in p.relative_to(REPO).parts
    )
    found = [
        f"{path.relative_to(REPO)}:{where}" for path in files for where in reached_through(path)
    ]
    assert found == [], "\n".join(["names read through a module that only imports them:", *found])


def test_the_checker_sees_a_planted_second_home(tmp_path: Path) -> None:
    planted = tmp_path / "caller.py"
    planted.write_text(
        "from wheelforge.binaries import abicheck\n"
        "from wheelforge.binaries.abicheck import demangle, judge_wheel\n"
        "abicheck.demangle('x'), abicheck.judge_wheel\n"
    )
    assert list(reached_through(planted)) == [
        "2: from wheelforge.binaries.abicheck import demangle (wheelforge.binaries.symbols.demangle)",
        "3: abicheck.demangle (wheelforge.binaries.symbols.demangle)",
    ]
    tree = ast.parse("from wheelforge.foundation import writers\npublish = writers.publish\n")
    imported = dict(item for node in tree.body for item in _wheelforge_import(node))
    assert list(_second_names(tree, imported)) == [(2, "publish", "writers.publish")]
