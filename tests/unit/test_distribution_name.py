"""The name wheelforge is published under (`wheelforge` on PyPI is another project): one owner,
src/wheelforge/__init__.py DISTRIBUTION, and every place that names the distribution (the
pyproject, its self-referring extras, the backend's `requires`, `pip install` in the docs and
the CI recipes) says the same. The command and the import package stay `wheelforge`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import REPO
from wheelforge import DISTRIBUTION, build_meta

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# The old name used as a distribution: `pip install wheelforge`, 'wheelforge[cache]',
# requires = ["wheelforge"]. (`wheelforge build`, `python -m wheelforge`, wheelforge.build_meta
# are the command and the module, and stay.)
OLD_NAME = (
    re.compile(r"""pip3? install (?:-\S+ )*['"]?wheelforge(?![-\w.])"""),
    re.compile(r"""(?<![-\w])wheelforge\["""),
    re.compile(r"""requires\s*=\s*\[[^\]]*['"]wheelforge['"]"""),
)
TEXTS = ("README.md", "pyproject.toml", "docs", "kernels", ".ci", "src", "bench", "tools")


def _pyproject(path: Path) -> dict[str, object]:
    with path.open("rb") as f:
        return tomllib.load(f)


def _texts() -> list[Path]:
    found = []
    for name in TEXTS:
        path = REPO / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        found += [
            p
            for p in files
            if p.suffix in {".md", ".toml", ".py", ".yaml", ".yml", ""}
            and not any(part.endswith(".egg-info") or part == "__pycache__" for part in p.parts)
        ]
    return found


def test_pyproject_declares_the_distribution_name() -> None:
    project = _pyproject(REPO / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    assert project["name"] == DISTRIBUTION
    # The quick no-op asks first (cli/entry.py), then cli.main
    assert project["scripts"] == {"wheelforge": "wheelforge.cli.entry:main"}


def test_extras_refer_to_the_project_by_its_name() -> None:
    project = _pyproject(REPO / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    own = {canonicalize_name(DISTRIBUTION), "wheelforge"}
    selves = [
        req
        for extra in project["optional-dependencies"].values()
        for req in map(Requirement, extra)
        if canonicalize_name(req.name) in own
    ]
    assert selves, "the test and dev extras pull in other extras of this project"
    assert all(req.name == DISTRIBUTION for req in selves), selves


def test_the_backends_requires_names_the_distribution() -> None:
    """What a project writes in [build-system] requires to get wheelforge.build_meta."""
    kernels = _pyproject(REPO / "kernels" / "pyproject.toml")["build-system"]
    assert isinstance(kernels, dict)
    assert kernels["requires"] == [DISTRIBUTION]
    assert kernels["build-backend"] == build_meta.__name__
    for documented in (build_meta.__doc__ or "", (REPO / "docs" / "packaging.md").read_text()):
        assert re.search(rf'requires = \["{DISTRIBUTION}"\]', documented), documented[:400]


def test_no_text_names_the_old_distribution() -> None:
    found = [
        f"{path.relative_to(REPO)}:{text[: m.start()].count(chr(10)) + 1}: {m[0]}"
        for path in _texts()
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for pattern in OLD_NAME
        for m in pattern.finditer(text)
    ]
    assert found == [], f"write {DISTRIBUTION} (wheelforge on PyPI is another project): {found}"


@pytest.mark.parametrize(
    "text",
    [
        "pip install wheelforge",
        "pip install -q 'wheelforge[cache]'",
        'requires = ["wheelforge"]',
        'requires = ["setuptools", "wheelforge"]',
    ],
)
def test_the_scan_sees_the_old_name(text: str) -> None:
    assert any(p.search(text) for p in OLD_NAME)


@pytest.mark.parametrize(
    "text",
    [
        f"pip install {DISTRIBUTION}",
        f"pip install '{DISTRIBUTION}[cache]'",
        f'requires = ["{DISTRIBUTION}"]',
        "pip install wheelforge_kernels-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl",
        "python -m wheelforge build",
    ],
)
def test_the_scan_passes_the_new_name_and_the_command(text: str) -> None:
    assert not any(p.search(text) for p in OLD_NAME)
