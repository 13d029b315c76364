"""The import check: before a wheel is published, load each of its shared objects the way its
user will, in one child process of the build Python (torch imported first, as the package's
``__init__.py`` should): a module by ``import``, a library of operators by
``torch.ops.load_library``, a plain library with ``ctypes.CDLL``; a wheel that cannot be loaded never reaches the output folder. The
child imported torch while the build compiled (toolchain/warmtorch.py)."""

from __future__ import annotations

import ast
import json
import re
import tempfile
import zipfile
from pathlib import Path

from wheelforge.binaries.symbols import demangle
from wheelforge.configuration.matrix.model import ExtensionConfig
from wheelforge.foundation import fsutil, log, proc, readers
from wheelforge.foundation.errors import VerificationError
from wheelforge.planning.plan import LinkPlan, VariantPlan
from wheelforge.toolchain import probecache, torchprobe, warmtorch

_UNDEFINED_RE = re.compile(r"undefined symbol: (\S+)")


def _hint(message: str, link: LinkPlan) -> str:
    leaf = link.extension.leaf
    if "does not define module export function" in message:
        return (
            f"the library has no exported PyInit_{leaf}: with module-init: false the "
            "sources must define it (PYBIND11_MODULE or PyMODINIT_FUNC)"
        )
    if match := _UNDEFINED_RE.search(message):
        what = "module" if link.extension.kind == "module" else "library"
        return (
            f"{demangle(match[1])} ({match[1]}) is defined by no library the {what} loads: add "
            "the source that defines it to the extension's sources, or the library that has it "
            "to its libraries (library-dirs)"
        )
    return "run the same import in the build Python to see more"


def _what(link: LinkPlan) -> str:
    """What the check does with a shared object, in the words of its user."""
    if link.extension.kind == "library":
        return f"torch.ops.load_library('{link.wheel_path}')"
    if link.extension.kind == "plain":
        return f"ctypes.CDLL('{link.wheel_path}')"
    return f"import {link.extension.name}"


def check_import(
    wheel: Path, plan: VariantPlan, *, cache_dir: Path | None = None
) -> tuple[str, ...]:
    """Load every shared object of the wheel under *plan*'s build torch, in one warm child that
    imported torch first (toolchain/warmtorch.py): a module imported by name, a library with
    torch.ops.load_library; returns what ran, one line each, or raises VerificationError with
    the first failing loader's message. A success is remembered in *cache_dir* for these wheel
    bytes and this torch while the files torch's probe watches are unchanged: a fresh clone
    that builds the same wheel does not import it again."""
    key = {
        "wheel": fsutil.sha256(wheel),
        "loads": [[link.extension.kind, link.extension.name] for link in plan.links],
        **torchprobe.probe_key(plan.torch.python),
    }
    found = probecache.lookup(cache_dir, "import-check", key, {"ran": [str]})
    if found is not None:
        return tuple(found["ran"])
    done = _import(wheel, plan)
    if plan.torch.watch:  # nothing to watch: nothing that says when the verdict goes stale
        probecache.store(cache_dir, "import-check", key, {"ran": list(done)}, plan.torch.watch)
    return done


def _import(wheel: Path, plan: VariantPlan) -> tuple[str, ...]:
    python = plan.torch.python
    with tempfile.TemporaryDirectory(prefix="import-", dir=plan.build_dir) as tmp:
        site = Path(tmp) / "site"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
        loads = [
            (link.extension.kind, link.extension.name, site / link.wheel_path)
            for link in plan.links
        ]
        result = warmtorch.import_modules(python, loads)
    lines = result.stdout.strip().splitlines()
    try:
        answers = json.loads(lines[-1]) if lines else None
    except ValueError:
        answers = None
    if not isinstance(answers, list) or len(answers) != len(plan.links):
        # The child died (or printed something else last): name the first shared object.
        error = lines[-1] if lines else "the child process printed nothing"
        if result.returncode != 0:
            error = f"the child process exited with code {result.returncode}"
        answers = [error, *([None] * (len(plan.links) - 1))]
    for link, error in zip(plan.links, answers, strict=True):
        if error is None:
            continue
        detail = str(error or proc.tail(result.stderr))
        raise VerificationError(
            f"variant {plan.variant.id}: '{_what(link)}' fails under torch {plan.torch.label} "
            f"({python}): {detail.splitlines()[0] if detail else 'no message'}; "
            f"{_hint(detail, link)}. The wheel was not published (--no-import-check skips this)",
            details=proc.tail(result.stderr) or None,
        )
    if result.returncode != 0:
        raise VerificationError(
            f"variant {plan.variant.id}: loading the wheel's shared objects under torch "
            f"{plan.torch.label} ended with exit code {result.returncode} ({python}); "
            "The wheel was not published (--no-import-check skips this)",
            details=proc.tail(result.stderr) or None,
        )
    return tuple(f"{_what(link)} ok under torch {plan.torch.label}" for link in plan.links)


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
