"""Issue 32: the toolkit a user points to is never silently replaced, and an unusable temporary
folder is named before any tool runs (no process starts here: nvcc's answers come from a fake
probe, the temporary folder's write probe from a fake where a failure is needed)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.foundation import proc, writers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, ToolError
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.toolkits import Toolkit


def _nvcc(folder: Path, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvcc").write_text("#!/bin/sh\n")
    (folder / "nvcc").chmod(mode)
    return folder / "nvcc"


def _probe(broken: set[Path]):  # type: ignore[no-untyped-def]
    def probe(nvcc: Path, *, origin: str = "", host_cxx: Path | None = None, cache: Path | None = None) -> Toolkit:  # fmt: skip
        if nvcc in broken:
            raise ToolError(f"{nvcc} --version printed no CUDA release; is it a real nvcc?")
        return Toolkit(nvcc=nvcc, root=nvcc.parent.parent, version=Version("13.0.88"),
                       sass=frozenset({80}), cudart_static=None, origin=origin)  # fmt: skip

    return probe


def test_the_nvcc_path_runs_is_named_when_its_probe_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = _nvcc(tmp_path / "bin")
    monkeypatch.setattr(toolkit, "probe_toolkit", _probe({bad}))
    with pytest.raises(ConfigError, match=r"the nvcc on PATH, .*/bin/nvcc, does not answer"):
        toolkit.discover({"PATH": str(bad.parent)}, globs=())


def test_a_later_broken_nvcc_or_one_beside_cuda_home_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = _nvcc(tmp_path / "good" / "bin"), _nvcc(tmp_path / "bad" / "bin")
    monkeypatch.setattr(toolkit, "probe_toolkit", _probe({bad}))
    found = toolkit.discover({"PATH": f"{good.parent}:{bad.parent}"}, globs=())
    assert [t.nvcc for t in found] == [good]
    home = {"CUDA_HOME": str(good.parent.parent), "PATH": str(bad.parent)}
    assert [t.nvcc for t in toolkit.discover(home, globs=())] == [good]
    err = " ".join(capsys.readouterr().err.split())
    assert err.count(f"skipped the nvcc at {bad} (found by PATH)") == 2, err


def test_a_path_whose_only_nvcc_cannot_run_is_refused(tmp_path: Path) -> None:
    nvcc = _nvcc(tmp_path / "bin", 0o644)
    with pytest.raises(ConfigError, match="is not executable; make it executable"):
        toolkit.discover({"PATH": str(nvcc.parent)}, globs=())
    assert toolkit.path_nvcc({"PATH": ""}) is None


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("{tmp}/gone", "No such file or directory"),
        ("{tmp}/file", "is not a folder"),
        ("rel/tmp", "is a relative path"),
    ],
)
def test_a_tmpdir_that_is_no_folder_is_a_config_error(
    value: str, needle: str, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    tmpdir = value.replace("{tmp}", str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        proc.check_temp_folder({"TMPDIR": tmpdir})
    assert caught.value.message.startswith(f"TMPDIR={tmpdir}") and needle in caught.value.message
    assert "set TMPDIR to a folder you can write to" in caught.value.message


@pytest.mark.parametrize(
    ("code", "needle"),
    [(errno.ENOSPC, "the file system is full"), (errno.EACCES, "Permission denied")],
)
def test_a_tmpdir_that_cannot_be_written_is_an_environment_problem(
    code: int, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full file system or one this user cannot write (root writes a 0555 folder anyway,
    so the write probe's failure comes from a fake)."""

    def probe(folder: Path, size: int) -> None:
        raise OSError(code, errno.errorcode[code] if code != errno.EACCES else "Permission denied")

    monkeypatch.setattr(writers, "probe", probe)
    monkeypatch.setattr(proc, "_TEMP_OK", set())
    with pytest.raises(EnvironmentProblem, match=needle) as caught:
        proc.check_temp_folder({"TMPDIR": str(tmp_path)})
    assert caught.value.message.startswith(f"TMPDIR={tmp_path}: cannot write a temporary file")
    with pytest.raises(EnvironmentProblem, match=r"^/tmp \(TMPDIR is not set\)"):
        proc.check_temp_folder({})


def test_a_usable_tmpdir_is_probed_once_and_left_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes: list[Path] = []
    real = writers.probe
    monkeypatch.setattr(writers, "probe", lambda f, n: (probes.append(f), real(f, n)))
    monkeypatch.setattr(proc, "_TEMP_OK", set())
    for _ in range(3):
        proc.check_temp_folder({"TMPDIR": str(tmp_path)})
    assert probes == [tmp_path] and list(tmp_path.iterdir()) == []
