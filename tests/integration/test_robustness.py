"""Issue 21 with real processes: every tool call has a deadline and an output cap, a toolkit the
environment names is never silently replaced by another, and a build's leftovers of killed runs
are swept. The tools are small shell scripts in a temporary folder; the CLI runs in-process so
the deadlines can be made short (proc.PROBE_S)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wheelforge.cli.app import main
from wheelforge.foundation import proc

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")

NVCC = {
    "garbage": "echo 'Cuda compiler driver, release banana'",
    "segfault": "kill -SEGV $$",
    "silent": "exit 0",
    "hang": "exec sleep 600",
    "chatty": "exec yes 'nvcc: still talking'",
    # issue 39: a release, then no arch (or garbage) for --list-gpu-code: a toolkit that builds
    # nothing was passed over for a CUDA 13.5 download
    "no-archs": 'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88";; esac',
    "garbage-archs": 'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88";;'
    " --list-gpu-code) echo 'sm_banana compute_xx';; esac",
}


def _tool(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, [ln for ln in err.splitlines() if ln.startswith("error:")], err


@pytest.mark.parametrize("kind", list(NVCC))
def test_a_broken_cuda_home_is_an_error_never_a_fallback(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: its probe failed, discover() moved on to /usr/local/cuda, and the build exited 0."""
    monkeypatch.setattr(proc, "PROBE_S", 3.0)
    monkeypatch.setattr(proc, "OUTPUT_CAP", 1 << 20)
    _tool(tmp_path / "cuda", "bin/nvcc", NVCC[kind])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    code, errors, err = _run(["toolkit", "list", "--cache-dir", str(tmp_path / "cache")], capsys)
    assert code == 2, err
    assert len(errors) == 1 and f"CUDA_HOME={tmp_path / 'cuda'}: its bin/nvcc" in errors[0], err
    if kind == "hang":
        assert "did not finish within 3 s" in errors[0]
    if kind == "chatty":
        assert "printed more than 1 MiB" in errors[0]
    if kind.endswith("archs"):
        assert "--list-gpu-code listed no sm_ code" in errors[0]


