"""The project's tests, for matrix.yaml's ``tests`` section: where they are, what they import
(read with ast) and how pytest must import them so that the installed wheel is tested, not the
sources beside them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.configuration.matrix.model import DEFAULT_TEST_COMMAND
from wheelforge.foundation import readers


def find_tests(root: Path) -> str | None:
    """The project's test folder: tests/ or test/, else one a level or two down
    (fast_rnnt/python/tests), else "." when test files sit beside setup.py (FlashAttention-3)."""
    for name in ("tests", "test"):
        if (root / name).is_dir():
            return name
    for pattern in ("*/tests", "*/test", "*/*/tests", "*/*/test"):
        for folder in sorted(root.glob(pattern)):
            if folder.is_dir() and "build" not in folder.parts and any(folder.glob("*.py")):
                return folder.relative_to(root).as_posix()
    return "." if any(root.glob("test_*.py")) else None


# Test imports whose distribution init names without asking: the common ones of ML test suites,
# by import name. Any other import is left for the user to name (an unknown name may be some
# other project's on PyPI).
KNOWN_TEST_DISTRIBUTIONS = {
    "einops": "einops",
    "scipy": "scipy",
    "pandas": "pandas",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "datasets": "datasets",
    "safetensors": "safetensors",
    "huggingface_hub": "huggingface-hub",
    "hypothesis": "hypothesis",
    "parameterized": "parameterized",
    "expecttest": "expecttest",
    "packaging": "packaging",
    "tqdm": "tqdm",
    "matplotlib": "matplotlib",
    "tabulate": "tabulate",
    "absl": "absl-py",
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "numpy": "numpy",
}
_NOT_REQUIREMENTS = {"torch", "pytest", "triton"}  # torch's own, or the runner


_OPTIONAL = ("ImportError", "ModuleNotFoundError", "Exception")


def _optional(tree: ast.AST) -> set[int]:
    """The imports a ``try`` guards (``except ImportError``): the tests run without them."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            h.type is None or any(n in ast.unparse(h.type) for n in _OPTIONAL)
            for h in node.handlers
        ):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return guarded


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    return []


def test_imports(root: Path, tests: str, build: CapturedBuild) -> list[str]:
    """What the test files import from outside the project, the standard library and torch
    (read with ast): each a requirement of the test environment."""
    folder = root / tests
    files = sorted(folder.glob("test_*.py") if tests == "." else folder.rglob("*.py"))[:200]
    local = (
        {p.stem for p in [*root.glob("*.py"), *folder.rglob("*.py")]}
        | {Path(p).name for p in build.packages}
        | {str(e.name).split(".")[0] for e in build.extensions if e.name}
    )
    local |= {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    local |= {folder.name, *(p.name for p in folder.rglob("*") if p.is_dir())}
    found: dict[str, None] = {}
    for path in files:
        try:
            tree = ast.parse(readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace"))
        except SyntaxError:
            continue
        optional = _optional(tree)
        # A name the file imports under a guard is optional everywhere in it (fast_rnnt imports
        # torchaudio again in the tests its guard's flag enables).
        guarded = {
            n.split(".")[0]
            for node in ast.walk(tree)
            if id(node) in optional
            for n in _imported(node)
        }
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            for name in _imported(node):
                top = name.split(".")[0]
                if top in guarded:
                    continue
                if top not in sys.stdlib_module_names | local | _NOT_REQUIREMENTS:
                    found[top] = None
    return sorted(found)


def _is_requirement(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def _requirements(build: CapturedBuild, tests: str, hand: list[str], done: list[str]) -> list[str]:
    """What the tests import, as requirements: the project's own requirement when it names the
    distribution, else a well-known one; the rest needs a hand."""
    meta = build.metadata
    named = {
        canonicalize_name(Requirement(r).name): r
        for r in (*meta.dependencies, *(r for _, rs in meta.extras for r in rs))
        if _is_requirement(r)
    }
    installed = {
        canonicalize_name(Requirement(d).name) for d in meta.dependencies if _is_requirement(d)
    }
    found, unknown = [], []
    for name in test_imports(build.root, tests, build):
        dist = named.get(canonicalize_name(name)) or KNOWN_TEST_DISTRIBUTIONS.get(name)
        if dist is None:
            unknown.append(name)
        elif canonicalize_name(Requirement(dist).name) not in installed:
            found.append(dist)
    if found:
        done.append(f"tests.requires: {', '.join(found)}, which the tests import")
    if unknown:
        hand.append(
            f"tests: they import {', '.join(unknown)}; add the distributions that provide them "
            "to tests.requires"
        )
    return found


def tests_section(
    build: CapturedBuild, hand: list[str], done: list[str]
) -> dict[str, object] | None:
    """matrix.yaml's tests section for the project's tests, or None without any."""
    tests = build.tests
    if tests is None:
        return None
    section: dict[str, object] = {
        "path": tests,
        "requires": ["pytest", *_requirements(build, tests, hand, done)],
    }
    if tests == ".":
        # The test files sit beside the package's source folder: pytest's default import mode
        # would put that folder first on sys.path and import the package from the sources (no
        # compiled module there) instead of the installed wheel.
        command = list(DEFAULT_TEST_COMMAND)
        command.insert(command.index("--junitxml={junitxml}"), "--import-mode=append")
        section["command"] = command
        done.append(
            "tests: the test files sit in the project folder beside the package's sources; "
            "the command imports them with --import-mode=append, so the installed wheel comes first"
        )
    return section
