"""The one subprocess wrapper: finds the program, echoes the command when asked, and turns a
failure into a :class:`ToolError` that carries the tool's own output.

Every tool runs in a session of its own (``setsid``), which wheelforge owns: when wheelforge is
interrupted (an exception, SIGINT or SIGTERM turned into one by cli/signals.py) while a tool
runs, the whole session is stopped before the exception goes on, so no grandchild outlives it.
A session, not a process group, because ninja puts each command it runs into a process group
of its own (POSIX_SPAWN_SETPGROUP, ninja's subprocess-posix.cc): killing ninja's group would
orphan nvcc, cicc and ptxas. They stay in the session, which only an explicit setsid leaves.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from wheelforge.foundation import log, writers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, ToolError

# How many lines of a failing tool's output an error shows.
OUTPUT_TAIL_LINES = 40
# How long a stopped tool gets to end on SIGTERM before its session gets SIGKILL: ninja uses it to
# stop its commands and delete their half-written outputs.
STOP_GRACE_S = 5.0
# Every tool runs within a deadline, by what it is asked to do (docs/robustness.md): a question
# (--version, -dumpversion, a python -c probe), a job (auditwheel, a venv, dpkg-deb), a download
# (pip install torch, apt-get download), a build (ninja, a test suite).
PROBE_S = 90.0
TOOL_S = 3600.0
DOWNLOAD_S = 4 * 3600.0
BUILD_S = 24 * 3600.0
# What run() keeps of a tool's output: no answer wheelforge parses is near it, and a tool that
# prints without end is stopped there. stream() keeps the last STREAM_KEPT bytes of its lines.
OUTPUT_CAP = 16 << 20
STREAM_KEPT = 16 << 20
LINE_CAP = 1 << 20
_BLOCK = 1 << 16
_PROC = Path("/proc")
# What the temporary folder's probe writes: nvcc's intermediates of one source are megabytes,
# so a folder that cannot take this much fails every compile.
TEMP_PROBE_BYTES = 1 << 20
_TEMP_OK: set[tuple[str, int, int]] = set()  # (folder, st_dev, st_ino) probed and writable


class _Running:
    """The tools run() and stream() have running now, from any thread: stop_all() stops them
    all at once (variants built side by side, build/together.py), and until resume()
    a tool about to start raises the reason instead."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tools: dict[int, subprocess.Popen[Any]] = {}
        self.stopped: Callable[[], BaseException] | None = None

    def add(self, popen: subprocess.Popen[Any]) -> None:
        """Count *popen* in; stopped already (stop_all came while it started): stop it too."""
        with self.lock:
            stopped = self.stopped
            if stopped is None:
                # a helper of start() is not removed when it ends: the ended ones go here
                for pid in [pid for pid, p in self.tools.items() if p.poll() is not None]:
                    del self.tools[pid]
                self.tools[popen.pid] = popen
                return
        stop(popen)
        raise stopped()

    def remove(self, popen: subprocess.Popen[Any]) -> None:
        with self.lock:
            self.tools.pop(popen.pid, None)

    def refuse(self) -> None:
        """Raise the reason the tools were stopped, if they were."""
        with self.lock:
            stopped = self.stopped
        if stopped is not None:
            raise stopped()


_RUNNING = _Running()


def stop_all(reason: Callable[[], BaseException]) -> None:
    """Stop every tool running now (SIGTERM to each one's group, SIGKILL after STOP_GRACE_S
    to what is left of its session), whichever thread waits for it: that thread then raises
    *reason*() once its tool has ended, as does any that starts a tool before resume()."""
    with _RUNNING.lock:
        _RUNNING.stopped = reason
        tools = list(_RUNNING.tools.values())
    for popen in tools:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while any(p.poll() is None for p in tools) and time.monotonic() < deadline:
        time.sleep(0.02)
    for popen in tools:
        while members := session_members(popen.pid):
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)


def refuse_if_stopped() -> None:
    """Raise the reason stop_all() gave, if the tools were stopped (a wait between tools)."""
    _RUNNING.refuse()


