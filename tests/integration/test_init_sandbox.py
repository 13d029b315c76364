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
import json
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
    scene: Scene | Path,
    kind: str,
    *,
    python: str | None = None,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    python = python or _build_python()
    project = scene.project if isinstance(scene, Scene) else scene
    return subprocess.run(
        [sys.executable, "-m", "wheelforge", "init", *flags, "--python", python, "--sandbox", kind, str(project)],
        capture_output=True, text=True, timeout=WAIT_S,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
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
        assert (
            f"it opens {scene.outside}/victim.txt, which init's sandbox does not show" in errors[0]
        )
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


# What setup.py tries to reach besides files: unix sockets (in the home folder, the one
# SSH_AUTH_SOCK names, an abstract one, one in the project folder itself, which only the seccomp
# filter holds), a datagram socketpair's sendto to a named socket, a file in the home folder,
# the host's device nodes, and the secrets in its environment. It writes what it reached to
# reach.json in the project (which it may write), through the C socket type the guards do not
# patch.
REACH = """\
import json, os, _socket
report = {{}}
def tried(name, fn):
    try:
        report[name] = "reached: " + repr(fn())
    except Exception as e:
        report[name] = "refused: " + type(e).__name__ + ": " + str(e)
def unix(address):
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(5)
    _socket.socket.connect(s, address)
    return _socket.socket.send(s, b"hello")
def dgram(address):
    a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    return _socket.socket.sendto(a, b"hello", address)
def devices():
    opened = []
    for node in {devices!r}:
        try:
            os.close(os.open(node, os.O_RDONLY | os.O_NONBLOCK))
            opened.append(node)
        except OSError:
            pass
    return opened
tried("home-socket", lambda: unix({home_socket!r}))
tried("agent-socket", lambda: unix(os.environ.get("SSH_AUTH_SOCK", {home_socket!r})))
tried("abstract-socket", lambda: unix("\\0" + {abstract!r}))
tried("project-socket", lambda: unix({project_socket!r}))
tried("dgram-sendto", lambda: dgram({dgram_socket!r}))
tried("home-file", lambda: open({home_file!r}).read())
tried("null", lambda: open("/dev/null").read())
tried("shadow", lambda: open("/etc/shadow").read())
report["devices"] = devices()
report["env"] = {{k: os.environ.get(k) for k in ("GITHUB_TOKEN", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "HOME")}}
with open("reach.json", "w") as f:
    json.dump(report, f)
"""
SECRETS = {"GITHUB_TOKEN": "ghp_fence_secret", "AWS_SECRET_ACCESS_KEY": "aws_fence_secret"}


def _host_devices() -> list[str]:
    """Device nodes of this machine the fence does not show (a disk, the kernel log, /dev/mem)."""
    shown = {f"/dev/{d}" for d in fence.DEVICES}
    found = []
    for entry in sorted(Path("/dev").iterdir()):
        with contextlib.suppress(OSError):
            node = not entry.is_symlink() and (entry.is_char_device() or entry.is_block_device())
            # ptmx: the fence's own, of a new devpts instance; tty: the caller's terminal.
            ours = entry.name.startswith(("nvidia", "tty", "ptmx"))
            if node and str(entry) not in shown and not ours:
                found.append(str(entry))
    return found[:40]


@dataclass
class Listeners:
    sockets: dict[str, socket.socket]

    def reached(self) -> list[str]:
        """The listeners something connected or sent to, each drained."""
        out = []
        for name, listener in self.sockets.items():
            with contextlib.suppress(BlockingIOError):
                while True:  # two cases may reach one listener (SSH_AUTH_SOCK names the home's)
                    if listener.type == socket.SOCK_DGRAM:
                        listener.recv(64)
                    else:
                        listener.accept()[0].close()
                    if name not in out:
                        out.append(name)
        return out


@contextlib.contextmanager
def _listeners(home: Path, project: Path, abstract: str) -> Iterator[Listeners]:
    made = {}
    try:
        for name, address, kind in (
            ("home-socket", str(home / "agent.sock"), socket.SOCK_STREAM),
            ("abstract-socket", "\0" + abstract, socket.SOCK_STREAM),
            ("project-socket", str(project / "daemon.sock"), socket.SOCK_STREAM),
            ("dgram-sendto", str(home / "log.sock"), socket.SOCK_DGRAM),
        ):
            listener = socket.socket(socket.AF_UNIX, kind)
            made[name] = listener
            listener.bind(address)
            if kind == socket.SOCK_STREAM:
                listener.listen(8)
            listener.setblocking(False)
        yield Listeners(made)
    finally:
        for listener in made.values():
            listener.close()


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_setup_py_reaches_no_socket_home_file_device_or_secret(scene: Scene, kind: str) -> None:
    home = scene.outside / "home"  # the user's home for this run: outside /tmp and the project
    home.mkdir()
    (home / ".netrc").write_text("machine github.com password hunter2\n")
    devices = _host_devices()
    (scene.project / "setup.py").write_text(
        REACH.format(
            home_socket=str(home / "agent.sock"),
            abstract=scene.marker,
            project_socket=str(scene.project / "daemon.sock"),
            dgram_socket=str(home / "log.sock"),
            home_file=str(home / ".netrc"),
            devices=devices,
        )
        + SETUP_TAIL
    )
    env = {"HOME": str(home), "SSH_AUTH_SOCK": str(home / "agent.sock"), **SECRETS}
    report = scene.project / "reach.json"
    with _listeners(home, scene.project, scene.marker) as listeners:
        # The fixture reaches everything when nothing fences it: the same setup.py, run as pip
        # would run it.
        subprocess.run(
            [_build_python(), "setup.py", "--name"], cwd=scene.project, env={**os.environ, **env},
            capture_output=True, check=True, timeout=WAIT_S,
        )  # fmt: skip
        unfenced = json.loads(report.read_text())
        assert sorted(listeners.reached()) == sorted(listeners.sockets), unfenced
        assert unfenced["home-file"].startswith("reached:") and "hunter2" in unfenced["home-file"]
        assert unfenced["env"]["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"]
        if os.geteuid() == 0:
            assert unfenced["shadow"].startswith("reached: 'root:"), unfenced["shadow"]
        report.unlink()

        done = _init(scene, kind, env=env, flags=("-v",))
        screen = done.stdout + done.stderr
        assert done.returncode == 0, screen
        seen = json.loads(report.read_text())
        assert listeners.reached() == [], seen
    for name in (
        "home-socket",
        "agent-socket",
        "abstract-socket",
        "project-socket",
        "dgram-sendto",
    ):
        assert seen[name].startswith("refused:"), (name, seen[name])
    # socket(AF_UNIX) itself is refused: the seccomp filter, under bwrap as under unshare.
    assert seen["project-socket"] == "refused: PermissionError: [Errno 13] Permission denied"
    assert seen["home-file"].startswith("refused: FileNotFoundError"), seen["home-file"]
    assert seen["null"] == "reached: ''"
    # What others may not read in /etc is shown empty (bwrap's bind of /dev/null refuses the
    # open), even to a fence run as root, which could read it outside.
    shadow = seen["shadow"]
    assert shadow == "reached: ''" or shadow.startswith("refused: PermissionError"), shadow
    assert seen["devices"] == [], f"device nodes opened inside the fence: {seen['devices']}"
    assert seen["env"]["GITHUB_TOKEN"] is None and seen["env"]["SSH_AUTH_SOCK"] is None
    assert seen["env"]["AWS_SECRET_ACCESS_KEY"] is None
    assert seen["env"]["HOME"] != str(home)  # a scratch folder of the run's
    # -v names what was left out, never a value.
    left_out = next(
        ln for ln in screen.splitlines() if "environment variable(s) a build does not" in ln
    )
    assert "GITHUB_TOKEN" in left_out and "SSH_AUTH_SOCK" in left_out, left_out
    assert all(secret not in screen for secret in SECRETS.values()), screen


def _repository(tmp_path: Path, *, git: bool) -> Path:
    """A faithful small FlashAttention-3: hopper/setup.py opens ../README.md and lists
    ../csrc/cutlass (csrc/cutlass/include/cute/...), the project lying under /tmp."""
    repo = tmp_path / "flash-attention"
    (repo / "csrc" / "cutlass" / "include" / "cute").mkdir(parents=True)
    (repo / "csrc" / "cutlass" / "include" / "cute" / "tensor.hpp").write_text("// cute\n")
    (repo / "README.md").write_text("# FlashAttention\n")
    hopper = repo / "hopper"
    (hopper / "demo").mkdir(parents=True)
    (hopper / "demo" / "__init__.py").write_text("")
    (hopper / "csrc").mkdir()
    (hopper / "csrc" / "ops.cpp").write_text("// ops\n")
    (hopper / "setup.py").write_text(
        textwrap.dedent(
            """\
            import json, os
            from pathlib import Path
            with open("../README.md", "r", encoding="utf-8") as fh:
                long_description = fh.read()
            this_dir = os.path.dirname(os.path.abspath(__file__))
            cutlass_dir = Path(this_dir).parent / "csrc" / "cutlass"
            listing = sorted(os.listdir(cutlass_dir / "include" / "cute"))
            try:
                open("../README.md", "a").write("changed")
                wrote = "wrote"
            except OSError as e:
                wrote = str(e)
            # Past the child's guards: a shell after a query they let through.
            os.system("uname >/dev/null && echo changed >> ../README.md")
            with open("seen.json", "w") as f:
                json.dump({"readme": long_description, "listing": listing, "wrote": wrote}, f)
            from setuptools import Extension, setup
            setup(name="demo", version="1.0", packages=["demo"], ext_modules=[
                Extension("demo._C", ["csrc/ops.cpp"], include_dirs=[str(cutlass_dir / "include")])])
            """
        )
    )
    if git:
        _git(repo, "init", "-q")
    return hopper


@pytest.mark.parametrize("kind", KIND_PARAMS)
@pytest.mark.parametrize("git", [True, False], ids=["clone", "archive"])
def test_a_project_under_tmp_reads_its_repository_around_it(
    tmp_path: Path, kind: str, git: bool
) -> None:
    hopper = _repository(tmp_path, git=git)
    done = _init(hopper, kind)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((hopper / "seen.json").read_text())
    assert seen["readme"] == "# FlashAttention\n" and seen["listing"] == ["tensor.hpp"]
    # Shown, read-only: the repository around the project is read, never changed (the guards
    # refuse Python's write, the fence the shell's).
    assert seen["wrote"] != "wrote", seen
    assert (hopper.parent / "README.md").read_text() == "# FlashAttention\n"
    assert (hopper / "matrix.yaml").is_file()
