"""init's sandbox for real (foundation/fence.py), with bubblewrap and with the unshare fallback:
one hostile setup.py per way past the child's Python guards (a shell after an allowed query,
shell=True, os.remove/rmtree/rename, execv, ctypes, a compiled program started by
posix_spawn, ``git log --output=``, a ``core.fsmonitor`` hook, daemons and a child holding
stdout, the network to a port this test listens on). Each case asserts that nothing outside the
project changed, that init returned with an honest success or error (not its deadline), that no
process it started is left (a marker in their command lines, looked for in /proc), and that no
connection reached the listener.

The victims lie in a folder outside /tmp (which the fence empties) and outside the project: the
fence's view, built from what a build reads, does not hold them at all. What it shows read-only
(the project's repository around it) is tried by the repository tests below; sockets, devices,
the home folder and the environment by the reach tests."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import REPO
from wheelforge.adoption.doors import cmake
from wheelforge.foundation import fence, gitfiles

KINDS: tuple[fence.Kind, ...] = ("bwrap", "unshare")
# Past this the test stops waiting: init would wait for setup.py's deadline (300 s) if a child
# held its stdout, and "did not finish within" is a failure of its own.
WAIT_S = 240


def _usable(kind: fence.Kind) -> str | None:
    return fence._works(kind)


def needs(kind: fence.Kind) -> pytest.MarkDecorator:
    reason = _usable(kind)
    return pytest.mark.skipif(
        reason is not None,
        reason=f"no {kind} sandbox here ({reason}); .ci/run installs bubblewrap, unshare needs user namespaces",
    )


KIND_PARAMS = [pytest.param(k, marks=needs(k), id=k) for k in KINDS]


@dataclass
class Scene:
    project: Path
    outside: Path  # a folder of the test's, outside /tmp and outside the project
    marker: str  # in the command line of every process a case leaves behind
    port: int  # a listener on 127.0.0.1 the cases try to reach

    def snapshot(self) -> dict[str, bytes]:
        return {
            p.relative_to(self.outside).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(self.outside.rglob("*"))
        }


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    # Outside /tmp (the fence hides /tmp): under the checkout's ignored build/ folder.
    base = REPO / "build"
    base.mkdir(exist_ok=True)
    outside = Path(tempfile.mkdtemp(prefix="fence-victims-", dir=base))
    (outside / "victim.txt").write_text("keep me\n")
    (outside / "tree").mkdir()
    (outside / "tree" / "leaf.txt").write_text("leaf\n")
    project = tmp_path / "proj"
    (project / "csrc").mkdir(parents=True)
    (project / "csrc" / "ops.cpp").write_text("// ops\n")
    (project / "demo").mkdir()  # the package the extension's module lies in
    (project / "demo" / "__init__.py").write_text("")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    marker = f"wf-fence-{uuid.uuid4().hex[:12]}"
    try:
        yield Scene(project, outside, marker, listener.getsockname()[1])
        with pytest.raises(BlockingIOError):
            listener.accept()  # no case reached the host's loopback
    finally:
        listener.close()
        _kill_marked(marker)
        shutil.rmtree(outside, ignore_errors=True)


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return [p for p in found if p != os.getpid()]


def _kill_marked(marker: str) -> None:
    """What a failed case left behind, ended (by pid: only the processes carrying its marker)."""
    for pid in _marked(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, 9)


# Each case: the lines setup.py runs before its setup() call ({out}: the outside folder;
# {marker}, {port}, {py}: the build Python), and what init says: "ok" (the matrix written: what
# the fence stopped failed quietly inside a shell or a program), "hidden" (setup.py itself
# failed on a file the fence does not show: its line and the path named), "gone" (it replaced
# its own process: no record).
PRELUDE = "import os, sys, shutil, subprocess, ctypes, socket, time\n"
CASES: dict[str, tuple[str, str]] = {
    # uname is a query the guards let through; the shell runs the rest of the line.
    "os-system-chain": ("os.system('uname && touch {out}/made && rm -f {out}/victim.txt')", "ok"),
    "shell-true": ("subprocess.run('uname; echo pwned > {out}/victim.txt', shell=True)", "ok"),
    "os-remove": ("os.remove('{out}/victim.txt')", "hidden"),
    "rmtree": ("shutil.rmtree('{out}/tree', ignore_errors=True)", "ok"),
    "rename": ("os.rename('{out}/victim.txt', '{out}/renamed.txt')", "hidden"),
    "ctypes-system": (
        "ctypes.CDLL(None).system(b'touch {out}/made; rm -f {out}/victim.txt')",
        "ok",
    ),
    "posix-spawn": (
        "os.waitpid(os.posix_spawn('/usr/bin/touch', ['touch', '{out}/made'], dict(os.environ)), 0)",
        "ok",
    ),
    # git log is a read the guards let through; --output writes where it is told.
    "git-log-output": ("subprocess.run(['git', 'log', '-1', '--output={out}/victim.txt'])", "ok"),
    # git status runs the project's core.fsmonitor hook (the fixture writes it).
    "git-fsmonitor": ("subprocess.run(['git', 'status'], capture_output=True)", "ok"),
    "daemons": (
        textwrap.dedent(
            """\
            def spawn(detach):
                if os.fork() == 0:
                    if detach:
                        os.setsid()
                        if os.fork():
                            os._exit(0)
                    os.execv('{py}', ['{py}', '-c', 'import time; time.sleep(600)', '{marker}'])
            spawn(True)   # a double-forked setsid daemon
            spawn(False)  # a child that keeps setup.py's stdout and stderr open
            """
        ),
        "ok",
    ),
    "network": (
        # Past the guards: a shell after a query starts a Python that has none.
        "os.system('''uname && {py} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\"''')\n"
        # The guards patch socket.socket.connect; the C type's own method is under it.
        "import _socket; r = _socket.socket(); r.settimeout(5)\n"
        "try:\n    _socket.socket.connect(r, ('127.0.0.1', {port}))\nexcept OSError as e:\n    print('refused:', e)\n",
        "ok",
    ),
    "execv": (
        "os.execv('/bin/sh', ['sh', '-c', 'touch {out}/made; rm -f {out}/victim.txt'])",
        "gone",
    ),
}

SETUP_TAIL = 'from setuptools import Extension, setup\nsetup(name="demo", version="1.0", packages=["demo"], ext_modules=[Extension("demo._C", ["csrc/ops.cpp"])])\n'


def _git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        cwd=project, check=True, capture_output=True,
    )  # fmt: skip


def _write_case(scene: Scene, name: str) -> None:
    body = CASES[name][0].format(
        out=scene.outside, marker=scene.marker, port=scene.port, py=sys.executable
    )
    (scene.project / "setup.py").write_text(PRELUDE + body + "\n" + SETUP_TAIL)
    if name.startswith("git-"):
        _git(scene.project, "init", "-q")
        _git(scene.project, "add", "setup.py")
        _git(scene.project, "commit", "-qm", "x")
    if name == "git-fsmonitor":
        hook = scene.project / "hook.sh"
        hook.write_text(
            f"#!/bin/sh\necho hooked > {scene.outside}/made\nrm -f {scene.outside}/victim.txt\n"
        )
        hook.chmod(0o755)
        _git(scene.project, "config", "core.fsmonitor", str(hook))


@functools.cache
def _build_python() -> str:
    """A Python with setuptools and without torch when this machine has one (setup.py then
    sees the stand-in torch: seconds, not the tens a real torch import takes here), else this
    one."""
    for python in ("/usr/bin/python3", shutil.which("python3") or ""):
        probe = "import setuptools, importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
        if (
            python
            and subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode
            == 0
        ):
            return python
    return sys.executable


def _init(
    scene: Scene, kind: str, *, python: str | None = None
) -> subprocess.CompletedProcess[str]:
    python = python or _build_python()
    return subprocess.run(
        [sys.executable, "-m", "wheelforge", "init", "--python", python, "--sandbox", kind, str(scene.project)],
        capture_output=True, text=True, timeout=WAIT_S,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.parametrize("kind", KIND_PARAMS)
@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_setup_py_changes_nothing_outside_and_leaves_no_process(
    scene: Scene, kind: str, name: str
) -> None:
    _write_case(scene, name)
    before = scene.snapshot()
    done = _init(scene, kind)
    screen = done.stdout + done.stderr
    assert "Traceback" not in screen, screen
    assert "did not finish within" not in screen, screen  # init never waited on a process
    assert scene.snapshot() == before, screen
    assert _marked(scene.marker) == [], "a process setup.py started outlived init"
    assert "in a sandbox (" in screen, screen
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    said = CASES[name][1]
    if said == "ok":
        assert done.returncode == 0 and not errors, screen
        assert (scene.project / "matrix.yaml").is_file()
        return
    assert done.returncode == 3 and len(errors) == 1, screen
    assert not (scene.project / "matrix.yaml").exists()
    if said == "hidden":  # the victims are not in the fence's view at all
        assert "setup.py failed at line 2: FileNotFoundError" in errors[0]
        assert f"it opens {scene.outside}/victim.txt, which init's sandbox does not show" in errors[0]
    else:
        assert "setup.py could not be run" in errors[0], screen


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_the_project_and_temporary_files_stay_writable_inside(scene: Scene, kind: str) -> None:
    (scene.project / "setup.py").write_text(
        PRELUDE
        + "import tempfile\n"
        + "open('version.py', 'w').write('v = 1\\n')\n"  # FlashAttention-3 writes its config
        + "tempfile.NamedTemporaryFile(delete=False).write(b'x')\n"
        + SETUP_TAIL
    )
    done = _init(scene, kind, python=sys.executable)  # the real torch, imported inside
    assert done.returncode == 0, done.stderr
    assert (scene.project / "version.py").read_text() == "v = 1\n"


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_a_hostile_cmake_configure_changes_nothing_outside(scene: Scene, kind: str) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not on the PATH")
    (scene.project / "CMakeLists.txt").write_text(
        textwrap.dedent(
            f"""\
            cmake_minimum_required(VERSION 3.18)
            project(demo LANGUAGES CXX)
            execute_process(COMMAND sh -c "touch {scene.outside}/made; rm -f {scene.outside}/victim.txt")
            execute_process(COMMAND sh -c "(setsid {sys.executable} -c 'import time; time.sleep(600)' {scene.marker} >/dev/null 2>&1 &)")
            file(WRITE {scene.outside}/written.txt "x")
            """
        )
    )
    before = scene.snapshot()
    build = scene.project.parent / "cmake-build"
    build.mkdir()
    context = cmake.CMakeContext(python=Path(sys.executable), sandbox=kind)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="configure failed"):  # file(WRITE) is refused: EROFS
        cmake._configure(scene.project, build, context)
    assert scene.snapshot() == before
    assert _marked(scene.marker) == []


def test_wheelforges_own_git_question_runs_no_fsmonitor_hook(scene: Scene) -> None:
    _write_case(scene, "git-fsmonitor")
    before = scene.snapshot()
    assert gitfiles.gitlink(scene.project, "setup.py") is None  # a file, not a gitlink
    assert scene.snapshot() == before


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_killing_wheelforge_mid_setup_py_ends_every_process_in_the_fence(
    scene: Scene, kind: str
) -> None:
    """SIGKILL leaves wheelforge no time to stop anything: the fence ends with it (bwrap's
    --die-with-parent, setpriv --pdeathsig for unshare), and the PID namespace with its init."""
    body = CASES["daemons"][0].format(marker=scene.marker, py=sys.executable, out="", port=0)
    (scene.project / "setup.py").write_text(PRELUDE + body + "time.sleep(600)\n" + SETUP_TAIL)
    started = subprocess.Popen(
        [sys.executable, "-m", "wheelforge", "init", "--python", _build_python(), "--sandbox", kind, str(scene.project)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(WAIT_S * 10):
            if len(_marked(scene.marker)) >= 2 or started.poll() is not None:
                break
            time.sleep(0.1)
        assert len(_marked(scene.marker)) >= 2, "setup.py's two processes never started"
    finally:
        started.kill()
        started.wait()
    for _ in range(WAIT_S * 10):  # the kernel tears the namespace down: poll until it has
        if not _marked(scene.marker):
            break
        time.sleep(0.1)
    assert _marked(scene.marker) == [], "a process of the fence outlived wheelforge's SIGKILL"
