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

from wheelforge.configuration.matrix.pyproject import load_toml
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


def unpacked_modules(
    root: str, folders: Mapping[str, str], packages: Iterable[str]
) -> tuple[str, ...]:
    """``exclude`` globs (relative to the package folders) for the Python files of *folders*
    (top-level package name → its folder) that lie in none of *packages*, setup()'s full list:
    the packer ships a package folder's every module, setuptools only its packages' own (apex's
    examples and tests). A folder whose whole tree is in no package is one glob (``tests/*``);
    otherwise each file by its name."""
    listed = set(packages)
    if not listed:
        return ()
    out: list[str] = []
    for name, folder in sorted(folders.items()):
        modules: dict[str, list[str]] = {}  # folder (relative, "." the top) -> its modules
        base = fsutil.resolved(Path(root, folder))
        for here, dirs, names in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            rel = Path(here).relative_to(base).as_posix()
            modules[rel] = sorted(n for n in names if n.endswith(_MODULE_SUFFIXES))
        dotted = {rel: name if rel == "." else f"{name}.{rel.replace('/', '.')}" for rel in modules}
        out += _unpacked(".", modules, {r for r, d in dotted.items() if d in listed})
    return tuple(dict.fromkeys(out))


def _unpacked(rel: str, modules: Mapping[str, list[str]], packed: set[str]) -> list[str]:
    tree = [d for d in modules if rel in (".", d) or d.startswith(f"{rel}/")]
    if not any(modules[d] for d in tree):
        return []
    if rel != "." and not any(d in packed for d in tree):
        return [f"{glob.escape(rel)}/*"]
    out: list[str] = []
    if rel not in packed:
        prefix = "" if rel == "." else f"{rel}/"
        out += [glob.escape(f"{prefix}{n}") for n in modules[rel]]
    for sub in sorted(d for d in modules if d != rel and Path(d).parent.as_posix() == rel):
        out += _unpacked(sub, modules, packed)
    return out


def pyproject_package_data(root: Path, tops: Iterable[str]) -> tuple[str, ...]:
    """``package-data`` globs for what pyproject.toml's ``[tool.setuptools] package-data``
    ships from the packages under the folders *tops* (relative to *root*), read without
    setup.py (the CMake door): its ``"*"`` globs in every package, a package's own in it, as
    setuptools' build_py matches them; the files there now, as the setup.py door lists them."""
    tool = (load_toml(root / "pyproject.toml") or {}).get("tool")
    setuptools = tool.get("setuptools") if isinstance(tool, dict) else None
    spec = setuptools.get("package-data") if isinstance(setuptools, dict) else None
    if not isinstance(spec, dict):
        return ()
    folders = {top.replace("/", "."): top for top in tops if (root / top / "__init__.py").is_file()}
    files: list[str] = []
    for top in folders.values():
        for here, dirs, names in os.walk(root / top):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            if "__init__.py" not in names:
                dirs[:] = []  # not a package: setuptools' find stops here
                continue
            package = Path(here).relative_to(root).as_posix().replace("/", ".")
            for key in ("*", "", package):
                for pattern in spec.get(key) or ():
                    for found in sorted(glob.glob(os.path.join(here, str(pattern)))):  # noqa: PTH118, PTH207
                        if os.path.isfile(found):  # noqa: PTH113
                            files.append(Path(found).relative_to(root).as_posix())
    return package_data_globs(str(root), folders, dict.fromkeys(files))[0]
