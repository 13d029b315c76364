"""Source distributions: what goes in, PEP 625's name, and the same bytes every time."""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import REPO
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging import sdist
from wheelforge.planning import selection

from .conftest import GOOD_MATRIX

Project = Callable[..., Path]


def members(path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return tar.getmembers()


def test_sdist_carries_what_a_wheel_build_needs(project: Project, tmp_path: Path) -> None:
    root = project(GOOD_MATRIX.replace("demo-ops", "Demo.Ops")).parent
    (root / "pyproject.toml").write_text(
        '[build-system]\nbuild-backend = "wheelforge.build_meta"\n'
    )
    (root / "README.md").write_text("# demo\n")
    for junk in (
        "demo_ops/__pycache__/x.pyc",
        "demo_ops/_C.abi3.so",
        "build/wheelforge/a.o",
        "dist/old.whl",
    ):
        (root / junk).parent.mkdir(parents=True, exist_ok=True)
        (root / junk).write_text("junk")
    made = sdist.write_sdist(load_matrix(root / "matrix.yaml"), root, tmp_path / "out")
    assert made.name == "demo_ops-1.2.0.tar.gz"  # PEP 625: normalized name
    names = [m.name for m in members(made)]
    assert names == sorted(names)
    assert names == [f"demo_ops-1.2.0/{n}" for n in (
        "PKG-INFO", "README.md", "csrc/kernel.cu", "csrc/ops.cpp", "csrc/ops.h",
        "demo_ops/__init__.py", "matrix.yaml", "pyproject.toml")]  # fmt: skip
    for m in members(made):
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (315532800, 0, 0, "", "", 0o644)
    with tarfile.open(made) as tar:
        pkg_info = tar.extractfile("demo_ops-1.2.0/PKG-INFO").read().decode()  # type: ignore[union-attr]
    assert pkg_info.startswith("Metadata-Version: 2.2\nName: Demo.Ops\nVersion: 1.2.0\n")
    assert "Requires-Dist: torch>=2.10" in pkg_info
    assert not list((tmp_path / "out").glob(".*")), "temporary files left behind"


def test_same_input_same_bytes_and_source_date_epoch(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project().parent
    (root / "pyproject.toml").write_text("")
    matrix = load_matrix(root / "matrix.yaml")
    first = sdist.write_sdist(matrix, root, tmp_path / "a").read_bytes()
    (root / "csrc" / "ops.cpp").touch()  # a newer mtime changes nothing
    assert sdist.write_sdist(matrix, root, tmp_path / "b").read_bytes() == first
    assert gzip.decompress(first)  # a plain gzip stream
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    later = sdist.write_sdist(matrix, root, tmp_path / "c")
    assert {m.mtime for m in members(later)} == {1700000000}


def test_files_outside_the_project_are_refused(project: Project, tmp_path: Path) -> None:
    path = project()
    sub = path.parent / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("")
    with pytest.raises(ConfigError, match=r"lies outside .*sub, the folder of pyproject.toml"):
        selection.sdist_files(load_matrix(path), sub)


def test_the_kernels_project_sdist_lists_its_sources() -> None:
    files = dict(
        selection.sdist_files(load_matrix(REPO / "kernels" / "matrix.yaml"), REPO / "kernels")
    )
    assert {"pyproject.toml", "matrix.yaml", "csrc/norm_cuda.cu", "csrc/common.h",
            "wheelforge_kernels/__init__.py", "tests/test_ops.py"} <= set(files)  # fmt: skip
    assert not [n for n in files if n.startswith(("build/", "dist/")) or n.endswith(".so")]


def test_symlinks_agree_with_the_wheel(project: Project, tmp_path: Path) -> None:
    """A link inside the project is carried by content (the sdist skipped it, so a wheel built
    from the sdist lacked the file); one leading outside is refused, as the wheel refuses it."""
    path = project()
    root = path.parent
    (root / "pyproject.toml").write_text("")
    (root / "shared.py").write_text("X = 1\n")
    (root / "demo_ops" / "inside.py").symlink_to(root / "shared.py")
    names = [n for n, _ in selection.sdist_files(load_matrix(path), root)]
    assert "demo_ops/inside.py" in names
    outside = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    outside.write_text("secret")
    (root / "demo_ops" / "notes.py").symlink_to(outside)
    with pytest.raises(ConfigError, match=r"notes.py is a symbolic link to .*outside the project"):
        selection.sdist_files(load_matrix(path), root)