def resume() -> None:
    """Tools may start again (after stop_all)."""
    with _RUNNING.lock:
        _RUNNING.stopped = None


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


def check_temp_folder(env: Mapping[str, str] | None = None) -> None:
    """Refuse an unusable temporary folder before any tool starts: every compiler and
    downloader wheelforge runs (nvcc, g++, pip, apt-get) writes into ``$TMPDIR`` (``/tmp`` when
    unset), and nvcc fails even ``--list-gpu-code`` there, so a bad one made every toolkit look
    broken and a build provision another (issue 32). Python's tempfile instead falls back to
    ``/tmp`` silently. Missing, relative or not a folder: ConfigError (fix the variable);
    a folder that cannot be written (permissions, read-only, full): EnvironmentProblem."""
    value = (os.environ if env is None else env).get("TMPDIR") or ""
    folder = value or "/tmp"
    named = f"TMPDIR={value}" if value else "/tmp (TMPDIR is not set)"
    fix = "set TMPDIR to a folder you can write to (or unset it to use /tmp)"
    if value and not Path(value).is_absolute():
        raise ConfigError(
            f"{named} is a relative path: tools run in other folders would each read it "
            f"differently; {fix}"
        )
    try:
        st = Path(folder).stat()
    except OSError as exc:
        raise ConfigError(f"{named}: {exc.strerror}; {fix}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{named} is not a folder; {fix}")
    key = (folder, st.st_dev, st.st_ino)
    if key in _TEMP_OK:
        return
    try:
        writers.probe(Path(folder), TEMP_PROBE_BYTES)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            why += " (the file system is full)"
        raise EnvironmentProblem(
            f"{named}: cannot write a temporary file there ({why}), and every compiler and "
            f"downloader wheelforge runs writes there; free space or {fix}"
        ) from None
    _TEMP_OK.add(key)


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} earlier lines not shown)", *kept[-lines:]]
    return "\n".join(kept)


def run(
    args: Sequence[str | Path],
    *,
    hint: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stream: bool = False,
    what: str | None = None,
    replace_env: bool = False,
) -> Result:
    """Run a program to completion within *timeout* seconds (PROBE_S, TOOL_S, DOWNLOAD_S,
    BUILD_S), its captured output within OUTPUT_CAP; past either it is stopped and a ToolError
    says which.

    ``hint`` says how to install the program if it is missing. With ``stream`` the output goes
    straight to the terminal instead of being captured. ``what`` names the step in the error.
    ``env`` is added to this process's environment, or replaces it with ``replace_env``.
    ``timeout`` is a deadline in seconds: past it the tool's whole session is stopped and a
    ToolError says so (a user's setup.py that never ends, a CMake configure that hangs).
    """
    full_env = None if env is None else dict(env) if replace_env else {**os.environ, **env}
    pipe = None if stream else subprocess.PIPE
    argv, popen = _spawn(args, hint, cwd=cwd, env=full_env, stdout=pipe, stderr=pipe)
    name = what or Path(argv[0]).name
    try:
        outputs = _collect(popen, name, argv, timeout=timeout, cap=OUTPUT_CAP)
        _RUNNING.refuse()
    except BaseException:
        stop(popen)
        raise
    finally:
        _RUNNING.remove(popen)
    result = Result(
        args=tuple(argv),
        returncode=popen.returncode,
        stdout=_text(outputs.get(popen.stdout)),
        stderr=_text(outputs.get(popen.stderr)),
    )
    if check and result.returncode != 0:
        output = "\n".join(s for s in (result.stdout, result.stderr) if s.strip())
        cause = known_cause(output)
        command = shlex.join(argv)
        shown = command if len(command) <= _COMMAND_SHOWN else command[: _COMMAND_SHOWN - 3] + "..."
        raise ToolError(
            f"{name} failed with exit code {result.returncode}"
            + (f": {cause}" if cause else "")
            + f": {shown}",
            details="\n".join(x for x in (command if shown != command else "", tail(output)) if x)
            or None,
        )
    return result


