"""The one subprocess wrapper: finds the program, echoes the command when asked, and turns a
failure into a :class:`ToolError` that carries the tool's own output."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.foundation import log
from wheelforge.foundation.errors import EnvironmentProblem, ToolError

# How many lines of a failing tool's output an error shows.
OUTPUT_TAIL_LINES = 40


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
    return found


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
) -> Result:
    """Run a program to completion.

    ``hint`` says how to install the program if it is missing. With ``stream`` the output goes
    straight to the terminal instead of being captured. ``what`` names the step in the error.
    ``env`` is added to this process's environment, or replaces it with ``replace_env``.
    """
    argv = [str(a) for a in args]
    argv[0] = which(argv[0], hint=hint)
    log.command(argv)
    full_env = None if env is None else dict(env) if replace_env else {**os.environ, **env}
    try:
        proc = subprocess.run(  # noqa: PLW1510 - checked below, with the tool's output
            argv,
            cwd=cwd,
            env=full_env,
            text=True,
            stdout=None if stream else subprocess.PIPE,
            stderr=None if stream else subprocess.PIPE,
            errors="replace",
        )
    except OSError as exc:
        raise ToolError(f"could not run {shlex.join(argv)}: {exc.strerror}") from exc
    result = Result(
        args=tuple(argv),
        returncode=proc.returncode,
        stdout=proc.stdout or "",
        stderr=proc.stderr or "",
    )
    if check and proc.returncode != 0:
        name = what or Path(argv[0]).name
        output = "\n".join(s for s in (result.stdout, result.stderr) if s.strip())
        raise ToolError(
            f"{name} failed with exit code {proc.returncode}: {shlex.join(argv)}",
            details=tail(output) if output else None,
        )
    return result


def stream(
    args: Sequence[str | Path],
    *,
    hint: str,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
) -> Result:
    """Run a program, handing each line of its output (stderr merged into stdout) to *on_line*
    as it comes; the whole output is in the result's ``stdout``. Not checked: the caller reads
    the exit code, as a failing compile needs its own message."""
    argv = [str(a) for a in args]
    argv[0] = which(argv[0], hint=hint)
    log.command(argv)
    full_env = None if env is None else {**os.environ, **env}
    lines: list[str] = []
    try:
        with subprocess.Popen(
            argv,
            env=full_env,
            text=True,
            errors="replace",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=1,
        ) as child:
            assert child.stdout is not None  # stdout=PIPE above
            for line in child.stdout:
                lines.append(line)
                on_line(line.rstrip("\n"))
            returncode = child.wait()
    except OSError as exc:
        raise ToolError(f"could not run {shlex.join(argv)}: {exc.strerror}") from exc
    return Result(args=tuple(argv), returncode=returncode, stdout="".join(lines), stderr="")
