"""Clear diagnoses (issue 21): a project path with ':' or '$', a read-only ccache folder, a full
disk. Each used to read "compiling op.cpp failed" (or a 600-character command), the cause only
in the details."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from wheelforge.build import ninja
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import proc
from wheelforge.toolchain import compilecache

from .fakes import plan_for


@pytest.mark.parametrize("folder", ["a:b", "d$x", "${HOME}"])
def test_ccache_gets_no_base_folder_it_would_misread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CCACHE_BASEDIR", raising=False)
    monkeypatch.setattr(compilecache.proc, "run", lambda *a, **k: SimpleNamespace(stdout="/c"))
    cache = compilecache.CompileCache(tool="ccache", exe=Path("/bin/true"), base=tmp_path / folder)
    with compilecache.session(cache, tmp_path) as (env, _):
        assert env["CCACHE_BASEDIR"] == ""
    assert "which ccache reads as a list or a variable" in capsys.readouterr().err


def test_ccache_that_cannot_write_its_folder_is_left_out_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")  # below a file: no folder can be made there, not even by root
    where = blocked / "ccache"
    monkeypatch.setattr(
        compilecache.proc, "run", lambda *a, **k: SimpleNamespace(stdout=str(where))
    )
    cache = compilecache.CompileCache(tool="ccache", exe=Path("/bin/true"), base=tmp_path)
    with compilecache.session(cache, tmp_path) as (env, _):
        assert env["CCACHE_DISABLE"] == "1"
    assert f"ccache cannot write its cache folder {where}" in capsys.readouterr().err


def test_a_full_disk_is_said_in_the_one_line(project: object, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)  # type: ignore[operator]
    step = plan.compile.steps[0]
    output = (
        f"[wheelforge 1/3] NVCC x\nFAILED: {plan.command_path(step.object)}\n"
        "cc1plus: fatal error: cannot write: No space left on device\n"
    )
    error = ninja._failure(plan, output)
    assert "failed: the disk is full (No space left on device)" in error.message
    assert proc.known_cause("x: Disk quota exceeded") == "the disk quota is exceeded"
    assert proc.known_cause("all fine") is None
