"""The import check: before a wheel is published, import it the way its user will, in one
child process of the build Python that imported torch first (as the package's ``__init__.py``
should): the wheel installed (unpacked into a folder outside the project, put first on sys.path,
the project's own source folders taken off it), then ``import <package>`` for each top-level
package of the wheel, each extension module by its dotted name (it must be the wheel's file),
each library of operators with ``torch.ops.load_library`` and each plain library with
``ctypes.CDLL``; a wheel that cannot be imported
never reaches the output folder. The child imported torch while the build compiled
(toolchain/warmtorch.py).

Unpacking is what an install does for these wheels: ``pip install --no-deps --target`` of one
puts the same files in place (a wheelforge wheel has no ``.data`` folder and no entry points),
adding only ``.pyc`` files and its INSTALLER, and checks RECORD (check's layout rule does); on
the 2-core development machine it took 3.5 s for a one-module wheel, the unpack 40 ms."""

from __future__ import annotations

import ast
import json
import re
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelforge.binaries.symbols import demangle
from wheelforge.configuration.matrix.model import ExtensionConfig
from wheelforge.foundation import fsutil, log, proc, readers
from wheelforge.foundation.errors import VerificationError
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import probecache, torchprobe, warmtorch

_UNDEFINED_RE = re.compile(r"undefined symbol: (\S+)")
_NO_MODULE_RE = re.compile(r"No module named '([^']+)'")
_CANNOT_IMPORT_RE = re.compile(
    r"cannot import name '([^']+)' from (?:partially initialized module )?'([^']+)'"
)
# Bumped when what the check does changes: a success cached by an earlier check is not one.
_HOW = 2


def _hint(message: str, load: warmtorch.Load, plan: VariantPlan, site: Path) -> str:
    kind, name, _ = load
    leaf = name.rsplit(".", 1)[-1]
    if "does not define module export function" in message:
        return (
            f"the library has no exported PyInit_{leaf}: with module-init: false the "
            "sources must define it (PYBIND11_MODULE or PyMODINIT_FUNC)"
        )
    if match := _UNDEFINED_RE.search(message):
        what = "module" if kind == "module" else "library"
        return (
            f"{demangle(match[1])} ({match[1]}) is defined by no library the {what} loads: add "
            "the source that defines it to the extension's sources, or the library that has it "
            "to its libraries (library-dirs)"
        )
    if "not from the wheel" in message:
        return (
            f"another {name} is importable ahead of the wheel's (an editable install, a folder "
            "on PYTHONPATH): uninstall it from the build Python, or unset PYTHONPATH"
        )
    if match := _NO_MODULE_RE.search(message):
        return _missing_module(match[1], plan, site)
    if match := _CANNOT_IMPORT_RE.search(message):  # from . import _C: the name is not there
        return _missing_module(f"{match[2]}.{match[1]}", plan, site)
    return "run the same import in the build Python to see more"


def _owned(module: str, site: Path, plan: VariantPlan) -> bool:
    """Whether the wheel (unpacked at *site*) should have *module*, as the child judges it: its
    deepest parent folder there is a regular package (a namespace package's other portions are
    other distributions'), or, with none, its top-level name is the wheel's."""
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):
        folder = site.joinpath(*parts[:i])
        if folder.is_dir():
            return (folder / "__init__.py").is_file()
    tops = {f.name for f in plan.wheel.package.packages} | {
        link.extension.name.partition(".")[0] for link in plan.links
    }
    return parts[0] in tops


def _missing_module(missing: str, plan: VariantPlan, site: Path) -> str:
    """What to do about ``No module named 'missing'``: a module the wheel should carry (its
    package imports a name the matrix gave its extension otherwise: init's guess of a dotted
    path), or a module of another distribution the build Python lacks."""
    top = missing.partition(".")[0]
    if _owned(missing, site, plan):
        modules = [link.extension.name for link in plan.links if link.extension.kind == "module"]
        named = f"the matrix names its extension {', '.join(modules)}" if modules else "it lacks it"
        return (
            f"its package imports {missing}, which the wheel does not have, and {named}: name the "
            "extension by the dotted path its package imports (extensions[].name in matrix.yaml), "
            "or put that module into the package"
        )
    if _in_project(top, plan):
        return (
            f"the project has {top}, which the package imports, but the wheel does not carry it: "
            "add it to package.modules (a .py file) or package.packages in matrix.yaml"
        )
    # a distribution named as the module is (scipy), or as its namespace portion (witwin.core:
    # witwin-core)
    names = {canonicalize_name(top), canonicalize_name(missing)}
    declared = [
        dep
        for dep in plan.wheel.package.dependencies
        if canonicalize_name(Requirement(dep).name) in names
    ]
    if declared:
        return (
            f"the wheel requires it ({declared[0]}): install it into the build Python "
            f"({plan.torch.python} -m pip install '{declared[0]}') to check this import"
        )
    return (
        f"the wheel requires no distribution named {top}: if its package needs it, add it to "
        "package.dependencies (or [project] dependencies); install it into the build Python "
        f"({plan.torch.python} -m pip install ...) to check this import"
    )


