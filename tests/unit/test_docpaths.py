"""Every module a docstring, a comment or docs/architecture.md names exists: a path of this
repository (``src/wheelforge/foundation/proc.py``, ``toolchain/provision.py``,
``tests/unit/fakes.py``, ``build/``), a dotted name (``wheelforge.binaries.registry``),
a module's file name alone (``setuppy.py``: some module of that name), and a
module's attribute written after a path or a dotted name (``toolchain/toolkits.release_builds``,
``wheelforge.adoption.record.captured.CapturedBuild``). Its layer table is checked by
tests/unit/test_layers.py.

A path counts as this repository's when its first folder is one of its own (``src``, ``tests``,
``tools``, a package of src/wheelforge, ...); ``torch/version.py`` or cibuildwheel's
``test/utils.py`` are other projects' and are left alone. A relative path resolves when some file
of the repository ends with it (``configuration/matrix/load.py`` is
``src/wheelforge/configuration/matrix/load.py``)."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests import REPO

PACKAGE = REPO / "src" / "wheelforge"
ARCHITECTURE = REPO / "docs" / "architecture.md"
# The folders a docstring's path may start with (beside every package of src/wheelforge).
TOP_FOLDERS = frozenset(
    {"src", "tests", "unit", "integration", "tools", "bench", "kernels", "docs"}
)
# File names of other projects that prose names without a folder: a project's setup.py, its
# generator scripts (``python gen.py``), flash-attention's flash_attn_config.py.
OTHER_PROJECTS_FILES = frozenset(
    {"setup.py", "gen.py", "generate_kernels.py", "flash_attn_config.py"}
)
# The top folders a build writes (never the package build/).
TOP_OUTPUTS = frozenset({"build", "dist"})
# Text that names a path on purpose without it existing: a test planting a missing module.
PLANTED = frozenset({"wheelforge.x"})

_PATH = re.compile(
    r"(?<![\w./$<>{}*-])"  # not the tail of a longer path, URL, variable or glob
    r"(?P<path>[A-Za-z_][\w-]*/(?:[A-Za-z_][\w-]*(?:/[A-Za-z_][\w-]*)*(?:/|\.py\b)?)?)"
    r"(?P<attrs>(?:\.[A-Za-z_]\w*)*)"
)
_BARE = re.compile(r"(?<![\w./-])[A-Za-z_]\w*\.py\b(?!/)")
_DOTTED = re.compile(r"(?<![\w./-])wheelforge(?:\.[A-Za-z_]\w*)+")


def repo_files() -> list[Path]:
    """The repository's own files: no hidden folder (.git, .venv), no build output (the top
    build/ and dist/), no cache."""
    found = []
    for root, dirs, files in os.walk(REPO):
        top = Path(root) == REPO
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".") and d != "__pycache__" and not (top and d in TOP_OUTPUTS)
        ]
        found += [Path(root, f) for f in files]
    return found


@cache
def _index() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Every file and every folder of the repository (as paths relative to it), by name."""
    files: dict[str, list[str]] = {}
    folders: dict[str, list[str]] = {}
    for path in repo_files():
        relative = path.relative_to(REPO)
        files.setdefault(relative.name, []).append(relative.as_posix())
        for parent in relative.parents:
            if parent.name:
                folders.setdefault(parent.name, []).append(parent.as_posix())
    return files, folders


@cache
def _own_folders() -> frozenset[str]:
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py")} | {"data", "wheelforge"}
    return TOP_FOLDERS | packages


def _ends_with(index: dict[str, list[str]], tail: str) -> list[str]:
    """The paths of *index* that are *tail* or end with it."""
    return [
        n for n in index.get(tail.rsplit("/", 1)[-1], []) if n == tail or n.endswith("/" + tail)
    ]


