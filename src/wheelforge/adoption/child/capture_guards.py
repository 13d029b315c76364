"""The guards of init's setup.py capture child (setup_child.py loads this file by its path, in
the build Python): the network closed, commands other than read-only queries refused, files
written only inside the project folder or the temporary folder. What each refused is recorded
in the child's record, with where in the project's code it was tried."""

from __future__ import annotations

import builtins
import io
import os
import re
import runpy
import shlex
import socket
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any

# Read-only queries a setup.py may run: compilers and tools asked their version, git asked
# about the checkout, the GPUs asked what they are.
_VERSION_ARGS = frozenset(
    {
        "-V",
        "--version",
        "-version",
        "-dumpversion",
        "-dumpfullversion",
        "--list-gpu-arch",
        "--list-gpu-code",
        "-v",
    }
)
_ASKED_VERSION = frozenset(
    {
        "nvcc",
        "hipcc",
        "gcc",
        "g++",
        "cc",
        "c++",
        "clang",
        "clang++",
        "cmake",
        "ninja",
        "hipconfig",
        "ptxas",
        "nvidia-smi",
    }
)
_QUERIES = frozenset(
    {
        "nvidia-smi",
        "rocminfo",
        "rocm_agent_enumerator",
        "uname",
        "which",
        "nproc",
        "lscpu",
        "getconf",
        "hipconfig",
    }
)
_GIT_READS = frozenset({"rev-parse", "describe", "log", "status", "show", "ls-files", "rev-list"})


# A command that runs a Python script of the project (a generator): python gen.py -o out.
_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
# At most this many files written are recorded, each with who wrote it.
_MAX_WRITTEN = 20000


