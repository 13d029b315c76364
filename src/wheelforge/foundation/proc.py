"""The one subprocess wrapper: finds the program, echoes the command when asked, and turns a
failure into a :class:`ToolError` that carries the tool's own output.

Every tool runs in a session of its own (``setsid``), which wheelforge owns: when wheelforge is
interrupted (an exception, SIGINT or SIGTERM turned into one by running/signals.py) while a tool
runs, the whole session is stopped before the exception goes on, so no grandchild outlives it.
A session, not a process group, because ninja puts each command it runs into a process group
of its own (POSIX_SPAWN_SETPGROUP, ninja's subprocess-posix.cc): killing ninja's group would
orphan nvcc, cicc and ptxas. They stay in the session, which only an explicit setsid leaves.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from wheelforge.foundation import log
from wheelforge.foundation.errors import EnvironmentProblem, ToolError

# How many lines of a failing tool's output an error shows.
OUTPUT_TAIL_LINES = 40
# How long a stopped tool gets to end on SIGTERM before its session gets SIGKILL: ninja uses it to
# stop its commands and delete their half-written outputs.
STOP_GRACE_S = 5.0
_PROC = Path("/proc")


@dataclass(frozen=True, kw_only=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def which(program: str | Path, *, hint: str) -> str:
    """Absolute path of *program*, or an EnvironmentProblem that says how to get it."""
    found = shutil.which(str(program))
    if found is None:
        raise EnvironmentProblem(f"{program} was not found: {hint}")
    # A relative one (./x, .venv/bin/python) is made absolute here, so a tool started in
    # another folder (cwd=) still runs; abspath, not resolve: a venv's python is a symlink.
    return os.path.abspath(found)  # noqa: PTH100 - resolve() would follow the symlink


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} earlier lines not shown)", *kept[-lines:]]
    return "\n".join(kept)


def run(
    args: Sequence[str | Path],
    *,
    hint: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stream: bool = False,
    what: str | None = None,
    replace_env: bool = False,
    timeout: float | None = None,
) -> Result:
    """Run a program to completion.

    ``hint`` says how to install the program if it is missing. With ``stream`` the output goes
    straight to the terminal instead of being captured. ``what`` names the step in the error.
    ``env`` is added to this process's environment, or replaces it with ``replace_env``.
    ``timeout`` is a deadline in seconds: past it the tool's whole session is stopped and a
    ToolError says so (a user's setup.py that never ends, a CMake configure that hangs).
    """
    full_env = None if env is None else dict(env) if replace_env else {**os.environ, **env}
    argv, popen = _spawn(
        args,
        hint,
        cwd=cwd,
        env=full_env,
        stdout=None if stream else subprocess.PIPE,
        stderr=None if stream else subprocess.PIPE,
    )
    try:
        stdout, stderr = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stop(popen)
        name = what or Path(argv[0]).name
        output = "\n".join(_text(s) for s in (exc.stdout, exc.stderr) if s and _text(s).strip())
        raise ToolError(
            f"{name} did not finish within {timeout:g} s and was stopped: {shlex.join(argv)}",
            details=tail(output) if output else None,
        ) from None
    except BaseException:
        stop(popen)
        raise
    result = Result(
        args=tuple(argv),
        returncode=popen.returncode,
        stdout=stdout or "",
        stderr=stderr or "",
    )
    if check and result.returncode != 0:
        name = what or Path(argv[0]).name
        output = "\n".join(s for s in (result.stdout, result.stderr) if s.strip())
        raise ToolError(
            f"{name} failed with exit code {result.returncode}: {shlex.join(argv)}",
            details=tail(output) if output else None,
        )
    return result


def _text(data: str | bytes) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def stream(
    args: Sequence[str | Path],
    *,
    hint: str,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    cwd: Path | None = None,
) -> Result:
    """Run a program, handing each line of its output (stderr merged into stdout) to *on_line*
    as it comes; the whole output is in the result's ``stdout``. Not checked: the caller reads
    the exit code, as a failing compile needs its own message. *on_start* gets the program's
    pid, which is also its session's id (everything it starts stays in that session)."""
    full_env = None if env is None else {**os.environ, **env}
    lines: list[str] = []
    argv, child = _spawn(
        args,
        hint,
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        bufsize=1,
    )
    with child:
        try:
            if on_start is not None:
                on_start(child.pid)
            assert child.stdout is not None  # stdout=PIPE above
            for line in child.stdout:
                lines.append(line)
                on_line(line.rstrip("\n"))
            returncode = child.wait()
        except BaseException:
            stop(child)
            raise
    return Result(args=tuple(argv), returncode=returncode, stdout="".join(lines), stderr="")


def start(
    args: Sequence[str | Path], *, hint: str, cwd: Path, stderr: IO[str]
) -> subprocess.Popen[str]:
    """Start a long-lived helper that is spoken to through its stdin and stdout (text lines),
    its stderr into *stderr*, in a session of its own like every tool; stop() ends it, closing
    its stdin lets it end by itself."""
    stdio = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": stderr}
    return _spawn(args, hint, cwd=cwd, bufsize=1, **stdio)[1]


def _spawn(
    args: Sequence[str | Path], hint: str, **popen: Any
) -> tuple[list[str], subprocess.Popen[str]]:
    """The program found (or *hint* in the error), the command logged, and the process started
    as text, in a session of its own (see the module's docstring)."""
    argv = [str(a) for a in args]
    argv[0] = which(argv[0], hint=hint)
    log.command(argv)
    try:
        child = subprocess.Popen(argv, text=True, errors="replace", start_new_session=True, **popen)
    except OSError as exc:
        raise ToolError(f"could not run {shlex.join(argv)}: {exc.strerror}") from exc
    return argv, child


def session_members(sid: int) -> list[int]:
    """Live processes (zombies aside) of session *sid*, read from /proc (Linux)."""
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def stop(popen: subprocess.Popen[str]) -> None:
    """Stop a tool and everything it started: SIGTERM to its process group (ninja passes it on
    to its commands and removes their partial outputs), then SIGKILL to whatever of its session
    is left, until nothing is."""
    sid = popen.pid  # start_new_session: the tool leads its session and its group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        popen.communicate(timeout=STOP_GRACE_S)  # drained, so a chatty tool can't block on a pipe
    deadline = time.monotonic() + STOP_GRACE_S
    while (members := session_members(sid)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=STOP_GRACE_S)
