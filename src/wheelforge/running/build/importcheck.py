"""The import check: before a wheel is published, load its extension module the way Python will,
in a child process of the build Python (torch imported first, as the package's ``__init__.py``
should), so a wheel that cannot be imported never reaches the output folder. The child imported
torch while the build compiled (toolchain/warmtorch.py)."""

from __future__ import annotations

import ast
import json
import re
import tempfile
import zipfile
from pathlib import Path

from wheelforge.binaries.abicheck import demangle
from wheelforge.foundation import log, proc
from wheelforge.foundation.errors import VerificationError
from wheelforge.packaging import stamp
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import probecache, torchprobe, warmtorch

_UNDEFINED_RE = re.compile(r"undefined symbol: (\S+)")


def _hint(message: str, plan: VariantPlan) -> str:
    leaf = plan.wheel.extension.leaf
    if "does not define module export function" in message:
        return (
            f"the library has no exported PyInit_{leaf}: with extension.module-init: false the "
            "sources must define it (PYBIND11_MODULE or PyMODINIT_FUNC)"
        )
    if match := _UNDEFINED_RE.search(message):
        return (
            f"{demangle(match[1])} is defined by no library the module loads: add the library that "
            "has it (extension.libraries, extension.library-dirs) or the source that defines it"
        )
    return "run the same import in the build Python to see more"


def check_import(wheel: Path, plan: VariantPlan, *, cache_dir: Path | None = None) -> str:
    """Import the wheel's extension module under *plan*'s build torch (in a warm child that
    imported torch first: toolchain/warmtorch.py); returns what ran, or raises
    VerificationError with the loader's message. A success is remembered in *cache_dir* for these
    wheel bytes and this torch while the files torch's probe watches are unchanged: a fresh
    clone that builds the same wheel does not import it again."""
    module = plan.wheel.extension.name
    key = {
        "wheel": stamp.sha256(wheel),
        "module": module,
        **torchprobe.probe_key(plan.torch.python),
    }
    found = probecache.lookup(cache_dir, "import-check", key)
    if found is not None and isinstance(found.get("ran"), str):
        return str(found["ran"])
    ran = _import(wheel, plan, module)
    if plan.torch.watch:  # nothing to watch: nothing that says when the verdict goes stale
        probecache.store(cache_dir, "import-check", key, {"ran": ran}, plan.torch.watch)
    return ran


def _import(wheel: Path, plan: VariantPlan, module: str) -> str:
    python = plan.torch.python
    with tempfile.TemporaryDirectory(prefix="import-", dir=plan.build_dir) as tmp:
        site = Path(tmp) / "site"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
        result = warmtorch.import_module(python, module, site / plan.wheel.library_path)
    lines = result.stdout.strip().splitlines()
    try:
        error = json.loads(lines[-1]) if lines else "the child process printed nothing"
    except ValueError:
        error = lines[-1]
    if result.returncode != 0 and error is None:
        error = f"the child process exited with code {result.returncode}"
    if result.returncode != 0 or error is not None:
        detail = str(error or proc.tail(result.stderr))
        raise VerificationError(
            f"variant {plan.variant.id}: 'import {module}' fails under torch {plan.torch.label} "
            f"({python}): {detail.splitlines()[0] if detail else 'no message'}; "
            f"{_hint(detail, plan)}. The wheel was not published (--no-import-check skips this)",
            details=proc.tail(result.stderr) or None,
        )
    return f"import {module} ok under torch {plan.torch.label}"


def warn_if_torch_not_imported_first(plan: VariantPlan) -> None:
    """The package's ``__init__.py`` must import torch before the extension: the module needs
    libc10.so and friends, which only an imported torch makes loadable. Read with ``ast``."""
    ext = plan.wheel.extension
    if "." not in ext.name:
        return
    parent = ext.name.rsplit(".", 1)[0]
    init = next(
        (
            folder.parent / parent.replace(".", "/") / "__init__.py"
            for folder in plan.wheel.package.packages
            if folder.name == parent.split(".")[0]
        ),
        None,
    )
    if init is None or not init.is_file():
        return
    try:
        tree = ast.parse(init.read_text(encoding="utf-8"))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return
    for node in tree.body:
        names = _imported(node)
        if "torch" in names:
            return
        if ext.leaf in names or ext.name in names:
            log.warning(
                f"{init} imports {ext.name} before torch: 'import {parent}' will fail with "
                "'libc10.so: cannot open shared object file'; put 'import torch' first"
            )
            return


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
