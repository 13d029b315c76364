"""A project setuptools builds as it is is adopted as it is (issue 40 item 4): simple-knn's
extension ``simple_knn._C`` lands in a folder without ``__init__.py`` (a namespace package,
PEP 420, as setuptools builds ext_modules without packages=)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError

MATRIX = """\
package:
  name: simple_knn
  version: 1.0.0
extension:
  name: simple_knn._C
  sources: [spatial.cu, simple_knn.cu, ext.cpp]
abi: unstable
torch: [2.13.0]
arch-sets:
  default: "8.0"
"""


def _simple_knn_like(root: Path) -> Path:
    for name in ("spatial.cu", "simple_knn.cu", "ext.cpp", "simple_knn/.gitkeep"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("// x\n")
    (root / "matrix.yaml").write_text(textwrap.dedent(MATRIX))
    return root / "matrix.yaml"


def test_an_extension_in_a_folder_without_init_py_is_read(tmp_path: Path) -> None:
    matrix = load_matrix(_simple_knn_like(tmp_path))
    [ext] = matrix.extensions
    assert matrix.package.packages == ()
    assert ext.wheel_path(ext.leaf) == "simple_knn/_C"


def test_a_listed_package_still_catches_a_misplaced_extension(tmp_path: Path) -> None:
    path = _simple_knn_like(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("")
    path.write_text(MATRIX.replace("  version: 1.0.0\n", "  version: 1.0.0\n  packages: [other]\n"))
    with pytest.raises(ConfigError, match=r"not inside any of package.packages \(other\)"):
        load_matrix(path)


def test_python_files_in_no_package_setuptools_packs_are_excluded(tmp_path: Path) -> None:
    """apex: find_packages() leaves out examples/ and tests without __init__.py; the packer ships
    a package folder's every module, so init writes them under package.exclude."""
    from wheelforge.adoption.doors.packagedata import unpacked_modules

    for name in (
        "apex/__init__.py",
        "apex/amp/__init__.py",
        "apex/amp/scaler.py",
        "apex/contrib/__init__.py",
        "apex/contrib/examples/run.py",  # no __init__.py: no package
        "apex/contrib/examples/sub/more.py",
        "apex/contrib/test/__init__.py",  # a package, but find_packages(exclude=...) drops it
        "apex/contrib/test/test_x.py",
        "apex/contrib/test/fused/__init__.py",  # kept: listed
        "apex/contrib/test/fused/t.py",
        "apex/contrib/stray.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    listed = ["apex", "apex.amp", "apex.contrib.test.fused"]
    assert unpacked_modules(str(tmp_path), {"apex": "apex"}, listed) == (
        "contrib/__init__.py",
        "contrib/stray.py",
        "contrib/examples/*",
        "contrib/test/__init__.py",
        "contrib/test/test_x.py",
    )
    assert unpacked_modules(str(tmp_path), {"apex": "apex"}, []) == ()  # nothing known


def test_an_extension_without_sources_is_one_line_naming_what_builds_it(tmp_path: Path) -> None:
    """NATTEN: Extension("natten.libnatten", []) built by its build_ext running autogen scripts
    and CMake in csrc/; init wrote sources: [] and ninja died on it."""
    from wheelforge.adoption.doors.setuprecord import read_record
    from wheelforge.adoption.record import childdocument

    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "CMakeLists.txt").write_text("project(natten LANGUAGES CXX CUDA)\n")
    document = {
        "setup_calls": [{"name": "natten", "version": "0.21.5"}],
        "extensions": [{"name": "natten.libnatten", "kind": "Extension", "sources": []}],
        "cmdclass": [{"name": "build_ext", "class": "BuildExtension", "where": "setup.py:380"}],
    }
    with pytest.raises(ConfigError) as err:
        read_record(tmp_path, childdocument.parse(document), front_door="setup.py")
    message = err.value.message
    assert "natten.libnatten (setup.py) lists no sources" in message
    assert "build_ext=BuildExtension (setup.py:380)" in message
    assert "csrc/CMakeLists.txt" in message