# What a tool's output says that names the cause better than its exit code; said in the
# one-line message (a full disk read as "compiling k.cu failed", ENOSPC only in the details).
_CAUSES = (
    ("No space left on device", "the disk is full (No space left on device)"),
    ("Disk quota exceeded", "the disk quota is exceeded"),
    ("Read-only file system", "a folder it writes is on a read-only file system"),
)
_COMMAND_SHOWN = 200  # of a command in a one-line message (the whole one is in the details)


def known_cause(output: str) -> str | None:
    """The cause a tool's *output* names, when it is one of _CAUSES."""
    return next((cause for needle, cause in _CAUSES if needle in output), None)


def _text(data: bytearray | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def _collect(
    popen: subprocess.Popen[bytes],
    name: str,
    argv: Sequence[str],
    *,
    timeout: float,
    on_data: Callable[[bytes], None] | None = None,
    cap: int | None = None,
) -> dict[object, bytearray]:
    """Read the tool's pipes until they close and it ends, within *timeout*; with *on_data*
    each block read is handed on instead of kept. More than *cap* bytes kept: ToolError."""
    deadline = time.monotonic() + timeout
    kept: dict[object, bytearray] = {}
    with selectors.DefaultSelector() as selector:
        for pipe in (popen.stdout, popen.stderr):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ)
                kept[pipe] = bytearray()
        total = 0
        while selector.get_map():
            for key, _ in selector.select(_left(deadline, timeout, name, argv)):
                block = os.read(key.fd, _BLOCK)
                if not block:
                    selector.unregister(key.fileobj)
                elif on_data is not None:
                    on_data(block)
                else:
                    kept[key.fileobj] += block
                    total += len(block)
                    if cap is not None and total > cap:
                        raise ToolError(
                            f"{name} printed more than {cap >> 20} MiB, which no answer of it "
                            f"needs; stopped it: {shlex.join(argv)}"
                        )
    try:
        popen.wait(timeout=_left(deadline, timeout, name, argv))
    except subprocess.TimeoutExpired:
        _left(0.0, timeout, name, argv)
    return kept


def _left(deadline: float, timeout: float, name: str, argv: Sequence[str]) -> float:
    """Seconds left until *deadline*; none left: the ToolError of a tool that ran past it."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise ToolError(
            f"{name} did not finish within {timeout:.0f} s; stopped it: {shlex.join(argv)}"
        )
    return left


def stream(
    args: Sequence[str | Path],
    *,
    hint: str,
    on_line: Callable[[str], None],
    timeout: float,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    cwd: Path | None = None,
) -> Result:
    """Run a program within *timeout* seconds, handing each line of its output (stderr merged
    into stdout) to *on_line* as it comes; the result's ``stdout`` keeps the last STREAM_KEPT
    bytes of it (a line of the earlier ones says how many were dropped). Not checked: the
    caller reads the exit code, as a failing compile needs its own message. *on_start* gets the
    program's pid, which is also its session's id (everything it starts stays in that session)."""
    full_env = None if env is None else {**os.environ, **env}
    lines = _Lines(on_line)
    argv, child = _spawn(
        args, hint, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        if on_start is not None:
            on_start(child.pid)
        _collect(child, Path(argv[0]).name, argv, timeout=timeout, on_data=lines.feed, cap=None)
        lines.feed(b"", end=True)
        _RUNNING.refuse()
    except BaseException:
        stop(child)
        raise
    finally:
        _RUNNING.remove(child)
    return Result(args=tuple(argv), returncode=child.returncode, stdout=lines.text(), stderr="")


class _Lines:
    """Blocks of output cut into lines for on_line, the last STREAM_KEPT bytes of them kept; a
    line longer than LINE_CAP is cut there (a tool that prints no newline cannot grow one line
    without end)."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.pending = bytearray()
        self.kept: collections.deque[str] = collections.deque()
        self.size = 0
        self.dropped = 0

    def feed(self, block: bytes, *, end: bool = False) -> None:
        self.pending += block
        while (cut := self.pending.find(b"\n")) >= 0 or len(self.pending) > LINE_CAP:
            stop_at = cut + 1 if 0 <= cut < LINE_CAP else LINE_CAP
            self._line(bytes(self.pending[:stop_at]))
            del self.pending[:stop_at]
        if end and self.pending:
            self._line(bytes(self.pending))
            self.pending.clear()

    def _line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace")
        self.on_line(line.rstrip("\n"))
        self.kept.append(line)
        self.size += len(line)
        while self.size > STREAM_KEPT and len(self.kept) > 1:
            self.size -= len(self.kept.popleft())
            self.dropped += 1

    def text(self) -> str:
        head = f"... ({self.dropped} earlier lines not kept)\n" if self.dropped else ""
        return head + "".join(self.kept)


