"""A build removes the folders it created and left empty (a refused build leaves no empty
--out), and nothing else: folders that held something, or existed before, stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from wheelforge.build import preflight
from wheelforge.foundation import fsutil


def test_missing_top_is_the_outermost_folder_still_to_make(tmp_path: Path) -> None:
    assert fsutil.missing_top(tmp_path / "a" / "b" / "c") == tmp_path / "a"
    assert fsutil.missing_top(tmp_path) is None


def test_a_refused_build_leaves_no_folder_it_made(tmp_path: Path) -> None:
    out, build = tmp_path / "new" / "dist", tmp_path / "build" / "wheelforge"
    with pytest.raises(RuntimeError), preflight.tidy({"--out": out, "--build-dir": build}):
        out.mkdir(parents=True)
        (build / "obj").mkdir(parents=True)
        raise RuntimeError("refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_folders_that_hold_something_or_were_there_before_stay(tmp_path: Path) -> None:
    out, build = tmp_path / "dist", tmp_path / "build"
    out.mkdir()
    with preflight.tidy({"--out": out, "--build-dir": build}):
        (build / "obj" / "empty").mkdir(parents=True)
        (build / "obj" / "k.o").write_bytes(b"\x7fELF")
    assert out.is_dir()  # it existed before the build
    assert (build / "obj" / "k.o").is_file() and (build / "obj" / "empty").is_dir()


def test_a_link_is_content(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    with preflight.tidy({"--out": out}):
        out.mkdir()
        (out / "link").symlink_to(tmp_path)
    assert (out / "link").is_symlink()
