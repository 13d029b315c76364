"""The guards of init's setup.py capture child (setup_child.py loads this file by its path, in
the build Python): the network closed, commands other than read-only queries refused, files
written only inside the project folder or the temporary folder. What each refused is recorded
in the child's record, with where in the project's code it was tried."""

from __future__ import annotations

import builtins
import io
import os
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

# Read-only queries a setup.py may run: compilers and tools asked their version, git asked
# about the checkout, the GPUs asked what they are.
_VERSION_ARGS = frozenset(
    {"-V", "--version", "-version", "-dumpversion", "-dumpfullversion", "--list-gpu-arch",
     "--list-gpu-code", "-v"}
)  # fmt: skip
_ASKED_VERSION = frozenset(
    {"nvcc", "hipcc", "gcc", "g++", "cc", "c++", "clang", "clang++", "cmake", "ninja", "hipconfig",
     "ptxas", "nvidia-smi"}
)  # fmt: skip
_QUERIES = frozenset(
    {"nvidia-smi", "rocminfo", "rocm_agent_enumerator", "uname", "which", "nproc", "lscpu",
     "getconf", "hipconfig"}
)  # fmt: skip
_GIT_READS = frozenset({"rev-parse", "describe", "log", "status", "show", "ls-files", "rev-list"})


class Guards:
    """Installed once, before setup.py runs."""

    def __init__(self, record: dict[str, Any], root: str, where: Callable[[], str]) -> None:
        self.record = record
        self.root = root
        self.where = where
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

        class GuardedPopen(real_popen):  # type: ignore[misc]
            def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
                argv = _argv(args, bool(kwargs.get("shell")))
                if not allowed(argv):
                    record["refused"].append({"detail": shlex.join(argv), "where": where()})
                    args, kwargs["shell"] = _REFUSED, False
                    kwargs.pop("executable", None)
                    kwargs.pop("cwd", None)
                    rest = ()
                super().__init__(args, *rest, **kwargs)

        subprocess.Popen = GuardedPopen  # type: ignore[misc]
        real_system = os.system

        def system(command: str) -> int:
            if allowed(shlex.split(command)):
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
            elif not (path == temp or path.startswith(temp + os.sep)):
                self.record["refused"].append({"detail": f"write {path}", "where": self.where()})
                raise PermissionError(
                    13, "wheelforge init lets setup.py write only inside the project folder", path
                )
            return self.real_open(file, mode, *args, **kwargs)

        builtins.open = guarded
        io.open = guarded


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