def start(
    args: Sequence[str | Path],
    *,
    hint: str,
    cwd: Path,
    stderr: IO[str],
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start a long-lived helper that is spoken to through its stdin and stdout (text lines),
    its stderr into *stderr*, in a session of its own like every tool; stop() ends it, closing
    its stdin lets it end by itself. *env* is added to this process's environment."""
    stdio = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": stderr}
    full_env = None if not env else {**os.environ, **env}
    return _spawn(args, hint, cwd=cwd, env=full_env, bufsize=1, text=True, **stdio)[1]


@contextlib.contextmanager
def watchdog(popen: subprocess.Popen[Any], seconds: float, *, what: str) -> Iterator[None]:
    """The deadline of a helper started with start(): if the block runs past *seconds*, the
    helper is stopped (its pipes close, so a read waiting on it ends) and ToolError says so."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        stop(popen)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception:
        if not fired.is_set():
            raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise ToolError(f"{what} did not answer within {seconds:.0f} s; stopped it")


def _spawn(
    args: Sequence[str | Path], hint: str, *, text: bool = False, **popen: Any
) -> tuple[list[str], subprocess.Popen[Any]]:
    """The program found (or *hint* in the error), the command logged, and the process started
    in a session of its own (see the module's docstring); its pipes are bytes unless *text*."""
    argv = [str(a) for a in args]
    argv[0] = which(argv[0], hint=hint)
    check_temp_folder()  # the user's, which a child env's own TMPDIR (pip's) was made under
    if popen.get("env") is not None:
        check_temp_folder(popen["env"])
    log.command(argv)
    if text:
        popen |= {"text": True, "errors": "replace"}
    _RUNNING.refuse()
    try:
        child: subprocess.Popen[Any] = subprocess.Popen(argv, start_new_session=True, **popen)
    except OSError as exc:
        raise ToolError(f"could not run {shlex.join(argv)}: {exc.strerror}") from exc
    _RUNNING.add(child)
    return argv, child


def _drain(popen: subprocess.Popen[Any], seconds: float) -> None:
    """Read and drop what the stopping tool still prints, for at most *seconds* or until it
    closes its outputs, so a chatty tool can't block on a full pipe (nor fill memory: nothing
    is kept)."""
    with contextlib.suppress(OSError, ValueError):
        if popen.stdin is not None:
            popen.stdin.close()
    pipes = [p for p in (popen.stdout, popen.stderr) if p is not None and not p.closed]
    end = time.monotonic() + seconds
    with contextlib.suppress(OSError, ValueError), selectors.DefaultSelector() as selector:
        for pipe in pipes:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map() and (left := end - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                if not os.read(key.fd, _BLOCK):
                    selector.unregister(key.fileobj)


def session_members(sid: int) -> list[int]:
    """Live processes (zombies aside) of session *sid*, read from /proc (Linux)."""
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
        fields = line[line.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def stop(popen: subprocess.Popen[Any]) -> None:
    """Stop a tool and everything it started: SIGTERM to its process group (ninja passes it on
    to its commands and removes their partial outputs), then SIGKILL to whatever of its session
    is left, until nothing is."""
    sid = popen.pid  # start_new_session: the tool leads its session and its group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sid, signal.SIGTERM)
    _drain(popen, STOP_GRACE_S)
    deadline = time.monotonic() + STOP_GRACE_S
    while (members := session_members(sid)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=STOP_GRACE_S)
