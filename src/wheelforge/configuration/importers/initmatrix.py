"""``wheelforge init``: a commented matrix.yaml for an existing project, from its setup.py (read
statically, setuppy.py) and pyproject.toml, or, with no extension in a setup.py, from the
C++/CUDA sources found. What could not be translated is returned as notes to print."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelforge.configuration import abi
from wheelforge.configuration.importers.setuppy import ExtensionCall, SetupScan, scan_setup_py
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.configuration.matrix.pyproject import read_project
from wheelforge.foundation.errors import ConfigError

_STABLE_RE = re.compile(r"torch/csrc/stable/|STABLE_TORCH_LIBRARY")
_LIBRARY_RE = re.compile(r"STABLE_TORCH_LIBRARY\s*\(\s*(\w+)")
_SKIP_DIRS = {"build", "dist", "tests", "test", "docs", "examples", "benchmarks", "third_party"}
# The sources `init` looks for: SOURCE_SUFFIXES but .c (plain C files are not scanned).
_SUFFIXES = tuple(s for s in SOURCE_SUFFIXES if s != ".c")


@dataclass(frozen=True, kw_only=True)
class InitResult:
    path: Path
    text: str
    notes: tuple[str, ...]


def _dump(key: str, value: object) -> str:
    return yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=100)


def _found_sources(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in _SUFFIXES
        and p.is_file()
        and not _SKIP_DIRS & set(p.relative_to(root).parts[:-1])
    )


def _guess_extension(root: Path, notes: list[str]) -> ExtensionCall | None:
    """No setup.py extension: the sources of the one folder that registers ops."""
    sources = _found_sources(root)
    text = {p: p.read_text(encoding="utf-8", errors="replace") for p in sources}
    registering = [
        p for p in sources if _LIBRARY_RE.search(text[p]) or "PYBIND11_MODULE" in text[p]
    ]
    if not registering:
        return None
    folder = registering[0].parent
    leaf = m[1] if (m := _LIBRARY_RE.search(text[registering[0]])) else "_C"
    module = ".".join((*folder.relative_to(root).parts, leaf))
    notes.append(
        f"no CUDAExtension/CppExtension in a setup.py: extension.name '{module}' is guessed from "
        f"{registering[0].relative_to(root)} (its library name and folder); put the module where "
        "your package imports or loads it from"
    )
    rel = folder.relative_to(root).as_posix()
    suffixes = sorted({p.suffix for p in sources if p.parent == folder})
    return ExtensionCall(
        kind="guessed",
        line=0,
        name=module,
        sources=[f"{rel}/*{s}" for s in suffixes],
        include_dirs=[rel],
    )


def _abi(root: Path, ext: ExtensionCall) -> abi.Abi:
    for pattern in ext.sources:
        for path in root.glob(pattern):
            if _STABLE_RE.search(path.read_text(encoding="utf-8", errors="replace")):
                return abi.STABLE
    return abi.UNSTABLE


def _package(scan: SetupScan, root: Path, notes: list[str]) -> dict[str, object] | None:
    """The package section: none beside a pyproject.toml [project] with a static version."""
    project = read_project(root / "pyproject.toml")
    if project is not None and project.version is not None:
        return None
    args = scan.setup_args
    package: dict[str, object] = {}
    name = project.name if project else args.get("name")
    if isinstance(name, str):
        package["name"] = name
    else:
        notes.append("package.name: not found; write the distribution name")
        package["name"] = root.name
    version = args.get("version")
    if not isinstance(version, str):
        version = _dunder_version(root, str(package["name"]))
        notes.append(
            f"package.version: setup.py computes it; wrote {version} from __version__"
            if version
            else "package.version: setup.py computes it; write it here"
        )
    package["version"] = version or "0.0.0"
    for key, arg in (("summary", "description"), ("requires-python", "python_requires")):
        if isinstance(args.get(arg), str) and not project:
            package[key] = args[arg]
    deps = []
    requires = args.get("install_requires")
    for dep in requires if isinstance(requires, list) else []:
        try:
            if canonicalize_name(Requirement(str(dep)).name) != "torch":
                deps.append(str(dep))
        except InvalidRequirement:
            notes.append(f"install_requires: '{dep}' is not a requirement; left out")
    if deps and not project:
        package["dependencies"] = deps
    return package


def _dunder_version(root: Path, name: str) -> str | None:
    for init in (
        root / name.replace("-", "_") / "__init__.py",
        root / "src" / name / "__init__.py",
    ):
        if init.is_file() and (
            m := re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", init.read_text(), re.M)
        ):
            return m[1]
    return None


def render(root: Path, *, torch: tuple[str, ...], archs: str | None) -> InitResult:
    """The matrix text for the project in *root*, and what needs a hand."""
    notes: list[str] = []
    setup = root / "setup.py"
    scan = scan_setup_py(setup) if setup.is_file() else SetupScan()
    notes += scan.notes
    ext = scan.extensions[0] if scan.extensions else _guess_extension(root, notes)
    if ext is None:
        raise ConfigError(
            f"{root}: found no CUDAExtension/CppExtension in setup.py and no source that registers "
            "ops (STABLE_TORCH_LIBRARY, PYBIND11_MODULE); write matrix.yaml from docs/your-extension.md"
        )
    if len(scan.extensions) > 1:
        names = ", ".join(str(e.name) for e in scan.extensions[1:])
        notes.append(
            f"setup.py builds {len(scan.extensions)} extensions; only {ext.name} is written (also: {names})"
        )
    flavour = _abi(root, ext)
    extension: dict[str, object] = {"name": ext.name or "TODO.name", "sources": ext.sources}
    for key, value in (
        ("include-dirs", ext.include_dirs),
        ("cxx-flags", ext.cxx_flags),
        ("nvcc-flags", ext.nvcc_flags),
        ("link-flags", ext.link_flags),
        ("libraries", ext.libraries),
        ("library-dirs", ext.library_dirs),
    ):
        if value:
            extension[key] = value
    if not flavour.generates_module_init or ext.kind != "guessed":
        extension["module-init"] = flavour.generates_module_init
    versions = list(torch) or (["2.11.0"] if flavour.per_torch else [])
    if flavour.per_torch and not torch:
        notes.append("torch: wrote 2.11.0; list the torch versions to build for (or pass --torch)")
    parts = [
        f"# Written by 'wheelforge init' from {'setup.py' if scan.extensions else 'the sources'}; "
        "see docs/matrix.md and docs/your-extension.md.\n"
    ]
    package = _package(scan, root, notes)
    if package is None:
        parts.append(
            "# Name, version and the rest of the metadata come from pyproject.toml [project].\n"
        )
    else:
        parts.append(_dump("package", package))
    parts.append("\n" + _dump("extension", extension))
    if flavour.per_torch:
        parts.append(
            "\n# torch/extension.h: one build per torch version below (a CUDA build of torch).\n"
        )
        parts.append(f"abi: {flavour.name}\n" + _dump("torch", versions))
    else:
        parts.append(f"\nabi: {flavour.name}\n")
        parts.append(_dump("torch", versions[0] if len(versions) == 1 else versions or ">=2.10"))
    if archs:
        parts.append("\n" + _dump("arch-sets", {"default": archs}))
    else:
        parts.append(
            "\n# No arch-sets: give them here, or with --archs / TORCH_CUDA_ARCH_LIST.\n"
            '# arch-sets:\n#   default: "8.0 9.0+PTX"\n'
        )
    return InitResult(path=root / "matrix.yaml", text="".join(parts), notes=tuple(notes))


def write(root: Path, *, force: bool, torch: tuple[str, ...], archs: str | None) -> InitResult:
    result = render(root, torch=torch, archs=archs)
    if result.path.exists() and not force:
        raise ConfigError(f"{result.path} exists; pass --force to replace it")
    result.path.write_text(result.text, encoding="utf-8")
    return result