def _in_project(module: str, plan: VariantPlan) -> bool:
    """Whether *module*'s top-level name is a module or package of the project's folder."""
    top = module.partition(".")[0]
    return (plan.project / f"{top}.py").is_file() or (plan.project / top / "__init__.py").is_file()


def _what(load: warmtorch.Load, site: Path) -> str:
    """What the check does with a load, in the words of its user."""
    kind, name, path = load
    if kind == "library":
        return f"torch.ops.load_library('{path.relative_to(site).as_posix()}')"
    if kind == "plain":
        return f"ctypes.CDLL('{path.relative_to(site).as_posix()}')"
    return f"import {name}"


def top_level(names: list[str]) -> list[str]:
    """The top-level packages and Python modules of a wheel with these member names (what
    ``import`` can name: a folder or a ``.py`` file whose name is an identifier, not the
    .dist-info, .data or a repaired wheel's ``.libs`` folder); its shared objects are loaded
    as the plan names them."""
    found: dict[str, None] = {}
    for name in names:
        first, sep, _ = name.partition("/")
        if sep and first.isidentifier():
            found[first] = None
        elif not sep and first.endswith(".py") and first[:-3].isidentifier():
            found[first[:-3]] = None
    return sorted(found)


def check_import(
    wheel: Path, plan: VariantPlan, *, cache_dir: Path | None = None
) -> tuple[str, ...]:
    """Import the wheel under *plan*'s build torch, as its user does, in one warm child that
    imported torch first (toolchain/warmtorch.py): each top-level package by name, each
    extension module by its dotted name, each library with torch.ops.load_library; returns
    what ran, one line each, or raises VerificationError with the first failing import's
    message. A success is remembered in *cache_dir* for these wheel bytes and this torch while
    the files torch's probe watches are unchanged: a fresh clone that builds the same wheel does
    not import it again."""
    key = {
        "how": _HOW,
        "wheel": fsutil.sha256(wheel),
        "loads": [[link.extension.kind, link.extension.name] for link in plan.links],
        **torchprobe.probe_key(plan.torch.python),
    }
    found = probecache.lookup(cache_dir, "import-check", key, {"ran": [str]})
    if found is not None:
        return tuple(found["ran"])
    done = _import(wheel, plan)
    # Nothing to watch: nothing that says when the verdict goes stale; an import not checked, or
    # checked without its package's __init__ (a dependency the build Python lacks), is no
    # verdict to keep: its warning is said again on the next build.
    partial = any(" not checked " in line or "__init__ skipped" in line for line in done)
    if plan.torch.watch and not partial:
        probecache.store(cache_dir, "import-check", key, {"ran": list(done)}, plan.torch.watch)
    return done


def _extensions(plan: VariantPlan) -> list[ExtensionConfig]:
    return [link.extension for link in plan.links if link.extension.kind == "module"]


def _source_roots(plan: VariantPlan) -> list[Path]:
    """Where the project's sources are importable from: its folder, and the folder each of its
    packages and top-level modules lies in (src/ of a src layout)."""
    package = plan.wheel.package
    return [plan.project, *(p.parent for p in (*package.packages, *package.modules))]


def _import(wheel: Path, plan: VariantPlan) -> tuple[str, ...]:
    python = plan.torch.python
    # Outside the project (the temporary folder's), so no path into its sources is involved.
    with tempfile.TemporaryDirectory(prefix="wheelforge-import-") as tmp:
        site = Path(tmp) / "site"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
            names = zf.namelist()
        loads: list[warmtorch.Load] = [("package", name, site / name) for name in top_level(names)]
        # Then the shared objects in the plan's order; a top-level extension module is
        # imported once, as an extension (its file checked).
        loads = [load for load in loads if load[1] not in {e.name for e in _extensions(plan)}]
        loads += [
            (link.extension.kind, link.extension.name, site / link.wheel_path)
            for link in plan.links
        ]
        result = warmtorch.import_modules(python, site, loads, hide=_source_roots(plan))
        return _verdict(result, loads, plan, site)


