"""The package data setuptools would ship (the files its build_py lists: capture_packagedata.py)
written as matrix.yaml's ``package-data``: globs relative to the package folders. A folder all
of whose files are shipped is one glob (``hadamard/*``: the packer's ``*`` reaches into
subfolders, as MANIFEST.in's ``recursive-include`` does); otherwise each file by its name. The
Python files are left out: the packer ships every ``.py``/``.pyi`` of a package folder anyway."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from wheelforge.foundation import fsutil

# What the packer never ships, whatever the globs (packaging/wheel.py), nor counts here.
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_MODULE_SUFFIXES = (".py", ".pyi")


def _tree(folder: str) -> list[str]:
    """The files under *folder* the packer would look at, relative to it (posix)."""
    out = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in names:
            if not name.endswith(_SKIP_SUFFIXES + _MODULE_SUFFIXES):
                out.append(Path(here, name).relative_to(folder).as_posix())
    return out


def _globs(present: list[str], shipped: set[str], under: str = "") -> list[str]:
    """The fewest globs (whole folders, else names) that match exactly *shipped* of *present*
    (both relative to the package folder) in the folder *under*."""
    prefix = f"{under}/" if under else ""
    here = [p for p in present if p.startswith(prefix)]
    if under and here and all(p in shipped for p in here):
        return [f"{glob.escape(under)}/*"]
    out = [glob.escape(p) for p in here if "/" not in p[len(prefix) :] and p in shipped]
    subfolders = sorted(
        {p[len(prefix) :].split("/", 1)[0] for p in here if "/" in p[len(prefix) :]}
    )
    for sub in subfolders:
        out += _globs(present, shipped, f"{prefix}{sub}")
    return out


def package_data_globs(
    root: str, folders: Mapping[str, str], files: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(``package-data`` globs, the files of *files* that lie in none of *folders*). *folders*:
    package name → its folder relative to *root*; *files*: relative to *root*, posix."""
    shipped: dict[str, set[str]] = {}
    elsewhere: list[str] = []
    tops = sorted(set(folders.values()), key=len, reverse=True)
    for file in files:
        top = next((t for t in tops if file.startswith(f"{t}/") or t == "."), None)
        if top is None:
            elsewhere.append(file)
            continue
        rel = file if top == "." else file[len(top) + 1 :]
        if not rel.endswith(_MODULE_SUFFIXES):
            shipped.setdefault(top, set()).add(rel)
    out: list[str] = []
    for top, names in sorted(shipped.items()):
        present = _tree(str(fsutil.resolved(Path(root, top))))
        out += _globs(sorted(set(present) | names), names)
    return tuple(dict.fromkeys(out)), tuple(elsewhere)
