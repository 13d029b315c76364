"""The processes under a tool wheelforge started, read from /proc (Linux): which commands a
running ninja has going and what each of them runs now (nvcc's cicc or ptxas, g++'s cc1plus).

Read-only and best effort: a process may end between two reads, and one of another user may not
be readable; either is left out, never an error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
# A command line longer than this is cut: it only names the program and its output.
_CMDLINE_CAP = 1 << 16


@dataclass(frozen=True, kw_only=True)
class Process:
    pid: int
    ppid: int
    argv: tuple[str, ...]

    @property
    def program(self) -> str:
        """The program's file name (``cicc``, ``ptxas``, ``cc1plus``)."""
        return Path(self.argv[0]).name if self.argv else ""


def _stat(entry: Path) -> tuple[int, int] | None:
    """(ppid, session) of a /proc/<pid> entry; None when it ended or is a zombie."""
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 4 or fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[3])


def _argv(entry: Path) -> tuple[str, ...]:
    try:
        with (entry / "cmdline").open("rb") as file:
            raw = file.read(_CMDLINE_CAP)
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def session(sid: int, proc: Path = _PROC) -> list[Process]:
    """The live processes of session *sid* (a tool wheelforge started leads its own session:
    foundation/proc.py), each with its parent and command line."""
    found = []
    for entry in _entries(proc):
        stat = _stat(entry)
        if stat is not None and stat[1] == sid:
            found.append(Process(pid=int(entry.name), ppid=stat[0], argv=_argv(entry)))
    return found


def children(pid: int, proc: Path = _PROC) -> list[Process]:
    """The live child processes of *pid*."""
    found = []
    for entry in _entries(proc):
        stat = _stat(entry)
        if stat is not None and stat[0] == pid:
            found.append(Process(pid=int(entry.name), ppid=pid, argv=_argv(entry)))
    return found


def descendants(root: int, processes: list[Process]) -> list[Process]:
    """The processes below *root* among *processes*, parents before their children."""
    by_parent: dict[int, list[Process]] = {}
    for p in processes:
        by_parent.setdefault(p.ppid, []).append(p)
    out: list[Process] = []
    stack = list(reversed(by_parent.get(root, [])))
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(reversed(by_parent.get(p.pid, [])))
    return out


def _entries(proc: Path) -> Iterator[Path]:
    try:
        entries = list(proc.iterdir())
    except OSError:
        return
    yield from (entry for entry in entries if entry.name.isdigit())
