"""The sandbox around a project's own code (init's setup.py child, a generator it tries,
CMake's configure, and whatever they start: a shell, git with the project's hooks, a compiled
program): an OS-level fence that holds whatever the code does, where the Python guards of the
setup.py child (capture_guards.py) only record what it tried.

Inside the fence:

- the whole file system is read-only, but the folders it is given as writable (the project,
  a scratch folder wheelforge owns); ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm`` are
  empty, private tmpfs (the sockets there, a D-Bus or a Docker socket, are out of reach), with
  the folders it must read (the build Python, the toolkit) shown again where they lie under one;
  ``/dev`` holds only null, zero, full, random, urandom, tty and the NVIDIA devices;
- no network: a network namespace of its own (not even the host's loopback);
- a PID namespace whose init is the command itself: when it ends, the kernel kills every
  process left in it (forked children, setsid daemons, a child holding its stdout), and when
  wheelforge stops the fence (a deadline, Ctrl-C) the command dies with it (die-with-parent);
- no capabilities (root runs it as root without them), no new privileges.

Two ways to build it: bubblewrap (``bwrap``, the field's tool: Flatpak's), else util-linux's
``unshare`` with fence_init.py setting up the mounts inside the namespaces and ``setpriv``
dropping the capabilities. Neither usable: init refuses with the fix (EnvironmentProblem),
never runs unfenced, unless ``--sandbox off`` says so."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.foundation import proc, readers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, WheelforgeError

Kind = Literal["bwrap", "unshare"]
Choice = Literal["auto", "bwrap", "unshare", "off"]
CHOICES: tuple[Choice, ...] = ("auto", "bwrap", "unshare", "off")
INIT = Path(__file__).with_name("fence_init.py")
# Emptied inside the fence: what lives there (sockets, other programs' temporary files) is no
# part of a build.
HIDDEN = ("/tmp", "/var/tmp", "/run", "/dev/shm")
# The device nodes a program may need (bwrap's --dev gives these), and the GPU's.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICES = ("nvidia*", "dri")  # under /dev: nvidia0, nvidiactl, nvidia-uvm, nvidia-caps/
# How long asking whether a fence works may take (it starts `true` inside one).
_PROBE_S = 30.0
FIX = (
    "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or read setup.py "
    "without running it: 'wheelforge init --no-run'"
)


@dataclass(frozen=True, kw_only=True)
class Fence:
    """One fenced run's view of the machine: *writable* folders (the project, a scratch), and
    *readable* ones that must stay visible though they may lie in a hidden folder."""

    kind: Kind
    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    gpus: tuple[str, ...] = ()  # device nodes shown: /dev/nvidia0, /dev/nvidiactl, ...
    hidden: tuple[str, ...] = HIDDEN  # those of HIDDEN that are folders here

    def argv(self, command: Sequence[str | Path], *, cwd: Path) -> list[str]:
        """*command* run in the fence, from *cwd* (inside a writable or readable folder)."""
        words = [str(c) for c in command]
        if self.kind == "bwrap":
            return self._bwrap(words, cwd)
        return self._unshare(words, cwd)

    def shown(self) -> list[str]:
        """The readable folders that lie under a hidden one (the rest stay visible, read-only)."""
        return [
            str(p)
            for p in dict.fromkeys(self.readable)
            if any(_under(str(p), hidden) for hidden in self.hidden)
        ]

    def _bwrap(self, command: list[str], cwd: Path) -> list[str]:
        # --unshare-user and --cap-drop ALL: run as root, bwrap keeps every capability in the
        # sandbox unless told not to, and CAP_SYS_ADMIN remounts / read-write (bwrap(1)).
        argv = [
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into the user's terminal (CVE-2017-5226)
            "--as-pid-1",  # the command is the namespace's init: its end kills the rest
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        for node in self.gpus:
            argv += ["--dev-bind-try", node, node]
        for hidden in self.hidden:
            argv += ["--tmpfs", hidden]
        for shown in self.shown():
            argv += ["--ro-bind", shown, shown]
        for folder in dict.fromkeys(self.writable):
            argv += ["--bind", str(folder), str(folder)]
        return [*argv, "--chdir", str(cwd), "--", *command]

    def _unshare(self, command: list[str], cwd: Path) -> list[str]:
        plan = {
            "writable": [str(p) for p in dict.fromkeys(self.writable)],
            "readable": self.shown(),
            "hidden": list(self.hidden),
            "devices": [f"/dev/{d}" for d in DEVICES],
            "gpus": list(self.gpus),
            "cwd": str(cwd),
        }
        return [
            # unshare ignores SIGTERM while it waits, and has no --die-with-parent: setpriv gives
            # it a parent-death signal, so wheelforge's end (even SIGKILL) ends it, and
            # --kill-child then the namespace.
            "setpriv",
            "--pdeathsig",
            "KILL",
            "--",
            "unshare",
            "--user",
            "--map-root-user",  # root inside, to mount; setpriv drops every capability after
            "--mount",
            "--pid",
            "--net",
            "--ipc",
            "--uts",
            "--fork",
            "--kill-child",  # unshare's end (a deadline, Ctrl-C) kills the namespace's init
            "--",
            sys.executable,
            "-I",
            "-S",
            str(INIT),
            json.dumps(plan),
            "--",
            *command,
        ]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def hidden_folders() -> tuple[str, ...]:
    """Those of HIDDEN that are folders here (/var/run is mostly a link to /run)."""
    return tuple(h for h in HIDDEN if Path(h).is_dir() and not Path(h).is_symlink())


def gpu_nodes() -> tuple[str, ...]:
    """This machine's GPU device nodes, shown inside the fence (a setup.py asks torch for the
    GPU's arch, as it would under pip)."""
    return tuple(sorted({str(n) for pattern in GPU_DEVICES for n in Path("/dev").glob(pattern)}))