def test_a_compiler_that_hangs_on_dumpversion_meets_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(proc, "PROBE_S", 40.0)  # torch's import, a probe too, must fit in it
    cxx = _tool(
        tmp_path / "bin", "g++", 'case "$1" in -dumpversion) exec sleep 600;; esac\nexec c++ "$@"'
    )
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    (tmp_path / "p" / "demo").mkdir(parents=True)
    (tmp_path / "p" / "demo" / "__init__.py").write_text("")
    (tmp_path / "p" / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "p" / "matrix.yaml").write_text(
        "package: {name: demo, version: '1.0', packages: [demo]}\n"
        "extension: {name: demo._C, sources: [k.cu]}\ntorch: '>=2.10'\narch-sets: '8.0'\n"
    )
    code, errors, err = _run(
        [
            "build",
            "--dry-run",
            "--matrix",
            str(tmp_path / "p" / "matrix.yaml"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capsys,
    )
    assert code == 3, err
    assert len(errors) == 1 and "g++ did not finish within 40 s" in errors[0], err


def test_deadline_and_cap_of_the_one_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheelforge.foundation.errors import ToolError

    hang = _tool(tmp_path, "hang", "exec sleep 600")
    with pytest.raises(ToolError, match="did not finish within 1 s"):
        proc.run([hang], hint="-", timeout=1.0)
    chatty = _tool(tmp_path, "chatty", "exec yes")
    monkeypatch.setattr(proc, "OUTPUT_CAP", 1 << 20)
    with pytest.raises(ToolError, match="printed more than 1 MiB"):
        proc.run([chatty], hint="-", timeout=60.0)
    full = _tool(tmp_path, "full", "echo 'write: No space left on device' >&2; exit 1")
    with pytest.raises(
        ToolError, match=r"full failed with exit code 1: the disk is full"
    ) as caught:
        proc.run([full, *["--a-long-argument"] * 40], hint="-", timeout=60.0)
    assert len(caught.value.message) < 300 and "--a-long-argument" in (caught.value.details or "")
    lines: list[str] = []
    noline = _tool(tmp_path, "noline", "head -c 3000000 /dev/zero | tr '\\0' x")
    result = proc.stream([noline], hint="-", on_line=lines.append, timeout=60.0)
    assert result.returncode == 0 and len(lines) == 3  # cut at LINE_CAP, never one endless line


# --- issue 32: the toolkit is never silently replaced ---------------------------------------------
_MATRIX = (
    "package: {name: demo, version: '1.0', packages: [demo]}\n"
    "extension: {name: demo._C, sources: [k.cu]}\ntorch: '>=2.10'\narch-sets: '8.0'\n"
)


def _project(root: Path) -> Path:
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "k.cu").write_text("__global__ void k() {}\n")
    (root / "matrix.yaml").write_text(_MATRIX)
    return root / "matrix.yaml"


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every provisioning a build attempts, recorded and stopped before anything is fetched;
    the toolkits of the machine's usual folders are hidden, so without the user's toolkit
    a build would provision one."""
    from functools import partial

    from wheelforge.foundation.errors import ToolError
    from wheelforge.toolchain import provision
    from wheelforge.toolchain import toolkits as toolkit

    attempts: list[str] = []

    def fetch(recipe: provision.Recipe, prefix: Path, fetched: Path) -> dict[str, object]:
        attempts.append(recipe.release)
        raise ToolError(f"test: provisioning CUDA {recipe.release} was attempted")

    monkeypatch.setattr(provision, "_fetch", fetch)
    monkeypatch.setattr(toolkit, "discover", partial(toolkit.discover, globs=()))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    return attempts


def _build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    matrix = _project(tmp_path / "p")
    argv = ["build", "--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache")]
    return _run([*argv, "--no-import-check"], capsys)


@pytest.mark.parametrize("kind", ["garbage", "segfault", "silent", "hang", "fails"])
def test_a_broken_nvcc_on_the_path_is_an_error_never_a_download(
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    downloads: list[str],
) -> None:
    """Before: its probe failed, discovery skipped it without a word, found nothing else, and
    the build provisioned CUDA 13 from PyPI."""
    monkeypatch.setattr(proc, "PROBE_S", 3.0)
    body = {**NVCC, "fails": "echo 'nvcc: cannot load libnvvm' >&2; exit 1"}[kind]
    nvcc = _tool(tmp_path / "bin", "nvcc", body)
    monkeypatch.setenv("PATH", f"{nvcc.parent}:/usr/bin:/bin")
    code, errors, err = _build(tmp_path, capsys)
    assert downloads == [], err
    assert code == 2, err
    assert len(errors) == 1 and f"the nvcc on PATH, {nvcc}, does not answer" in errors[0], err
    assert "take its folder off PATH" in errors[0]


def test_a_path_nvcc_that_cannot_run_is_an_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    downloads: list[str],
) -> None:
    nvcc = _tool(tmp_path / "bin", "nvcc", "exit 0")
    nvcc.chmod(0o644)
    monkeypatch.setenv("PATH", f"{nvcc.parent}:/usr/bin:/bin")
    code, errors, err = _build(tmp_path, capsys)
    assert downloads == [] and code == 2, err
    assert len(errors) == 1 and f"{nvcc}, is not executable" in errors[0], err


def test_a_shadowed_broken_nvcc_is_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The nvcc the shell runs works; a broken one later on PATH is named, then left out."""
    broken = _tool(tmp_path / "later", "nvcc", "exit 1")
    real = Path(shutil.which("nvcc") or "")
    monkeypatch.setenv("PATH", f"{real.parent}:{broken.parent}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    code, errors, err = _run(["toolkit", "list", "--cache-dir", str(tmp_path / "cache")], capsys)
    assert code == 0 and not errors, err
    assert f"skipped the nvcc at {broken} (found by PATH)" in " ".join(err.split()), err


@pytest.mark.parametrize("kind", ["missing", "a file", "relative"])
def test_an_unusable_tmpdir_is_named_before_any_download(
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    downloads: list[str],
) -> None:
    """Before: nvcc fails even --list-gpu-code without a temporary folder, so the machine's
    toolkit (the real nvcc on PATH here) looked broken and the build provisioned another."""
    real = Path(shutil.which("nvcc") or "")
    monkeypatch.setenv("PATH", f"{real.parent}:/usr/bin:/bin")
    (tmp_path / "file").write_text("")
    value = {"missing": str(tmp_path / "gone"), "a file": str(tmp_path / "file")}
    monkeypatch.setenv("TMPDIR", value.get(kind, "relative/tmp"))
    code, errors, err = _build(tmp_path, capsys)
    assert downloads == [] and code == 2, err
    assert len(errors) == 1 and errors[0].startswith(
        f"error: TMPDIR={value.get(kind, 'relative/tmp')}"
    ), err


def test_provisioning_says_why_before_it_downloads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    downloads: list[str],
) -> None:
    """Nothing found and the matrix needs a release: the one case that provisions, said first."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    _, _, err = _build(tmp_path, capsys)
    assert len(downloads) == 1, err
    said = " ".join(err.split())
    assert "which no toolkit found builds (found: none): provisioning CUDA" in said, err
    assert said.index("provisioning CUDA") < said.index("test: provisioning"), err


@pytest.mark.parametrize("kind", ["garbage", "hang", "no-archs", "garbage-archs"])
def test_a_broken_cuda_home_fails_the_build_before_any_download(
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    downloads: list[str],
) -> None:
    """The build, not only `toolkit list`: the recorder of provisioning stays empty."""
    monkeypatch.setattr(proc, "PROBE_S", 3.0)
    _tool(tmp_path / "cuda", "bin/nvcc", NVCC[kind])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    code, errors, err = _build(tmp_path, capsys)
    assert downloads == [] and code == 2, err
    assert len(errors) == 1 and f"CUDA_HOME={tmp_path / 'cuda'}: its bin/nvcc" in errors[0], err
