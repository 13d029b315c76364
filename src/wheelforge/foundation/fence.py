"""The sandbox around a project's own code (init's setup.py child, a generator it tries,
CMake's configure, and whatever they start: a shell, git with the project's hooks, a compiled
program): an OS-level fence that holds whatever the code does, where the Python guards of the
setup.py child (capture_guards.py) only record what it tried.

Inside the fence:

- a view built from what a build reads, not the machine (Fence.view): the system's folders
  (SYSTEM) read-only; the folders it is given as writable (the project, a scratch folder
  wheelforge owns) read-write; read-only the build Python, the toolkit, the folders the kept
  environment names and the project's repository around it (repository()), wherever they lie;
  ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm`` empty, private tmpfs; nothing else (the home
  folders, /var, what lies in them). ``/dev`` holds only null, zero, full, random, urandom, tty
  and the NVIDIA devices;
- no unix socket: fence_init.py's seccomp filter, the same under both ways (an abstract
  socket is also cut by the network namespace);
- no network: a network namespace of its own (not even the host's loopback);
- an environment cut to what a build reads (environment(): an allowlist, the project's own
  knobs, never a secret's name), HOME the scratch folder;
- a PID namespace whose init is the command itself: when it ends, the kernel kills every
  process left in it (forked children, setsid daemons, a child holding its stdout), and when
  wheelforge stops the fence (a deadline, Ctrl-C) the command dies with it (die-with-parent);
- no capabilities (root runs it as root without them), no new privileges.

Two ways to build it: bubblewrap (``bwrap``, the field's tool: Flatpak's), else util-linux's
``unshare`` with fence_init.py setting up the mounts inside the namespaces and ``setpriv``
dropping the capabilities. Neither usable: init refuses with the fix (EnvironmentProblem),
never runs unfenced, unless ``--sandbox off`` says so."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.foundation import log, proc, readers
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


# The system's own folders, shown read-only: programs, libraries and their configuration, what
# any build reads (/sys: the CPUs and GPUs torch and the driver ask about). Nothing else of the
# machine is there: the home folders, /root, /srv, /mnt, /var and what lies in them (an
# ssh-agent's or a Docker daemon's socket, a token in a dotfile) are not in the view at all.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")

# (how: ro, rw, link, tmpfs, proc, dev, mask; the path; a link's target, a mask's dir or file)
Step = tuple[str, str, str]


@dataclass(frozen=True, kw_only=True)
class Fence:
    """One fenced run's view of the machine: the *system* folders, *writable* folders (the
    project, a scratch), *readable* ones (the build Python, the toolkit, the project's
    repository) and nothing else."""

    kind: Kind
    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    gpus: tuple[str, ...] = ()  # device nodes shown: /dev/nvidia0, /dev/nvidiactl, ...
    hidden: tuple[str, ...] = HIDDEN  # those of HIDDEN that are folders here: empty tmpfs
    system: tuple[tuple[str, str | None], ...] = ()  # (folder, its link's target or None)
    masked: tuple[tuple[str, bool], ...] = ()  # (path, is a folder): shown empty (masked_in)

    def argv(self, command: Sequence[str | Path], *, cwd: Path) -> list[str]:
        """*command* run in the fence, from *cwd* (inside a writable or readable folder)."""
        words = [str(c) for c in command]
        if self.kind == "bwrap":
            return self._bwrap(words, cwd)
        return self._unshare(words, cwd)

    def view(self) -> list[Step]:
        """What the fence's root holds, parents before children: a folder under one already
        shown with as much access is left out (it is there), a writable one under a read-only
        one is bound again over it."""
        wanted: dict[str, str] = {}
        for path, target in self.system:
            wanted.setdefault(path, "ro" if target is None else f"link:{target}")
        for hidden in self.hidden:
            wanted[hidden] = "tmpfs"
        wanted["/proc"], wanted["/dev"] = "proc", "dev"
        for folder in self.readable:
            wanted.setdefault(str(folder), "ro")
        for folder in self.writable:
            wanted[str(folder)] = "rw"
        for path, is_dir in self.masked:
            wanted[path] = "mask:dir" if is_dir else "mask:file"
        steps: list[Step] = []
        for path in sorted(wanted, key=lambda p: Path(p).parts):
            how = wanted[path]
            above = _covering(steps, path)
            if how in ("ro", "rw") and above in ("rw", how):
                continue  # already in the view, with at least this access
            if how.startswith(("link:", "mask:")):
                kind, _, extra = how.partition(":")
                steps.append((kind, path, extra))
            else:
                steps.append((how, path, ""))
        return steps

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
        ]
        flags = {"ro": "--ro-bind", "rw": "--bind", "tmpfs": "--tmpfs", "proc": "--proc"}
        for how, path, target in self.view():
            if how == "link":
                argv += ["--symlink", target, path]
            elif how == "mask" and target == "dir":
                argv += ["--tmpfs", path, "--remount-ro", path]
            elif how == "mask":
                argv += ["--ro-bind", "/dev/null", path]
            elif how == "dev":
                argv += ["--dev", path]
                for node in self.gpus:
                    argv += ["--dev-bind-try", node, node]
            elif how in ("ro", "rw"):
                argv += [flags[how], path, path]
            else:
                argv += [flags[how], path]
        # The root bwrap builds the view in is a tmpfs: read-only, as the machine's is.
        argv += ["--remount-ro", "/", "--chdir", str(cwd), "--"]
        # The same seccomp filter as the unshare way's, installed by fence_init.py as the
        # command's first process (it execs the command: still PID 1).
        return [*argv, *_SECCOMP, json.dumps({"only": "seccomp"}), "--", *command]

    def _unshare(self, command: list[str], cwd: Path) -> list[str]:
        plan = {
            "steps": [list(step) for step in self.view()],
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
            *_SECCOMP,
            json.dumps(plan),
            "--",
            *command,
        ]


# fence_init.py run by this Python (stdlib only, isolated): the unshare way's set-up, and the
# seccomp filter on both ways.
_SECCOMP = (sys.executable, "-I", "-S", str(INIT))


def masked_in(folder: str = "/etc", *, cap: int = 20_000) -> tuple[tuple[str, bool], ...]:
    """What in *folder* (the system's configuration, shown read-only) others may not read: a
    shadow file, a TLS key, an ssh host key. Shown empty inside, so a fence run as root (a
    CI container) reads no more of it than any user could. Links are left as they are (what
    they point at is masked or not where it lies); at most *cap* entries are looked at."""
    out: list[tuple[str, bool]] = []
    seen = 0
    for top, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            seen += 1
            path = os.path.join(top, name)  # noqa: PTH118 - os.walk's own strings
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                if not stat.S_ISLNK(mode) and not mode & stat.S_IROTH:
                    out.append((path, stat.S_ISDIR(mode)))
        dirs[:] = [d for d in dirs if (os.path.join(top, d), True) not in out]  # noqa: PTH118
        if seen > cap:
            break
    return tuple(out)


def _covering(steps: list[Step], path: str) -> str | None:
    """How the nearest step *path* lies under shows it: ro or rw for a bind; None for none or
    an empty tmpfs (a folder under /tmp is bound again into it)."""
    for how, shown, _ in reversed(steps):
        if _under(path, shown) and path != shown:
            return how if how in ("ro", "rw") else None
    return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def system_folders() -> tuple[tuple[str, str | None], ...]:
    """Those of SYSTEM that are here, each with its link's target (/lib -> usr/lib on a
    merged-/usr system, made again inside as the same link)."""
    out: list[tuple[str, str | None]] = []
    for folder in SYSTEM:
        path = Path(folder)
        if path.is_symlink():
            out.append((folder, str(path.readlink())))
        elif path.is_dir():
            out.append((folder, None))
    return tuple(out)


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


# The environment the project's code sees: what a build reads, nothing else (a token, an
# ssh-agent's or a D-Bus socket, a cloud credential stay outside). Names kept as they are...
KEPT_NAMES = frozenset(
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME",
        "CC", "CXX", "CPP", "LD", "AR", "NM", "RANLIB", "CFLAGS", "CXXFLAGS", "CPPFLAGS",
        "LDFLAGS", "LDSHARED", "MAX_JOBS", "FORCE_CUDA", "SOURCE_DATE_EPOCH",
        "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
        "PKG_CONFIG_PATH", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV", "CONDA_PREFIX", "ROCM_HOME", "ROCM_PATH", "NVIDIA_VISIBLE_DEVICES",
    }
)  # fmt: skip
# ... and by their start: the toolkit's and torch's build knobs, CMake's, the locale.
KEPT_PREFIXES = ("LC_", "CUDA", "NVCC_", "TORCH_", "PYTORCH_", "CMAKE_", "CUDNN_", "SETUPTOOLS_")
# Never kept, whatever names them: the words a secret's name holds.
_SECRET_RE = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|AUTH|COOKIE|SESSION|API_?KEY|(^|_)KEY($|_)|SOCK"
)
# The variables whose folders the build reads: shown, read-only, in the fence.
PATH_LISTS = (
    "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "PKG_CONFIG_PATH", "PYTHONPATH", "CMAKE_PREFIX_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
    "CUDNN_HOME", "CUDNN_PATH", "ROCM_HOME", "ROCM_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
)  # fmt: skip
# The variables that name a program (a compiler): its prefix shown.
PROGRAMS = ("CC", "CXX", "CUDACXX", "CUDAHOSTCXX", "NVCC_CCBIN", "PYTORCH_NVCC")
# A quoted upper-case name in a project's build file: an environment variable it reads
# (os.getenv("FLASH_ATTENTION_DISABLE_SM80"), $ENV{CUTLASS_DIR} in CMake).
_NAME_RE = re.compile(r"""["'{]([A-Z][A-Z0-9_]{2,})["'}]""")


@dataclass(frozen=True, kw_only=True)
class Environment:
    """What the fenced code is given (*kept*), and the names of what it is not (*left_out*)."""

    kept: dict[str, str]
    left_out: tuple[str, ...]


def environment(base: Mapping[str, str], *, named: Iterable[str] = (), home: Path) -> Environment:
    """*base* cut to what a build reads: KEPT_NAMES, KEPT_PREFIXES and the names the project's
    build files *named* (its own knobs), never a secret's name; HOME is *home* (a scratch
    folder: the user's home is not in the fence)."""
    wanted = set(named)
    kept, left_out = {}, []
    for name, value in base.items():
        ours = name in KEPT_NAMES or name.startswith(KEPT_PREFIXES) or name in wanted
        if ours and not _SECRET_RE.search(name.upper()):
            kept[name] = value
        elif name not in ("HOME", "TMPDIR"):
            left_out.append(name)
    return Environment(kept={**kept, "HOME": str(home)}, left_out=tuple(sorted(left_out)))


def named_in(*files: Path) -> tuple[str, ...]:
    """The environment variables *files* (a setup.py, a CMakeLists.txt) name, by their quoted
    upper-case names; a file that cannot be read names none."""
    return tuple(dict.fromkeys(n for file in files for n in _NAME_RE.findall(_read(file))))


def say_left_out(env: Environment, *, what: str) -> None:
    """-v: the names of what *what* was not given."""
    if env.left_out:
        log.detail(
            f"{what} runs without {len(env.left_out)} environment variable(s) a build does not "
            f"read: {', '.join(env.left_out)}"
        )


def env_paths(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The folders the kept environment names for the build to read (PATH_LISTS) and the
    prefixes of the programs it names (PROGRAMS): shown, read-only."""
    out: list[Path] = []
    for name in PATH_LISTS:
        for part in env.get(name, "").split(os.pathsep):
            if part and Path(part).is_absolute() and Path(part).is_dir():
                out.append(Path(part))
    for name in PROGRAMS:
        program = env.get(name, "").split(" ")[0]
        if program:
            out += program_folders(program)
    return tuple(dict.fromkeys(out))


def repository(root: Path, *named: Path) -> tuple[Path, ...]:
    """What around the project *root* its build reads, shown read-only wherever it lies (/tmp
    included): its git repository's top level (and the git folder a worktree's or submodule's
    ``.git`` file names), else the folders above it that *named* files (its setup.py) open
    ("../README.md", "../../csrc"). Never the home folder or a folder above it."""
    root = Path(os.path.realpath(root))
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if not dot.exists():
            continue
        if not _showable(folder):
            return ()
        out = [folder]
        if dot.is_file():  # "gitdir: <path>": a worktree's or a submodule's
            text = _read(dot).strip()
            if text.startswith("gitdir:"):
                gitdir = (folder / text.removeprefix("gitdir:").strip()).resolve()
                out.append(gitdir)
                if common := _read(gitdir / "commondir").strip():
                    out.append((gitdir / common).resolve())
        return tuple(p for p in out if p.is_dir() and _showable(p))
    up = 0
    for text in (_read(f) for f in named):
        for match in _UP_RE.finditer(text):
            up = max(up, match.group(0).count(".."))
    top = root.parents[up - 1] if 0 < up <= len(root.parents) else root
    return (top,) if up and _showable(top) else ()


# A quoted path that climbs out of the project: "../README.md", '../../csrc'.
_UP_RE = re.compile(r"""(?<=["'])(?:\.\.[/\\])+(?:\.\.(?=["']))?|(?<=["'])\.\.(?=["'])""")


def _read(file: Path) -> str:
    try:
        return readers.read_text(file, cap=readers.CONFIG_CAP, errors="replace")
    except (OSError, readers.FileRefused):
        return ""


@functools.cache
def _works(kind: Kind) -> str | None:
    """Why a fence of *kind* cannot run here, or None when `true` runs inside one."""
    program = "bwrap" if kind == "bwrap" else "unshare"
    for needed in (program, "setpriv") if kind == "unshare" else (program,):
        if shutil.which(needed) is None:
            return f"{needed} is not installed"
    true = shutil.which("true") or "/bin/true"
    argv = _fence(kind, (), ()).argv([true], cwd=Path("/"))
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


def say_foreign_owner(root: Path, *, what: str) -> None:
    """Root in the fence holds no capability (``--cap-drop ALL``), so folders of another user
    are read-only to it: an sdist extracted by root with ``tar`` keeps its packer's uid, and the
    project's generators then fail to write (NATTEN's autogen, vLLM's Marlin kernels). Said
    before the run, as one line with the fix."""
    if os.geteuid() != 0:
        return
    owners = {root.stat().st_uid}
    with os.scandir(root) as entries:
        owners.update(e.stat(follow_symlinks=False).st_uid for e in entries if e.is_dir())
    if others := sorted(owners - {0}):
        log.warning(
            f"{root}: folders owned by uid {', '.join(map(str, others))}, not by root: in init's "
            f"sandbox root has no capabilities, so {what} cannot write into them (its generators "
            f"fail); 'chown -R root: {root}' (or extract with 'tar --no-same-owner'), or pass "
            "'--sandbox off'"
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


def _showable(folder: Path) -> bool:
    """Not the root, nor the home folder or a folder above it (a repository or prefix found
    there would show the user's dotfiles)."""
    home = Path(os.path.realpath(Path.home()))
    return folder != Path("/") and folder not in (home, *home.parents)


def _fence(kind: Kind, writable: Iterable[Path], readable: Iterable[Path]) -> Fence:
    own = (*python_folders(Path(sys.executable)), INIT.parent)  # fence_init.py's, inside
    shown = (Path(os.path.realpath(p)) for p in (*readable, *own) if Path(p).is_dir())
    return Fence(
        kind=kind,
        writable=tuple(Path(os.path.realpath(p)) for p in writable),
        readable=tuple(p for p in dict.fromkeys(shown) if _showable(p)),
        gpus=gpu_nodes(),
        hidden=hidden_folders(),
        system=system_folders(),
        masked=masked_in(),
    )


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
    return _fence(kind, writable, readable).argv(command, cwd=cwd)
