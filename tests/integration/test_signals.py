"""SIGINT and SIGTERM sent to wheelforge's own PID (not its group, as CI runners and release
scripts do) mid-compile and mid-provisioning: every tool it started ends with it, nothing
half-made is kept, one line is printed, the exit code is 130 / 143, and a rerun resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import brought_up_to_date, needs_nvcc

pytestmark = needs_nvcc

# A compiler launcher that, while the file named by $WF_SLOW exists, hangs on slow.cpp the way a
# long compile does (in a grandchild, so the whole tree has to be stopped).
SLOW_CXX = """\
#!/bin/sh
case "$*" in
  *slow.cpp*) if [ -e "$WF_SLOW" ]; then : > "$WF_SLOW.started"; sleep 300; fi ;;
esac
exec "$@"
"""


def _survivors(root: Path) -> list[str]:
    """Processes whose working folder or command line lies in *root*, the test's own folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = str((entry / "cwd").readlink())
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd.startswith(str(root)) or str(root) in cmdline):
            found.append(f"{entry.name}: {cmdline}")
    return found


def _wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _wait_finished(build: Path, outputs: tuple[str, ...], proc: subprocess.Popen[str]) -> None:
    """Wait until ninja's log records every one of *outputs* as built. An object file on disk is
    not enough: the compiler writes it before it exits, and ninja records it only after."""
    log = build / ".ninja_log"
    deadline = time.monotonic() + 120
    while True:
        text = log.read_text() if log.is_file() else ""
        rows = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
        if set(outputs) <= {Path(row[3]).name for row in rows if len(row) == 5}:
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"ninja never recorded {outputs}: {text}"
        time.sleep(0.1)


@pytest.fixture
def slow_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg" / "sig").mkdir(parents=True)
    (root / "pkg" / "sig" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "fast.cpp").write_text("int fast() { return 1; }\n")
    (root / "csrc" / "slow.cpp").write_text("int slow() { return 2; }\n")
    (root / "csrc" / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (root / "matrix.yaml").write_text(
        "package: {name: sig, version: '1.0', packages: [pkg/sig]}\n"
        "extension: {name: sig._C, sources: ['csrc/*.cpp', 'csrc/*.cu']}\n"
        "torch: '>=2.10'\narch-sets: '7.5'\n"
    )
    launcher = tmp_path / "slowcxx"
    launcher.write_text(SLOW_CXX)
    launcher.chmod(0o755)
    return root


def _start(root: Path, slow: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "CXX": f"{root.parent / 'slowcxx'} c++", "WF_SLOW": str(slow)}
    return subprocess.Popen(
        [sys.executable, "-m", "wheelforge", "build", "-j", "4"],
        cwd=root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


# Every C++ and C compile but slow.cpp's: they run in the build folder the variants share
# (planning/hostshare.py), before the variant's own (k.cu); the test signals only once ninja has
# recorded them.
_BUILT_BEFORE_THE_SIGNAL = ("fast.cpp.o", "_C_module_init.c.o")


def test_signals_mid_compile_stop_the_whole_tree_and_a_rerun_resumes(slow_project: Path) -> None:
    root = slow_project
    slow = root.parent / "slow-flag"
    build = root / "build" / "wheelforge"
    for signum, code, name in ((signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")):
        slow.touch()
        proc = _start(root, slow)
        _wait_for(Path(f"{slow}.started"), proc)
        (shared,) = build.glob("host-*")  # made before the first compile starts
        _wait_finished(shared, _BUILT_BEFORE_THE_SIGNAL, proc)
        proc.send_signal(signum)  # the PID alone, not its group
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith(f"error: interrupted by {name}: "), err
        assert _survivors(root.parent) == []
        assert not list(build.glob("*/stage-*")), "staging folder left behind"
        assert not (root / "dist").exists() or not list((root / "dist").iterdir())
        Path(f"{slow}.started").unlink()
    slow.unlink()
    rerun = _start(root, slow)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    # fast.cpp and the module init were compiled before the signals; slow.cpp and then k.cu (the
    # variant's, after the shared folder's) are left.
    assert brought_up_to_date(err) == (2, 4), err
    (wheel,) = (root / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None


# Fakes of apt-get and dpkg-deb: provisioning CUDA 11.8 without downloading it. dpkg-deb unpacks
# through a slow tar, as the real one does with a 900 MB toolkit.
FAKE_APT = """\
#!/bin/sh
for arg; do last=$arg; done
case "$*" in *" download "*) : > fake.deb ;; esac
exit 0
"""
FAKE_DPKG_DEB = """\
#!/bin/sh
: > "$WF_SLOW.started"
tar -cf /dev/null /dev/null && exec sleep 300
"""


@pytest.mark.skipif(
    not Path("/usr/share/keyrings/debian-archive-keyring.gpg").is_file(),
    reason="provisioning CUDA 11.8 checks for Debian's archive keyring first",
)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_provisioning_stops_dpkg_deb_and_removes_the_partial_toolkit(
    tmp_path: Path, signum: int, code: int
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("apt-get", FAKE_APT), ("dpkg-deb", FAKE_DPKG_DEB)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    slow, cache = tmp_path / "slow", tmp_path / "cache"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "WF_SLOW": str(slow)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wheelforge", "toolkit", "install", "11.8", "--cache-dir", cache],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _wait_for(Path(f"{slow}.started"), proc, seconds=30)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "error: interrupted by SIG" in err
    assert _survivors(tmp_path) == []
    left = [p.name for p in (cache / "toolkits").iterdir() if not p.name.endswith(".lock")]
    assert left == [], "a partial toolkit was left in the cache"


# A CUDA compiler launcher that, while $WF_SLOW exists, hangs on k.cu in every variant (each
# compile leaves a marker of its own), so that two variants' ninjas run at once when signalled.
SLOW_NVCC = """\
#!/bin/sh
case "$*" in
  *k.cu*) if [ -e "$WF_SLOW" ]; then : > "$WF_SLOW.started.$$"; sleep 300; fi ;;
esac
exec "$@"
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_every_variants_ninja_at_once(
    slow_project: Path, signum: int, code: int
) -> None:
    """Variants built side by side (build/together.py): both ninjas are stopped with
    everything they started, nothing is published, one line, the signal's exit code."""
    root = slow_project
    matrix = root / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace("arch-sets: '7.5'", "arch-sets: {a: '7.5', b: '8.0'}")
    )
    launcher = root.parent / "slownvcc"
    launcher.write_text(SLOW_NVCC)
    launcher.chmod(0o755)
    slow = root.parent / "slow-cuda"
    slow.touch()
    env = {**os.environ, "CMAKE_CUDA_COMPILER_LAUNCHER": str(launcher), "WF_SLOW": str(slow)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wheelforge", "build", "-j", "4", "--compile-cache", "none"],
        cwd=root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while len(list(root.parent.glob("slow-cuda.started.*"))) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the two variants' k.cu never ran at once"
        time.sleep(0.1)
    proc.send_signal(signum)  # the PID alone, not its group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: interrupted by SIG"), err
    assert _survivors(root.parent) == []
    build = root / "build" / "wheelforge"
    assert not list(build.glob("*/stage-*")), "staging folder left behind"
    assert not (root / "dist").exists() or not list((root / "dist").iterdir())
    # both variants' lines were printed, each whole (held, then released in their order)
    assert err.index("▸ a-") < err.index("▸ b-"), err
