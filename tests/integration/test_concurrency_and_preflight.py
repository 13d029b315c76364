"""Two builds into one build folder (the lock), output folders that can't be written (the
preflight) and a --python that is no Python, with the real tools."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import needs_nvcc, wheelforge
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.packaging import provenance

pytestmark = needs_nvcc

# A compiler launcher that holds the first compile while the file $WF_HOLD exists.
HOLDING_CXX = """\
#!/bin/sh
if [ -e "$WF_HOLD" ]; then : > "$WF_HOLD.started"; while [ -e "$WF_HOLD" ]; do sleep 0.1; done; fi
exec "$@"
"""


def tiny(root: Path) -> Path:
    (root / "pkg" / "tiny").mkdir(parents=True)
    (root / "pkg" / "tiny" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "a.cpp").write_text("int a() { return 1; }\n")
    (root / "csrc" / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (root / "matrix.yaml").write_text(
        "package: {name: tiny, version: '1.0', packages: [pkg/tiny]}\n"
        "extension: {name: tiny._C, sources: ['csrc/*.cpp', 'csrc/*.cu']}\n"
        "torch: '>=2.10'\narch-sets: '7.5'\n"
    )
    return root


def test_a_second_build_waits_for_the_first_or_fails_fast(tmp_path: Path) -> None:
    root = tiny(tmp_path / "project")
    launcher = tmp_path / "holdcxx"
    launcher.write_text(HOLDING_CXX)
    launcher.chmod(0o755)
    hold = tmp_path / "hold"
    hold.touch()
    env = {**os.environ, "CXX": f"{launcher} c++", "WF_HOLD": str(hold)}

    def start(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "wheelforge", "build", *extra], cwd=root, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    first = start()
    deadline = time.monotonic() + 120
    while not Path(f"{hold}.started").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    fast = start("--no-wait")
    _, err = fast.communicate(timeout=120)
    assert fast.returncode == EnvironmentProblem.exit_code, err
    assert "is in use by another wheelforge" in err and "--no-wait" in err
    second = start()
    deadline = time.monotonic() + 120
    lock_note = "waiting for another wheelforge that is using the build folder"
    waited = ""
    while lock_note not in waited:  # the note comes before the wait, so it can be read now
        assert time.monotonic() < deadline and second.poll() is None
        waited += second.stderr.readline() if second.stderr else ""
    hold.unlink()
    _, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    _, second_err = second.communicate(timeout=600)
    assert second.returncode == 0, waited + second_err
    assert "nothing to compile: up to date" in second_err and "is up to date" in second_err
    assert "same name, other content" not in first_err + second_err
    (wheel,) = (root / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
    check = wheelforge("check", wheel, cwd=root)
    assert check.code == 0, check.err


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", folder], check=False)


def test_full_out_folder_is_one_line_before_compiling(tmp_path: Path) -> None:
    root = tiny(tmp_path / "project")
    with tmpfs(tmp_path / "full", "64k") as full:
        run = wheelforge("build", "--out", full / "dist", cwd=root)
    assert run.code == EnvironmentProblem.exit_code, run.err
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, run.err
    assert errors[0].startswith(f"error: --out {full / 'dist'}: cannot write there: ")
    assert "No space left on device" in errors[0]
    assert "compile" not in run.err
    assert not (root / "build" / "wheelforge" / "default-cu130").exists()
    assert not (full / "dist").exists()  # made by the probe, removed with the refusal


def test_python_that_is_not_a_python_is_named(tmp_path: Path) -> None:
    root = tiny(tmp_path / "project")
    run = wheelforge("build", "--python", "/bin/true", cwd=root)
    assert run.code == EnvironmentProblem.exit_code, run.err
    assert "error: /bin/true printed nothing when asked for its torch's details" in run.err
    assert "compile" not in run.err
    assert not (root / "dist").exists()  # the output folder preflight made is gone again


def test_two_builds_from_two_build_folders_never_replace_each_others_wheel(tmp_path: Path) -> None:
    """Issue 32: the out-folder guard looked for the other variant's stamp in its own build
    folder only, so a build from another --build-dir (or one racing it) replaced the wheel with
    a warning. Two builds of other arch sets, started together into one --out: one publishes,
    the other is refused in one line, and the wheel left is the first's, whole."""
    root = tiny(tmp_path / "project")
    out = tmp_path / "dist"

    def start(archs: str, build: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "wheelforge", "build", "--archs", archs, "--out", str(out),
             "--build-dir", str(tmp_path / build)],
            cwd=root, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    builds = {"7.5": start("7.5", "build-a"), "8.0": start("8.0", "build-b")}
    ended = {archs: (p.wait(timeout=600), p.communicate()[1]) for archs, p in builds.items()}
    codes = sorted(code for code, _ in ended.values())
    assert codes == [0, 2], ended
    (winner,) = [archs for archs, (code, _) in ended.items() if code == 0]
    (refused_err,) = [err for code, err in ended.values() if code == 2]
    errors = [line for line in refused_err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, refused_err
    assert f"(arch set {winner}), built from another build folder" in errors[0]
    (wheel,) = out.glob("*.whl")
    check = wheelforge("check", wheel, cwd=root)
    assert check.code == 0, check.err
    assert provenance.published_variant(wheel) == (f"sm{winner.replace('.', '')}-cu130", winner)
    # The nested folders are refused before anything is built.
    nested = wheelforge("build", "--out", tmp_path / "build-a" / "dist", "--build-dir",
                        tmp_path / "build-a", cwd=root)  # fmt: skip
    assert nested.code == 2 and "lies inside --build-dir" in nested.err, nested.err
