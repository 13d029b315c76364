"""The package data setuptools itself would put into the wheel, asked of setuptools in init's
setup.py child (setup_child.py): the project's setup() arguments (``packages``,
``package_dir``, ``package_data``, ``exclude_package_data``, ``include_package_data``, the
extensions' sources) with setup.cfg and pyproject.toml read as setup() reads them, then
setuptools' own ``build_py.data_files``. With ``include_package_data`` that runs ``egg_info``,
which reads MANIFEST.in exactly as a wheel build does (exllamav2's ``recursive-include
exllamav2 *`` ships ``hadamard/*.txt`` and the extension's sources); its egg-info is written
into a temporary folder, never into the project.

Left out: the files a version-control plugin adds to the manifest (setuptools-scm's ``git
ls-files``): the child runs no git command that lists files, and a project relying on them says
so in MANIFEST.in or package_data. Like setup_child.py, it imports nothing from wheelforge.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

# The setup() arguments that decide which package data build_py ships.
_KEYS = (
    "name",
    "version",
    "packages",
    "package_dir",
    "package_data",
    "exclude_package_data",
    "include_package_data",
    "py_modules",
)


@contextlib.contextmanager
def _no_file_finders() -> Iterator[None]:
    """egg_info asks the ``setuptools.file_finders`` plugins (setuptools-scm runs git) for
    files: none here (see the module's docstring)."""
    egg_info: Any = importlib.import_module("setuptools.command.egg_info")
    saved = egg_info.walk_revctrl
    egg_info.walk_revctrl = lambda dirname="": iter(())
    try:
        yield
    finally:
        egg_info.walk_revctrl = saved


def _build_py_data_files(given: dict[str, Any], scratch: str) -> list[Any]:
    """build_py's data_files for setup(**given) in the current folder, egg-info in *scratch*."""
    dist = importlib.import_module("setuptools.dist").Distribution(given)
    dist.script_name = "setup.py"
    dist.script_args = []
    with contextlib.suppress(Exception):  # a config setup() would refuse: setup.py's error
        dist.parse_config_files()
    egg_info = dist.get_command_obj("egg_info")
    egg_info.egg_base = scratch
    build_py = dist.get_command_obj("build_py")
    # setuptools' notes (a package absent from `packages`, an unmatched exclude) and
    # egg_info's progress are its own build's to print, not init's.
    with (
        _no_file_finders(),
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        build_py.ensure_finalized()
        return list(build_py.data_files)


def configured_packages(attrs: dict[str, Any], root: str) -> dict[str, Any]:
    """``packages`` and ``package_dir`` as setuptools ends up with them once it has read
    pyproject.toml's ``[tool.setuptools]`` and setup.cfg's ``[options]`` over setup()'s own
    arguments: pyproject.toml's win (bitsandbytes' ``packages.find include = ["bitsandbytes*"]``
    over setup.py's ``find_packages()``, which finds its tests too), setup.cfg's fill what
    setup() leaves out (NATTEN's ``packages.find where = ["src/"]``). Empty when that is what
    setup() gave, or nothing."""
    keys = ("name", "version", "packages", "package_dir", "py_modules")
    given = {k: attrs[k] for k in keys if attrs.get(k)}
    dist = importlib.import_module("setuptools.dist").Distribution(given)
    dist.script_name = "setup.py"
    dist.script_args = []
    cwd = os.getcwd()  # noqa: PTH109
    try:
        os.chdir(root)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            dist.parse_config_files()
    finally:
        os.chdir(cwd)
    out: dict[str, Any] = {}
    if dist.packages and list(dist.packages) != list(given.get("packages") or ()):
        out["packages"] = list(dist.packages)
        if dist.package_dir:
            out["package_dir"] = {k: v.rstrip("/") or "." for k, v in dist.package_dir.items()}
    return out


def data_files(attrs: dict[str, Any], extensions: list[Any], root: str) -> list[str]:
    """The package data files (paths relative to *root*, posix) that setuptools' build_py
    would ship for setup(**attrs) with *extensions*; raises what setuptools raises."""
    extension: Any = importlib.import_module("setuptools").Extension

    given = {k: attrs[k] for k in _KEYS if k in attrs}
    given["ext_modules"] = [
        extension(str(getattr(e, "name", "ext")), list(getattr(e, "sources", None) or []))
        for e in extensions
    ]
    cwd = os.getcwd()  # noqa: PTH109 - plain os calls: this file runs in the child, any Python
    with tempfile.TemporaryDirectory(prefix="wheelforge-egg-info-") as scratch:
        try:
            os.chdir(root)
            found = _build_py_data_files(given, scratch)
        finally:
            os.chdir(cwd)
    out = {
        os.path.relpath(os.path.join(root, src_dir, name), root).replace(os.sep, "/")  # noqa: PTH118
        for _package, src_dir, _build_dir, names in found
        for name in names
    }
    return sorted(out)
