"""A setup.py whose build_ext runs a generator script and configures CMake in a folder of its own
(NATTEN 0.21's shape, tests/data/natten_like/; issue 40 item 3): init goes through the CMake door
for that folder with the -D arguments setup.py passes, runs the generator in its sandbox, packs
the packages pyproject.toml's ``[tool.setuptools]`` finds, and never writes an extension without
sources; the matrix check refuses one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests import REPO
from tests.integration.helpers import needs_local_torch_wheel, needs_nvcc, wheelforge
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.planning.selection import project_files

pytestmark = [
    needs_nvcc,
    needs_local_torch_wheel,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
]

FIXTURE = REPO / "tests" / "data" / "natten_like"


def test_a_setup_py_that_builds_with_cmake_is_adopted_through_the_cmake_door(
    tmp_path: Path,
) -> None:
    project = tmp_path / "natten_like"
    shutil.copytree(FIXTURE, project)
    run = wheelforge("init", "--torch", "2.13.0", cwd=project)
    assert run.code == 0, run.err
    assert f"configures {project / 'csrc' / 'CMakeLists.txt'}" in run.err
    # the generator ran in init's sandbox: its sources written in the project, its write
    # outside the project refused
    generated = sorted(p.name for p in (project / "csrc" / "autogen").iterdir())
    assert generated == ["scale_1.cu", "scale_2.cu"]
    assert not (tmp_path / "outside.txt").exists()
    assert f"write {tmp_path / 'outside.txt'}" in run.err

    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    ext = matrix["extension"]
    assert ext["name"] == "tinyna.libtinyna"
    assert ext["sources"] == [
        "csrc/src/ops.cpp",
        "csrc/src/kernel.cu",
        "csrc/autogen/scale_1.cu",
        "csrc/autogen/scale_2.cu",
    ]
    assert "-DTINY_SCALE=3" in ext["nvcc-flags"]  # setup.py's -D reached CMake's configure
    assert ext["include-dirs"] == ["csrc/include"]
    assert matrix["arch-sets"] == {"default": "8.0"}  # CMake's CUDA_ARCHITECTURES 80-real
    # packages.find where = ["src/"]: what setuptools' wheel packs
    assert matrix["package"]["packages"] == ["src/tinyna"]
    assert matrix["package"]["package-data"] == ["py.typed"]

    # what the wheel packs beside the extension (building it needs a CUDA torch 2.13 from PyPI)
    members = project_files(load_matrix(project / "matrix.yaml")).members
    assert sorted(m.path for m in members) == [
        "tinyna/__init__.py",
        "tinyna/ops/__init__.py",
        "tinyna/py.typed",
    ]


def test_the_matrix_check_refuses_an_extension_without_sources(tmp_path: Path) -> None:
    """NATTEN's Extension("natten.libnatten", []) as init once wrote it: ninja died on it."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "matrix.yaml").write_text(
        "package: {name: pkg, version: '1.0', packages: [pkg]}\n"
        "extension: {name: pkg._C, sources: []}\n"
        "torch: ['2.13.0']\narch-sets: {default: '8.0'}\n"
    )
    run = wheelforge("matrix", cwd=tmp_path)
    assert run.code == 2, run.out + run.err
    assert "matrix.yaml:2: extension.sources is empty; list the files the extension compiles" in (
        run.err
    )
    assert not (tmp_path / "build").exists()