@cache
def _defines(module: Path) -> frozenset[str]:
    """The names bound at the top of *module* (functions, classes, assignments, imports), and
    those its ``__all__`` names (a package's lazy library face, foundation/lazy.py)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            listed = any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
            if listed and isinstance(node.value, (ast.List, ast.Tuple)):
                names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def resolve_path(path: str, attrs: str = "") -> str | None:
    """Why *path* (a repository path as written, with the ``.attr`` after it) does not resolve,
    or None when it does. A path of another project resolves by definition, and so does one
    that is only an example: a file other than a module is checked under src/wheelforge/ only
    (``src/k.cu:12: error`` is a compiler's line), and a path under the top build/ or dist/
    (``build/wheelforge/``) is a build's output unless it names a module (build/'s)."""
    first = path.split("/", maxsplit=1)[0]
    if first not in _own_folders() or "/" not in path.rstrip("/"):
        return None
    files, folders = _index()
    bare = path.rstrip("/")
    if path.endswith(".py"):
        modules = _ends_with(files, path)
    elif first in TOP_OUTPUTS:
        return None
    elif path.endswith("/"):
        return None if _ends_with(folders, bare) else "no such folder"
    else:
        modules = _ends_with(files, bare + ".py")
        if not modules:
            if _ends_with(folders, bare):
                return None  # a package; an attribute after it is not checked
            if not path.startswith("src/wheelforge/") or _ends_with(files, bare + attrs):
                return None  # an example's file, or a data file: data/cuda-releases.toml
            return "no such module, folder or file"
    if not modules:
        return "no such module"
    name = attrs.split(".")[1] if attrs else ""
    if name and not any(name in _defines(REPO / m) for m in modules):
        return f"{modules[0]} defines no {name}"
    return None


def resolve_dotted(name: str) -> str | None:
    """Why the dotted *name* (a module's, maybe followed by one of its attributes) does not resolve."""
    if name in PLANTED:
        return None
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO / "src" / Path(*parts[:cut])
        module = base.with_suffix(".py")
        if base.is_dir() and (base / "__init__.py").is_file():
            module = base / "__init__.py"
        elif not module.is_file():
            continue
        rest = parts[cut:]
        if rest and rest[0] not in _defines(module):
            if (base / rest[0]).with_suffix(".py").is_file():
                continue
            return f"{module.relative_to(REPO)} defines no {rest[0]}"
        return None
    return "no such module"


def problems(text: str) -> Iterator[tuple[int, str]]:
    """(offset, reason) of each path or dotted name in *text* that does not resolve."""
    for match in _DOTTED.finditer(text):
        why = resolve_dotted(match.group(0))
        if why:
            yield match.start(), f"{match.group(0)}: {why}"
    for match in _PATH.finditer(text):
        path, attrs = match.group("path"), match.group("attrs")
        why = resolve_path(path, attrs)
        if why:
            yield match.start(), f"{path}{attrs}: {why}"
    files, _ = _index()
    for match in _BARE.finditer(text):
        name = match.group(0)
        if name not in files and name not in OTHER_PROJECTS_FILES:
            yield match.start(), f"{name}: no module of that name"


def prose_spans(source: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of every comment and docstring of a Python *source*."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            spans.append(
                (
                    starts[token.start[0] - 1] + token.start[1],
                    starts[token.end[0] - 1] + token.end[1],
                )
            )
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if ast.get_docstring(node, clean=False) is not None and first is not None:
                assert first.end_lineno is not None and first.end_col_offset is not None
                start = starts[first.lineno - 1] + first.col_offset
                spans.append((start, starts[first.end_lineno - 1] + first.end_col_offset))
    return spans


def stale_in_prose(source: str) -> list[tuple[int, str]]:
    """(line, reason) of each path in a comment or docstring of *source* that does not resolve.
    The whole text is searched first (cheap), and only a file with a stale candidate is parsed
    to keep those in its prose (a string of the code, a test's fixture path, is not prose)."""
    found = list(problems(source))
    if not found:
        return []
    spans = prose_spans(source)
    return [
        (source.count("\n", 0, offset) + 1, why)
        for offset, why in found
        if any(start <= offset < end for start, end in spans)
    ]


def python_files() -> list[Path]:
    return sorted(
        p
        for p in repo_files()
        if p.suffix == ".py" and p.relative_to(REPO).parts[0] in ("src", "tests", "tools", "bench")
    )


def test_docstrings_and_comments_name_modules_that_exist() -> None:
    stale = [
        f"{path.relative_to(REPO)}:{line}: {problem}"
        for path in python_files()
        for line, problem in stale_in_prose(path.read_text(encoding="utf-8"))
    ]
    assert stale == [], "\n".join(["docstrings or comments naming what does not exist:", *stale])


def test_architecture_md_names_modules_that_exist() -> None:
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    stale = [
        f"docs/architecture.md:{number}: {problem}"
        for number, line in enumerate(lines, 1)
        for _, problem in problems(line)
    ]
    assert stale == [], "\n".join(["docs/architecture.md names what does not exist:", *stale])


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("see toolchain/provision.py", []),
        ("see `toolchain/provisioning.py`", ["toolchain/provisioning.py: no such module"]),
        ("build/ and planning/builds/", ["planning/builds/: no such folder"]),
        ("toolchain/toolkits.release_builds", []),
        ("toolchain/toolkits.no_such_thing", ["toolchain/toolkits.no_such_thing: *"]),
        ("src/wheelforge/data/cuda-releases.toml", []),
        ("wheelforge.binaries.registry and wheelforge.binaries.rules.floor", []),
        ("wheelforge.toolchain.nowhere", ["wheelforge.toolchain.nowhere: *"]),
        ("torch/version.py, test/utils.py, https://x.org/a/b.py", []),
        ("setuppy.py reads setup.py", []),
        ("setupscan.py reads it", ["setupscan.py: no module of that name"]),
    ],
)
def test_the_resolver_tells_stale_from_true(text: str, stale: list[str]) -> None:
    found = [why for _, why in problems(text)]
    assert len(found) == len(stale), found
    for got, want in zip(found, stale, strict=True):
        assert got == want or (want.endswith("*") and got.startswith(want[:-1])), found
