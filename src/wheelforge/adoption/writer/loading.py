"""How the project's Python loads its shared objects: a ``torch.ops.load_library(...)`` call in a
package's modules, read with ast (never imported), and the names it loads, as the strings of the
function (or module) that calls it spell them: ``"_C"`` (xformers' ``find_spec("_C")``),
``"_C*.so"`` (torchao's glob), ``os.path.join(here, "_ops.so")``, or two of them joined
(torch_scatter's ``for library in ["_scatter", ...]: find_spec(f"{library}_cpu")``).

An extension the package loads this way and whose sources define no ``PyInit_*`` is an operator
library (matrix.yaml's ``kind: library``, ``<leaf>.so``), not a Python module."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from wheelforge.foundation import readers

# Bounds on what is read: a package's modules, not a vendored tree's.
_MAX_FILES = 2000
_MAX_BYTES = 1 << 20
_MAX_PIECES = 200
_SKIP = frozenset({"build", "dist", "tests", "test", "third_party", "__pycache__", ".git"})


@dataclass(frozen=True, kw_only=True)
class LoadCall:
    where: str  # "xformers/_cpp_lib.py:130"
    words: frozenset[str]  # the strings of the function (or module) that calls it


def _python_files(folder: Path) -> Iterator[Path]:
    count = 0
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py"):
                count += 1
                if count > _MAX_FILES:
                    return
                yield Path(top, name)


def _is_load_library(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "load_library"
        and (ast.unparse(func.value).endswith("ops"))
    )


def _strings(scope: ast.AST) -> frozenset[str]:
    return frozenset(
        n.value for n in ast.walk(scope) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    )


def _calls(path: Path, root: Path) -> Iterator[LoadCall]:
    try:
        if path.stat().st_size > _MAX_BYTES:
            return
        tree = ast.parse(readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, readers.FileRefused):
        return
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    seen: set[int] = set()
    for scope in reversed(scopes):  # the innermost function first
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _is_load_library(node) and id(node) not in seen:
                seen.add(id(node))
                rel = path.relative_to(root).as_posix()
                yield LoadCall(where=f"{rel}:{node.lineno}", words=_strings(scope))


def load_calls(root: Path, folders: Iterable[str]) -> list[LoadCall]:
    """Every ``torch.ops.load_library`` call in the Python of *folders* (relative to *root*)."""
    out: list[LoadCall] = []
    for folder in dict.fromkeys(folders):
        base = root / folder
        if base.is_dir():
            for path in _python_files(base):
                out.extend(_calls(path, root))
    return out


def loaded_at(leaf: str, calls: Iterable[LoadCall]) -> str | None:
    """Where a call loads the shared object named *leaf* (``_C``): one of its strings is the
    leaf, or names it as a file (``_C.so``, ``_C*.so``, ``lib/_C.so``), or two of them make it
    (torch_scatter's ``'_scatter'`` in a list and ``f'{library}_cpu'``)."""
    pattern = re.compile(rf"(?:^|[/\\]){re.escape(leaf)}(?:[.*]|$)")
    for call in calls:
        if any(pattern.search(word) for word in call.words):
            return call.where
        pieces = sorted(
            w for w in call.words if 2 <= len(w) <= len(leaf) - 2 and leaf.startswith(w)
        )[:_MAX_PIECES]
        if any(leaf[len(head) :] in call.words for head in pieces):
            return call.where
    return None
