"""Package data and license files as setuptools ships them (issue 32): the license files its
default globs find land under .dist-info/licenses/ with License-File headers; the data files its
build_py lists become package-data globs the packer ships exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from packaging.metadata import Metadata

from wheelforge.adoption.doors.packagedata import package_data_globs
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.packaging import wheel
from wheelforge.planning import selection

from .conftest import GOOD_MATRIX
from .fakes import built_contents, plan_for

Project = Callable[..., Path]


def contents(matrix: Path, tmp_path: Path) -> wheel.WheelContents:
    return built_contents(plan_for(load_matrix(matrix), tmp_path))


def test_license_files_by_setuptools_default_globs(project: Project, tmp_path: Path) -> None:
    """LICEN[CS]E*, COPYING*, NOTICE*, AUTHORS* at the project's top (setuptools'
    Distribution._finalize_license_files), in its order, editor backups left out."""
    for name in ("LICENSE", "LICENCE.md", "COPYING.LESSER", "NOTICE", "AUTHORS.rst", "LICENSE~",
                 "docs/LICENSE", "README.md"):  # fmt: skip
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(f"{name}\n")
    made = contents(project(GOOD_MATRIX), tmp_path)
    licenses = [arc for arc, _ in made.files if "/licenses/" in arc]
    base = "demo_ops-1.2.0.dist-info/licenses/"
    assert licenses == sorted(base + n for n in ("LICENSE", "LICENCE.md", "COPYING.LESSER", "NOTICE", "AUTHORS.rst"))  # fmt: skip
    meta = Metadata.from_email(made.metadata)  # validates: License-File needs 2.4
    assert meta.metadata_version == "2.4"
    assert meta.license_files == [
        "LICENCE.md",
        "LICENSE",
        "COPYING.LESSER",
        "NOTICE",
        "AUTHORS.rst",
    ]
    files = dict(selection.sdist_files(load_matrix(tmp_path / "matrix.yaml"), tmp_path))
    assert {"LICENCE.md", "COPYING.LESSER", "AUTHORS.rst"} <= set(files)


def test_no_license_file_keeps_metadata_as_it_was(project: Project, tmp_path: Path) -> None:
    made = contents(project(GOOD_MATRIX), tmp_path)
    assert "Metadata-Version: 2.1\n" in made.metadata and "License-File" not in made.metadata
    assert not [arc for arc, _ in made.files if "/licenses/" in arc]


def test_license_files_given_in_pyproject_replace_the_defaults(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "LICENSE").write_text("MIT\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo-ops"\nversion = "1.2.0"\nlicense-files = []\n'
    )
    made = contents(
        project(GOOD_MATRIX.replace("  name: demo-ops\n  version: 1.2.0\n", "")), tmp_path
    )
    assert not [arc for arc, _ in made.files if "/licenses/" in arc]


def test_shipped_files_become_the_fewest_exact_globs(tmp_path: Path) -> None:
    for name in ("pkg/__init__.py", "pkg/py.typed", "pkg/hadamard/h_1.txt", "pkg/hadamard/h_2.txt",
                 "pkg/hadamard/deep/x.bin", "pkg/ext/a.cpp", "pkg/ext/dni_skip.md", "pkg/odd[1].dat",
                 "pkg/mod.py", "other/data.txt"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    shipped = ["pkg/py.typed", "pkg/hadamard/h_1.txt", "pkg/hadamard/h_2.txt",
               "pkg/hadamard/deep/x.bin", "pkg/ext/a.cpp", "pkg/odd[1].dat", "pkg/mod.py",
               "other/data.txt"]  # fmt: skip
    globs, elsewhere = package_data_globs(str(tmp_path), {"pkg": "pkg"}, shipped)
    assert set(globs) == {"py.typed", "hadamard/*", "ext/a.cpp", "odd[[]1].dat"}
    assert elsewhere == ("other/data.txt",)
    found = selection.package_members(tmp_path / "pkg", data=globs, exclude=(), project=tmp_path)
    members = {member.path for member in found}
    assert members == {"pkg/__init__.py", "pkg/mod.py", *shipped[:-2]}