def python_folders(python: Path) -> tuple[Path, ...]:
    """What a build Python needs to read: its prefix (a venv's, and the interpreter's that a
    venv's pyvenv.cfg names)."""
    out = [
        Path(os.path.abspath(python)).parent.parent,  # noqa: PTH100 - a venv's python is a link
        Path(os.path.realpath(python)).parent.parent,
    ]
    cfg = out[0] / "pyvenv.cfg"
    try:
        text = readers.read_text(cfg, cap=readers.CONFIG_CAP, errors="replace")
    except (OSError, readers.FileRefused):
        text = ""
    lines = text.splitlines()
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            out.append(Path(value.strip()).parent)
    return tuple(dict.fromkeys(out))


def program_folders(program: str | Path) -> tuple[Path, ...]:
    """The prefix of a program found on the PATH (a pip-installed cmake in a venv)."""
    found = shutil.which(str(program))
    if found is None:
        return ()
    return tuple(dict.fromkeys(Path(p).parent.parent for p in (found, os.path.realpath(found))))


def env_folders(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The folders PYTHONPATH names: setup.py imports from them as it would under pip."""
    return tuple(Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)


@functools.cache
def _works(kind: Kind) -> str | None:
    """Why a fence of *kind* cannot run here, or None when `true` runs inside one."""
    program = "bwrap" if kind == "bwrap" else "unshare"
    for needed in (program, "setpriv") if kind == "unshare" else (program,):
        if shutil.which(needed) is None:
            return f"{needed} is not installed"
    true = shutil.which("true") or "/bin/true"
    argv = Fence(kind=kind, writable=(), hidden=hidden_folders(), gpus=gpu_nodes()).argv(
        [true], cwd=Path("/")
    )
    try:
        done = proc.run(argv, hint=FIX, check=False, timeout=_PROBE_S, what=f"a {kind} sandbox")
    except WheelforgeError as exc:
        return f"{program} could not start: {exc.message}"
    if done.returncode == 0:
        return None
    output = done.stderr + done.stdout
    said = next((ln for ln in output.splitlines() if ln.strip()), f"exit code {done.returncode}")
    return f"{program} fails here ({said.strip()[:200]})"


def choose(choice: Choice, *, what: str) -> Kind | None:
    """The fence *choice* asks for (``--sandbox``), if it works here; None for ``off``.
    ``auto``: bubblewrap, else unshare; neither: EnvironmentProblem naming the fix (*what*: the
    code that would run, as the line names it)."""
    if choice not in CHOICES:
        raise ConfigError(f"--sandbox {choice}: not one of {', '.join(CHOICES)}")
    if choice == "off":
        return None
    kinds: tuple[Kind, ...] = ("bwrap", "unshare") if choice == "auto" else (choice,)
    reasons = []
    for kind in kinds:
        reason = _works(kind)
        if reason is None:
            return kind
        reasons.append(reason)
    raise EnvironmentProblem(
        f"init runs {what} only inside a sandbox, and none works here ({'; '.join(reasons)}): "
        + (FIX if choice == "auto" else f"use --sandbox auto, or {FIX}")
        + " ('--sandbox off' runs it unfenced)"
    )


def failure(output: str) -> str | None:
    """The line in which the fence itself said it could not be set up (bwrap's, fence_init's),
    if *output* holds one."""
    for line in output.splitlines():
        if line.startswith(("bwrap: ", "wheelforge fence: ", "unshare: ", "setpriv: ")):
            return line.strip()[:300]
    return None


def describe(kind: Kind | None) -> str:
    """The fence as the screen names it."""
    if kind is None:
        return (
            "UNFENCED (--sandbox off): it can write and delete anywhere you can, use the network "
            "and leave processes running"
        )
    tool = "bubblewrap" if kind == "bwrap" else "unshare"
    return f"in a sandbox ({tool}: only the project and a scratch folder writable, no network)"


def wrap(
    kind: Kind | None,
    command: Sequence[str | Path],
    *,
    cwd: Path,
    writable: Iterable[Path],
    readable: Iterable[Path] = (),
) -> list[str]:
    """*command* as it runs: inside a fence of *kind*, or as it is (``--sandbox off``)."""
    if kind is None:
        return [str(c) for c in command]
    fence = Fence(
        kind=kind,
        writable=tuple(Path(os.path.realpath(p)) for p in writable),
        readable=tuple(Path(os.path.realpath(p)) for p in readable if Path(p).is_dir()),
        gpus=gpu_nodes(),
        hidden=hidden_folders(),
    )
    return fence.argv(command, cwd=cwd)