def _verdict(
    result: proc.Result, loads: list[warmtorch.Load], plan: VariantPlan, site: Path
) -> tuple[str, ...]:
    """What the child answered: an import that failed for the wheel's sake stops the variant;
    one that needs a module of another distribution the build Python lacks says so (a
    warning: nothing is known of the wheel), and its extension modules were imported all the
    same, their packages' __init__ skipped."""
    python, label = plan.torch.python, plan.torch.label
    lines = result.stdout.strip().splitlines()
    try:
        answers = json.loads(lines[-1]) if lines else None
    except ValueError:
        answers = None
    if not isinstance(answers, list) or len(answers) != len(loads):
        # The child died (or printed something else last): name the first import.
        error = lines[-1] if lines else "the child process printed nothing"
        if result.returncode != 0:
            error = f"the child process exited with code {result.returncode}"
        answers = [{"said": error, "missing": None, "ok": False}, *([None] * (len(loads) - 1))]
    done = []
    for load, answer in zip(loads, answers, strict=True):
        what = _what(load, site)
        if answer is None:
            done.append(f"{what} ok under torch {label}")
            continue
        said = str(answer.get("said") or proc.tail(result.stderr) or "no message")
        missing = answer.get("missing")
        ok = bool(answer.get("ok"))
        if missing and _in_project(missing, plan):  # the project's own: the wheel lacks it
            ok, missing = False, None
        if ok:
            log.warning(
                f"variant {plan.variant.id}: import check: '{what}' imported with its "
                f"packages' __init__ skipped: {said.splitlines()[0]}; "
                f"{_missing_module(str(missing), plan, site)}"
            )
            done.append(
                f"{what} ok under torch {label} (its package's __init__ skipped: no {missing})"
            )
        elif missing:
            log.warning(
                f"variant {plan.variant.id}: import check: '{what}' not checked: "
                f"{said.splitlines()[0]}; {_missing_module(missing, plan, site)}"
            )
            done.append(f"{what} not checked under torch {label}: the build Python lacks {missing}")
        else:
            raise VerificationError(
                f"variant {plan.variant.id}: '{what}' fails under torch {label} ({python}): "
                f"{said.splitlines()[0]}; {_hint(said, load, plan, site)}. The wheel was not "
                "published (--no-import-check skips this)",
                details=proc.tail(result.stderr) or None,
            )
    if result.returncode != 0:
        raise VerificationError(
            f"variant {plan.variant.id}: importing the wheel under torch "
            f"{label} ended with exit code {result.returncode} ({python}); "
            "The wheel was not published (--no-import-check skips this)",
            details=proc.tail(result.stderr) or None,
        )
    return tuple(done)


def warn_if_torch_not_imported_first(plan: VariantPlan) -> None:
    """The package's ``__init__.py`` must import torch before an extension: the module needs
    libc10.so and friends, which only an imported torch makes loadable. Read with ``ast``."""
    for link in plan.links:
        if link.extension.kind == "module":
            _warn_for(link.extension, plan)


def _warn_for(ext: ExtensionConfig, plan: VariantPlan) -> None:
    """A module inside a package is checked in its package's ``__init__.py``; a top-level one
    (fast_rnnt's ``_fast_rnnt``, imported by ``fast_rnnt/__init__.py``) in every package's."""
    if "." in ext.name:
        parent = ext.name.rsplit(".", 1)[0]
        inits = [
            (folder.parent / parent.replace(".", "/") / "__init__.py", parent)
            for folder in plan.wheel.package.packages
            if folder.name == parent.split(".")[0]
        ][:1]
    else:
        inits = [(folder / "__init__.py", folder.name) for folder in plan.wheel.package.packages]
    for init, package in inits:
        if _warned(init, package, ext):
            return


def _warned(init: Path, package: str, ext: ExtensionConfig) -> bool:
    if not init.is_file():
        return False
    try:
        tree = ast.parse(readers.read_text(init, cap=readers.CONFIG_CAP))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError, readers.FileRefused):
        return False
    for node in tree.body:
        names = _imported(node)
        if "torch" in names:
            return False
        if ext.leaf in names or ext.name in names:
            log.warning(
                f"{init} imports {ext.name} before torch: 'import {package}' will fail "
                "with 'libc10.so: cannot open shared object file'; put 'import torch' first"
            )
            return True
    return False


def _imported(node: ast.stmt) -> set[str]:
    """Module names a top-level statement imports (``from . import _C`` gives ``_C``)."""
    if isinstance(node, ast.Import):
        return {"torch" if a.name.split(".")[0] == "torch" else a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if not node.level and module.split(".")[0] == "torch":
            return {"torch"}
        return {module, module.rsplit(".", 1)[-1], *(a.name for a in node.names)} - {""}
    return set()