class Guards:
    """Installed once, before setup.py runs. Files written are recorded with the project's
    module that wrote them (for a generate step); a project's Python script that setup.py runs
    as a command runs in this process, under these guards. *skip*: wheelforge's own files."""

    def __init__(
        self,
        record: dict[str, Any],
        root: str,
        where: Callable[[], str],
        *,
        skip: tuple[str, ...] = (),
    ) -> None:
        self.record = record
        self.root = root
        self.where = where
        self.skip = frozenset({os.path.abspath(__file__), *skip})  # noqa: PTH100
        self.real_open = builtins.open

    def in_root(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def install(self) -> None:
        self.close_network()
        self.guard_commands()
        self.guard_writes()

    def close_network(self) -> None:
        def refuse(target: object) -> OSError:
            if isinstance(target, tuple) and len(target) >= 2:
                target = f"{target[0]}:{target[1]}"  # (host, port) as socket calls take it
            self.record["network"].append({"detail": str(target), "where": self.where()})
            return OSError(101, f"wheelforge init closes the network (tried {target})")

        def connect(self: socket.socket, address: object) -> None:
            raise refuse(address)

        def connect_ex(self: socket.socket, address: object) -> int:
            raise refuse(address)

        def create_connection(address: object, *args: object, **kwargs: object) -> socket.socket:
            raise refuse(address)

        def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> list[Any]:
            raise refuse(f"{host}:{port}")

        sock: Any = socket.socket
        sock.connect, sock.connect_ex = connect, connect_ex
        module: Any = socket
        module.create_connection, module.getaddrinfo = create_connection, getaddrinfo

    def guard_commands(self) -> None:
        real_popen: Any = subprocess.Popen
        record, where = self.record, self.where

        guards = self

        class GuardedPopen(real_popen):  # type: ignore[misc]
            def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
                argv = _argv(args, bool(kwargs.get("shell")))
                cwd = os.fsdecode(kwargs.get("cwd") or os.getcwd())  # noqa: PTH109
                if guards.project_script(argv, cwd):
                    code = guards.generator(argv, cwd)
                    args, kwargs["shell"] = (
                        [sys.executable, "-c", f"import sys; sys.exit({code})"],
                        False,
                    )
                    kwargs.pop("executable", None)
                    kwargs.pop("cwd", None)
                    rest = ()
                elif not allowed(argv):
                    record["refused"].append({"detail": shlex.join(argv), "where": where()})
                    args, kwargs["shell"] = _REFUSED, False
                    kwargs.pop("executable", None)
                    kwargs.pop("cwd", None)
                    rest = ()
                super().__init__(args, *rest, **kwargs)

        subprocess.Popen = GuardedPopen  # type: ignore[misc]
        real_system = os.system

        def system(command: str) -> int:
            argv = shlex.split(command)
            here = os.getcwd()  # noqa: PTH109
            if self.project_script(argv, here):
                return (self.generator(argv, here) & 0xFF) << 8
            if allowed(argv):
                return real_system(command)
            record["refused"].append({"detail": command, "where": where()})
            return 256  # exit status 1, as os.system encodes it

        os_module: Any = os
        os_module.system = system

    def guard_writes(self) -> None:
        temp = os.path.realpath(tempfile.gettempdir())

        def guarded(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, int) or not any(c in mode for c in "wax+"):
                return self.real_open(file, mode, *args, **kwargs)
            path = os.path.realpath(os.fsdecode(file))
            if self.in_root(path):
                rel = os.path.relpath(path, self.root)
                if rel not in self.record["writes"]:
                    self.record["writes"].append(rel)
                self.written(path)
            elif path == temp or path.startswith(temp + os.sep):
                self.written(path)
            else:
                self.record["refused"].append({"detail": f"write {path}", "where": self.where()})
                raise PermissionError(
                    13, "wheelforge init lets setup.py write only inside the project folder", path
                )
            return self.real_open(file, mode, *args, **kwargs)

        builtins.open = guarded
        io.open = guarded

    def written(self, path: str) -> None:
        if len(self.record["written"]) < _MAX_WRITTEN:
            self.record["written"].append({"path": path, **(self.writer() or {})})

    def writer(self) -> dict[str, Any] | None:
        """Which of the project's modules is writing a file, and the call setup.py made into
        it: ``{"by": "gen/kernels.py", "entry": {"function": "main", "module": "gen.kernels",
        "args": ["out"]}}``; ``by`` is setup.py when setup.py writes itself. None: no project
        code is writing."""
        frames: list[types.FrameType] = []
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        frames.reverse()  # the outermost first
        project = []
        for i, f in enumerate(frames):
            name = os.path.abspath(f.f_code.co_filename)  # noqa: PTH100
            if name not in self.skip and self.in_root(name) and "site-packages" not in name:
                project.append((i, name))
        if not project:
            return None
        by = project[-1][1]
        entry = frames[next(i for i, name in project if name == by)]
        code = entry.f_code
        args = [_word(entry.f_locals.get(n)) for n in code.co_varnames[: code.co_argcount]]
        return {
            "by": os.path.relpath(by, self.root),
            "entry": {
                "function": code.co_name,
                "module": str(entry.f_globals.get("__name__", "")),
                "args": args,
            },
        }

    def run_script(self, argv: list[str], cwd: str) -> int:
        """A project's Python script run in this process (``python gen.py -o out``, as setup.py
        runs it, or a generator init tries): its exit code."""
        script = os.path.realpath(os.path.join(cwd, argv[1]))  # noqa: PTH118
        saved = (list(sys.argv), os.getcwd(), list(sys.path))  # noqa: PTH109
        os.chdir(cwd)
        sys.argv = list(argv[1:])
        sys.path.insert(0, os.path.dirname(script))  # noqa: PTH120
        code: int = 0
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:
            code = 1
            self.record.setdefault("generator_errors", []).append(
                f"{argv[1]}: {type(exc).__name__}: {exc}"[:500]
            )
        finally:
            sys.argv, sys.path[:] = saved[0], saved[2]
            os.chdir(saved[1])
        return code

    def project_script(self, argv: list[str], cwd: str) -> bool:
        """Whether *argv* runs a Python script of the project: ``python gen.py ...``."""
        if len(argv) < 2 or not argv[1].endswith(".py"):
            return False
        program = argv[0]
        is_python = _PYTHON_RE.match(os.path.basename(program)) is not None  # noqa: PTH119
        if not is_python and os.path.realpath(program) != os.path.realpath(sys.executable):
            return False
        script = os.path.realpath(os.path.join(cwd, argv[1]))  # noqa: PTH118
        return self.in_root(script) and os.path.isfile(script)  # noqa: PTH113

    def generator(self, argv: list[str], cwd: str) -> int:
        """Run the project's script *argv* here, under these guards (what it writes is recorded
        with who wrote it), as pip's build would run it; recorded as a generator."""
        where = self.where()
        code = self.run_script(argv, cwd)
        script = os.path.realpath(os.path.join(cwd, argv[1]))  # noqa: PTH118
        self.record["generators"].append(
            {
                "argv": argv,
                "cwd": os.path.realpath(cwd),
                "script": os.path.relpath(script, self.root),
                "where": where,
                "exit": code,
            }
        )
        return code


def allowed(argv: list[str]) -> bool:
    """Whether *argv* is a read-only query setup.py may run."""
    if not argv:
        return False
    program = os.path.basename(argv[0])  # noqa: PTH119
    rest = argv[1:]
    if program in _ASKED_VERSION and rest and all(a in _VERSION_ARGS for a in rest):
        return True
    if program in _QUERIES:
        return True
    if program == "git":
        words = [a for a in rest if not a.startswith("-")]
        if words[:1] and words[0] in _GIT_READS:
            return True
        if words[:2] == ["submodule", "status"]:
            return True
        return words[:1] == ["config"] and any(a.startswith("--get") for a in rest)
    return program == "ldconfig" and rest == ["-p"]


def _argv(args: object, shell: bool) -> list[str]:
    if isinstance(args, str | bytes | os.PathLike):
        text = os.fsdecode(args)
        return shlex.split(text) if shell else [text]
    return [os.fsdecode(a) for a in args]  # type: ignore[attr-defined]


_REFUSED = [sys.executable, "-c", "import sys; sys.exit(1)"]


def _word(value: object) -> object:
    """An argument as the record keeps it: a string, a path as its string, a number; else its
    type's name (a generate step's command cannot pass it)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return {"type": type(value).__name__}
