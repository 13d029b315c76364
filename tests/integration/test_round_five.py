"""Issue 39's tracebacks and screens that need real processes: each hostile fixture made here
gives one ``error:`` line with its class's exit code, or the right answer."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import needs_nvcc, one_kernel_project, wheelforge


def _read_only(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m wheelforge ARGS`` with *folder* mounted read-only over itself (EROFS, even
    for root), in a user and mount namespace of its own."""
    script = 'mount --bind -o ro "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, str(folder), sys.executable, "-m", "wheelforge",
         *args],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    script = 'mount --bind -o ro "$0" "$0" && mount -o remount,bind,ro "$0" && ! touch "$0/x"'
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, str(probe)], capture_output=True)
    return done.returncode == 0


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (("cache", "prune", "--all"), "cache prune"),
        (("cache", "prune", "--unused-for", "0"), "cache prune"),
        (("toolkit", "install", "13.0"), "provisioning CUDA 13.0"),
    ],
)
def test_a_read_only_cache_is_one_line_naming_it(
    tmp_path: Path, args: tuple[str, ...], what: str
) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("no user and mount namespaces here (unshare -rm)")
    cache = tmp_path / "cache"
    entry = cache / "repairs" / ("0" * 32)
    entry.mkdir(parents=True)
    (entry / "x.whl").write_bytes(b"PK")
    done = _read_only(cache, *args, "--cache-dir", str(cache))
    assert "Traceback" not in done.stderr, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        f"error: {what}: cannot write in the cache {cache}: "
        + (f"{entry}" if what == "cache prune" else f"{cache / 'toolkits'}")
        + ": Read-only file system; make it writable (remount it read-write, or fix its "
        "permissions), or give --cache-dir a folder you can write"
    ], done.stderr
    assert done.returncode == 5
    assert (entry / "x.whl").read_bytes() == b"PK"  # nothing removed, nothing half-removed


def test_init_of_a_setup_py_passing_a_value_100000_deep(tmp_path: Path) -> None:
    """setup(keywords=<a list 100,000 deep>): init writes its matrix (the child's repr of the
    value was a RecursionError, shown as a 30-line traceback)."""
    root = tmp_path / "deep"
    (root / "deep").mkdir(parents=True)
    (root / "deep" / "__init__.py").write_text("")
    (root / "k.cu").write_text("__global__ void k() {}\n")
    (root / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "x = []\n"
        "for _ in range(100000):\n"
        "    x = [x]\n"
        "setup(name='deep', version='1.0', packages=['deep'], keywords=x,\n"
        "      ext_modules=[CUDAExtension('deep._C', ['k.cu'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n"
    )
    run = wheelforge("init", root, cwd=tmp_path)
    assert run.code == 0, run.err
    assert "RecursionError" not in run.out + run.err
    assert "deep._C" in (root / "matrix.yaml").read_text()


def test_pip_install_editable_is_one_line_of_the_backend(tmp_path: Path) -> None:
    """``pip install -e`` of a project using the backend: pip shows the backend's one line
    (setuptools' ``setup.py develop`` fallback was a 67-line traceback)."""
    from tests.integration.helpers import copy_kernels

    root = copy_kernels(tmp_path / "p") / "kernels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--prefix", str(tmp_path / "prefix"), "-e", str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "Traceback" not in said and "setup.py develop" not in said, said
    assert "[1 lines of output]" in said, said
    assert "error: wheelforge's backend makes no editable installs (pip install -e" in said
    assert not (tmp_path / "prefix").exists()


@pytest.mark.parametrize("columns", ["0", "1", "20", "10000"])
def test_the_error_reaches_a_terminal_at_any_columns(tmp_path: Path, columns: str) -> None:
    """wheelforge at a terminal (a pty) with COLUMNS=0 printed nothing, not even the error."""
    import pty

    leader, follower = pty.openpty()
    with os.fdopen(leader, "rb", buffering=0) as screen:
        done = subprocess.run(
            [sys.executable, "-m", "wheelforge", "check", str(tmp_path / "none.whl")],
            stdin=follower, stdout=follower, stderr=follower,
            env={**os.environ, "COLUMNS": columns, "TERM": "xterm"},
        )  # fmt: skip
        os.close(follower)
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the follower is closed and read out
            while chunk := screen.read(4096):
                shown += chunk
    text = shown.decode(errors="replace")
    assert done.returncode == 2, text
    assert "Traceback" not in text
    assert " ".join(text.split()).count("error:") == 1, text
    assert "none.whl" in text and "no such file or folder" in " ".join(text.split()), text


@needs_nvcc
def test_a_killed_builds_jobserver_folder_is_gone_once_the_next_build_runs(
    tmp_path: Path, shared_cache: Path
) -> None:
    """A process holding a jobserver (as a build of variants side by side does) is SIGKILLed:
    its folder stays in TMPDIR; the next build, a no-op included, removes it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    killed = subprocess.run(
        [sys.executable, "-c",
         "import os, signal\n"
         "from wheelforge.build.jobserver import Jobserver\n"
         "Jobserver(4, ninjas=2).makeflags()\n"
         "os.kill(os.getpid(), signal.SIGKILL)\n"],
        env=env,
    )  # fmt: skip
    assert killed.returncode == -9
    [left] = temp.glob("wheelforge-jobserver-*")
    assert (left / "fifo").exists()
    root = one_kernel_project(tmp_path / "p")
    args = ("build", "--archs", "8.0", "--no-import-check", "--cache-dir", shared_cache)
    run = wheelforge(*args, cwd=root, env={"TMPDIR": str(temp)})
    assert run.code == 0, run.err
    assert not list(temp.glob("wheelforge-jobserver-*"))
