"""pyproject.toml [project] fields listed as dynamic, read from where the backend takes them
(configuration/matrix/dynamic.py); setuptools' own METADATA is compared in
tests/integration/test_dynamic_metadata.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.matrix.pyproject import read_project
from wheelforge.foundation.errors import ConfigError


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "pyproject.toml"


def test_scikit_build_core_regex_provider(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [project]
                name = "bnb-like"
                dynamic = ["version"]
                [tool.scikit-build.metadata.version]
                provider = "scikit_build_core.metadata.regex"
                input = "pkg/__init__.py"
                """,
            "pkg/__init__.py": '__version__: str = "0.49.0.dev0"\n',
        },
    )
    meta = read_project(path)
    assert meta is not None and meta.version == "0.49.0.dev0"
    assert dict(meta.dynamic_sources)["version"].endswith("[tool.scikit-build.metadata.version]")


def test_hatch_version_path(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [project]
                name = "h"
                dynamic = ["version"]
                [tool.hatch.version]
                path = "src/h/about.py"
                """,
            "src/h/about.py": "VERSION = 'v1.0.3'\n",
        },
    )
    meta = read_project(path)
    assert meta is not None and meta.version == "1.0.3"


def test_an_attr_that_is_not_a_literal_is_named(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [project]
                name = "a"
                dynamic = ["version"]
                [tool.setuptools.dynamic]
                version = {attr = "a.__version__"}
                """,
            "a/__init__.py": "__version__ = compute()\n",
        },
    )
    with pytest.raises(ConfigError, match=r"does not assign __version__ a literal string"):
        read_project(path)


def test_a_version_setup_py_computes_is_asked_of_matrix_yaml_by_key(tmp_path: Path) -> None:
    """NATTEN: dynamic = ["version"], setup.py reads its version file and adds a label."""
    _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [project]
                name = "natten-like"
                dynamic = ["version"]
                [build-system]
                requires = ["setuptools >= 64", "torch"]
                """,
            "setup.py": "from setuptools import setup\nsetup(version=get_version())\n",
            "csrc/k.cu": "// k\n",
            "matrix.yaml": """\
                extension:
                  name: natten_like._C
                  sources: [csrc/*.cu]
                torch: ">=2.10"
                arch-sets:
                  default: "8.0"
                """,
        },
    )
    (tmp_path / "natten_like").mkdir()
    (tmp_path / "natten_like" / "__init__.py").write_text("")
    with pytest.raises(ConfigError) as err:
        load_matrix(tmp_path / "matrix.yaml")
    text = str(err.value.message)
    assert "package needs 'version'" in text and "write 'version: ...' under package" in text
    (tmp_path / "matrix.yaml").write_text(
        (tmp_path / "matrix.yaml").read_text() + "package:\n  version: 0.21.5\n"
    )
    assert load_matrix(tmp_path / "matrix.yaml").package.version == "0.21.5"


def test_setup_cfg_gives_what_it_names_and_matrix_yaml_the_rest(tmp_path: Path) -> None:
    """A project without [project] whose setup.cfg names it: its [metadata] is read; a key it
    does not give (classifiers here) may be in matrix.yaml, one it gives may not."""
    _write(
        tmp_path,
        {
            "setup.cfg": """\
                [metadata]
                name = cfg-named
                description = from setup.cfg
                keywords = a, b
                """,
            "csrc/k.cu": "// k\n",
            "cfg_named/__init__.py": "",
            "matrix.yaml": """\
                package:
                  version: 1.0.0
                  classifiers: ["Programming Language :: Python :: 3"]
                extension:
                  name: cfg_named._C
                  sources: [csrc/k.cu]
                torch: ">=2.10"
                arch-sets:
                  default: "8.0"
                """,
        },
    )
    package = load_matrix(tmp_path / "matrix.yaml").package
    assert (package.name, package.summary) == ("cfg-named", "from setup.cfg")
    assert ("Keywords", "a,b") in package.extra_metadata
    assert package.classifiers == ("Programming Language :: Python :: 3",)
    text = (
        (tmp_path / "matrix.yaml")
        .read_text()
        .replace('classifiers: ["Programming Language :: Python :: 3"]', "keywords: [c]")
    )
    (tmp_path / "matrix.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_matrix(tmp_path / "matrix.yaml")
    found = f"{err.value.message}\n{err.value.details}"
    assert "package.keywords: setup.cfg [metadata] gives the metadata" in found


@pytest.mark.parametrize(
    ("setup_py", "version"),
    [
        ("setup(version=get_vllm_version(), ext_modules=[])\n", None),
        ("import setuptools\nsetuptools.setup(version='1.0+cu130')\n", None),
        ("kw = {'version': v()}\nsetup(**kw)\n", None),
        ("kw = dict(name='n')\nkw['version'] = v()\nsetup(**kw)\n", None),
        ("setup(**dict(version=v()))\n", None),
        ("setup(version=None)\n", "0.0.1"),  # none given: setuptools-scm's
        ("setup(name='vllm-like')\n", "0.0.1"),
    ],
)
def test_a_version_setup_py_passes_comes_before_setuptools_scm(
    tmp_path: Path, setup_py: str, version: str | None
) -> None:
    """vLLM 0.34.0: setup(version=get_vllm_version()) beside [tool.setuptools_scm]: setuptools-scm
    sets the version only where setup() gives none, so matrix.yaml keeps setup()'s."""
    pytest.importorskip("setuptools_scm")
    path = _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [build-system]
                requires = ["setuptools>=77", "setuptools-scm>=8"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "vllm-like"
                dynamic = ["version"]
                [tool.setuptools_scm]
                fallback_version = "0.0.1"
                """,
            "setup.py": "from setuptools import setup\n" + setup_py,
        },
    )
    meta = read_project(path)
    assert meta is not None and meta.version == version
    assert ("version" in meta.unresolved) is (version is None)


def test_a_setup_py_version_under_another_backend_is_not_taken(tmp_path: Path) -> None:
    """scikit-build-core runs no setup.py: its provider's version stands."""
    path = _write(
        tmp_path,
        {
            "pyproject.toml": """\
                [build-system]
                build-backend = "scikit_build_core.build"
                [project]
                name = "s"
                dynamic = ["version"]
                [tool.scikit-build.metadata.version]
                provider = "scikit_build_core.metadata.regex"
                input = "s/__init__.py"
                """,
            "s/__init__.py": '__version__ = "2.0"\n',
            "setup.py": "from setuptools import setup\nsetup(version='9')\n",
        },
    )
    meta = read_project(path)
    assert meta is not None and meta.version == "2.0"
