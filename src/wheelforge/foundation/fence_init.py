"""The unshare fence's set-up, run as the first process of fresh user, mount, PID, network, IPC
and UTS namespaces (``unshare --user --map-root-user ... python -I -S fence_init.py PLAN --
COMMAND``; fence.py writes the command line): what bubblewrap does, with the kernel's mount(2)
and util-linux's setpriv.

1. Every folder it must show again (the writable ones, the readable ones under a hidden
   folder, the device nodes) is opened (O_PATH) while it is still visible.
2. Every mount is made read-only (a bind remount keeps its nosuid, nodev, noexec: the kernel
   refuses to clear those on mounts a user namespace inherits).
3. /proc of the new PID namespace, an empty tmpfs on each hidden folder, a /dev of a few
   nodes; the opened folders bound back, the writable ones read-write.
4. setpriv drops every capability (and the bounding set, so no later exec gets them back) and
   sets no_new_privs, then runs the command, which becomes PID 1: when it ends the kernel ends
   every process left in the namespace.

Stdlib only, no wheelforge import (it runs under ``-I -S``). A step that fails ends it with exit
code 125 and one ``wheelforge fence:`` line on stderr, before the command ever runs."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class Failed(Exception):
    pass


def mount(
    source: str, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    code = _LIBC.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if code != 0:
        errno = ctypes.get_errno()
        raise Failed(f"mount {source} on {target}: {os.strerror(errno)}")


def _unescape(field: str) -> str:
    r"""A mountinfo path: spaces, tabs, newlines and backslashes are written \040 and so on."""
    out, i = [], 0
    while i < len(field):
        digits = field[i + 1 : i + 4]
        if field[i] == "\\" and len(digits) == 3 and digits.isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts() -> list[tuple[str, int]]:
    """Every mount point of this namespace, parents first, with the flags a remount keeps."""
    found = []
    with open("/proc/self/mountinfo") as file:  # noqa: PTH123 - stdlib only, any Python
        for line in file:
            fields = line.split()
            options = fields[5].split(",")
            found.append((_unescape(fields[4]), sum(f for o, f in _KEPT.items() if o in options)))
    return found


def read_only() -> None:
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    for target, kept in mounts():
        try:
            mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
        except Failed:
            if os.path.exists(target):  # noqa: PTH110 - an over-mounted path is unreachable anyway
                raise


def _makedirs(path: str) -> None:
    os.makedirs(path, exist_ok=True)  # noqa: PTH103


def _bind(fd: int, target: str, *, writable: bool, is_dir: bool = True) -> None:
    if is_dir:
        _makedirs(target)
    elif not os.path.exists(target):  # noqa: PTH110
        _makedirs(os.path.dirname(target))  # noqa: PTH120
        with open(target, "w"):  # noqa: PTH123 - a mount point for a device node
            pass
    source = f"/proc/self/fd/{fd}"
    mount(source, target, None, MS_BIND | MS_REC)
    if not writable:
        mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    else:
        kept = next((k for t, k in reversed(mounts()) if t == target), 0)
        mount("none", target, None, MS_REMOUNT | MS_BIND | kept)


def _dev(devices: dict[str, int], gpus: dict[str, int]) -> None:
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755")
    for path, fd in devices.items():
        _bind(fd, path, writable=True, is_dir=False)
    for path, fd in gpus.items():
        _bind(fd, path, writable=True, is_dir=os.path.isdir(f"/proc/self/fd/{fd}"))  # noqa: PTH112
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        os.symlink(target, f"/dev/{name}")  # noqa: PTH211
    for folder in ("/dev/pts", "/dev/shm"):
        _makedirs(folder)
    with contextlib.suppress(Failed):  # a terminal inside is a nicety, not needed to fence
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")


def _opened(paths: list[str]) -> dict[str, int]:
    opened = {}
    for path in paths:
        try:
            opened[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError as exc:
            raise Failed(f"cannot open {path}: {exc.strerror}") from None
    return opened


def set_up(plan: dict[str, object]) -> None:
    def strings(key: str) -> list[str]:
        value = plan.get(key) or []
        return [str(v) for v in value] if isinstance(value, list) else []

    writable = _opened(strings("writable"))
    readable = _opened(strings("readable"))
    devices = _opened([d for d in strings("devices") if os.path.exists(d)])  # noqa: PTH110
    gpus = _opened([g for g in strings("gpus") if os.path.exists(g)])  # noqa: PTH110
    read_only()
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for hidden in strings("hidden"):
        mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    _dev(devices, gpus)
    for path, fd in readable.items():
        _bind(fd, path, writable=False)
    for path, fd in writable.items():
        _bind(fd, path, writable=True)
    for fd in (*writable.values(), *readable.values(), *devices.values(), *gpus.values()):
        os.close(fd)
    os.chdir(str(plan.get("cwd") or "/"))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("wheelforge fence: usage: fence_init.py PLAN -- COMMAND...\n")
        return 125
    try:
        set_up(json.loads(argv[1]))
    except (Failed, OSError, ValueError) as exc:
        sys.stderr.write(f"wheelforge fence: {exc}\n")
        return 125
    setpriv = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    try:
        os.execvp(setpriv[0], [*setpriv, *argv[3:]])
    except OSError as exc:
        sys.stderr.write(f"wheelforge fence: cannot run setpriv: {exc.strerror}\n")
    return 125


if __name__ == "__main__":
    sys.exit(main(sys.argv))
