"""The unshare fence's set-up, run as the first process of fresh user, mount, PID, network, IPC
and UTS namespaces (``unshare --user --map-root-user ... python -I -S fence_init.py PLAN --
COMMAND``; fence.py writes the command line): what bubblewrap does, with the kernel's mount(2)
and util-linux's setpriv.

1. Every folder it must show (the system's, the readable and writable ones, the device nodes)
   is opened (O_PATH) while it is still visible.
2. Every mount is made read-only (a bind remount keeps its nosuid, nodev, noexec: the kernel
   refuses to clear those on mounts a user namespace inherits).
3. A new root, an empty tmpfs: the opened folders bound into it (the writable ones
   read-write), the system's links made again, /proc of the new PID namespace, an empty tmpfs on
   each hidden folder, a /dev of a few nodes; pivot_root into it, the old root detached, the new
   root made read-only. Nothing else of the machine is there (the home folders, other sockets).
4. The seccomp filter (``seccomp_filter``: no AF_UNIX socket, no io_uring) installed with
   no_new_privs.
5. setpriv drops every capability (and the bounding set, so no later exec gets them back) and
   sets no_new_privs, then runs the command, which becomes PID 1: when it ends the kernel ends
   every process left in the namespace.

Under bubblewrap, which builds the view itself, only step 4 runs (``{"only": "seccomp"}``), as
the command's first process: the same filter on both ways.

Stdlib only, no wheelforge import (it runs under ``-I -S``). A step that fails ends it with exit
code 125 and one ``wheelforge fence:`` line on stderr, before the command ever runs."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import platform
import struct
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
# pivot_root has no libc wrapper: its number on the machines wheelforge builds on.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
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
    # The flags the kernel locks on an inherited mount (nosuid, nodev, noexec) are kept, or the
    # remount is refused.
    kept = next((k for t, k in reversed(mounts()) if t == target), 0)
    mount("none", target, None, MS_REMOUNT | MS_BIND | kept | (0 if writable else MS_RDONLY))


def _dev(at: str, devices: dict[str, int], gpus: dict[str, int]) -> None:
    _makedirs(at)
    mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755")
    for path, fd in devices.items():
        _bind(fd, at + path.removeprefix("/dev"), writable=True, is_dir=False)
    for path, fd in gpus.items():
        is_dir = os.path.isdir(f"/proc/self/fd/{fd}")  # noqa: PTH112
        _bind(fd, at + path.removeprefix("/dev"), writable=True, is_dir=is_dir)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        os.symlink(target, f"{at}/{name}")  # noqa: PTH211
    _makedirs(f"{at}/pts")
    with contextlib.suppress(Failed):  # a terminal inside is a nicety, not needed to fence
        mount("devpts", f"{at}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666")


def _opened(paths: list[str]) -> dict[str, int]:
    opened = {}
    for path in paths:
        try:
            opened[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError as exc:
            raise Failed(f"cannot open {path}: {exc.strerror}") from None
    return opened


def _pivot_root(new: str) -> None:
    """*new* becomes / and the old root is detached: nothing of it is left to reach."""
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise Failed(f"pivot_root: not known on {platform.machine()}")
    os.chdir(new)
    if _LIBC.syscall(ctypes.c_long(number), b".", b".") != 0:
        raise Failed(f"pivot_root {new}: {os.strerror(ctypes.get_errno())}")
    if _LIBC.umount2(b".", MNT_DETACH) != 0:
        raise Failed(f"detaching the old root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


# Where the new root is built: a tmpfs on /tmp of this mount namespace (bubblewrap's choice too).
_BASE = "/tmp"


def set_up(plan: dict[str, object]) -> None:
    """The view of the plan's ``steps`` (fence.py's Fence.view, parents first): each
    ``[how, path, extra]`` with how one of ro, rw (a bind), link (extra: its target), tmpfs,
    proc, dev, mask (extra: dir, shown as an empty read-only tmpfs, or file, as /dev/null)."""
    raw = plan.get("steps")
    steps = (
        [[str(v) for v in step] for step in raw if isinstance(step, list)]
        if isinstance(raw, list)
        else []
    )

    def strings(key: str) -> list[str]:
        value = plan.get(key) or []
        return [str(v) for v in value] if isinstance(value, list) else []

    opened = _opened([path for how, path, *_ in steps if how in ("ro", "rw")])
    devices = _opened([d for d in strings("devices") if os.path.exists(d)])  # noqa: PTH110
    gpus = _opened([g for g in strings("gpus") if os.path.exists(g)])  # noqa: PTH110
    read_only()
    mount("tmpfs", _BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for how, path, *rest in steps:
        target = _BASE + path
        if how in ("ro", "rw"):
            _bind(opened[path], target, writable=how == "rw")
        elif how == "link":
            _makedirs(os.path.dirname(target))  # noqa: PTH120
            os.symlink(rest[0], target)  # noqa: PTH211
        elif how == "tmpfs":
            _makedirs(target)
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        elif how == "proc":
            _makedirs(target)
            mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif how == "dev":
            _dev(target, devices, gpus)
        elif how == "mask" and rest[0] == "dir":
            mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")
        elif how == "mask":
            _bind(devices["/dev/null"], target, writable=False, is_dir=False)
    for fd in (*opened.values(), *devices.values(), *gpus.values()):
        os.close(fd)
    _pivot_root(_BASE)
    mount("none", "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(str(plan.get("cwd") or "/"))


# --- the seccomp filter ---------------------------------------------------------------------
# What the mount view cannot hold: a unix socket inside a folder the build may see (the project,
# the build Python's prefix) and an abstract one (the network namespace holds those, but one
# filter closes both). No AF_UNIX socket can be made (socket(2) refused with EACCES; a
# socketpair(2) of two connected stream ends stays allowed: Python, libuv and ninja use them),
# no datagram socketpair (which could sendto(2) a named socket), no io_uring (whose
# IORING_OP_SOCKET and IORING_OP_CONNECT bypass seccomp). 32-bit calls on a 64-bit kernel are
# filtered by their own numbers (socketcall, the multiplexer whose arguments BPF cannot read, is
# refused whole); an architecture the filter does not know gets ENOSYS for every call.
AF_UNIX, SOCK_DGRAM, SOCK_TYPE_MASK = 1, 2, 0xF
EACCES, ENOSYS = 13, 38
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
_X32 = 0x40000000  # x86_64's x32 ABI: its calls are the x86_64 numbers with this bit set
_IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register (every arch)
# AUDIT_ARCH_*: (socket, socketpair, socketcall or None, the io_uring calls)
ARCHES: dict[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    0xC000003E: (
        (41, _X32 | 41),
        (53, _X32 | 53),
        (),
        (*_IO_URING, *(_X32 | n for n in _IO_URING)),
    ),
    0x40000003: ((359,), (360,), (102,), _IO_URING),  # i386 (int 0x80 on x86_64)
    0xC00000B7: ((198,), (199,), (), _IO_URING),  # aarch64
    0x40000028: ((281,), (282,), (102,), _IO_URING),  # arm (32-bit on aarch64)
}
# Classic BPF, as seccomp(2) runs it over struct seccomp_data {int nr; u32 arch; u64 ip;
# u64 args[6]}: the low 32 bits of an argument are the int the kernel reads.
LD_ABS, JEQ, AND, RET = 0x20, 0x15, 0x54, 0x06
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index + (0 if sys.byteorder == "little" else 4)


def seccomp_filter() -> bytes:
    """The filter as struct sock_filter[] bytes (code u16, jt u8, jf u8, k u32)."""
    # (code, jump-if-true label, jump-if-false label, k); a label is an index into `labels`.
    program: list[tuple[int, str | None, str | None, int]] = []
    labels: dict[str, int] = {}

    def at(label: str) -> None:
        labels[label] = len(program)

    def op(code: int, k: int, true: str | None = None, false: str | None = None) -> None:
        program.append((code, true, false, k))

    op(LD_ABS, _ARCH)
    for arch in ARCHES:
        op(JEQ, arch, f"arch-{arch}", None)
    op(RET, RET_ERRNO | ENOSYS)
    for arch, (sockets, pairs, multiplexers, rings) in ARCHES.items():
        at(f"arch-{arch}")
        op(LD_ABS, _NR)
        for nr in sockets:
            op(JEQ, nr, "socket", None)
        for nr in pairs:
            op(JEQ, nr, "socketpair", None)
        for nr in (*multiplexers, *rings):
            op(JEQ, nr, "refuse", None)
        op(RET, RET_ALLOW)
    at("socket")
    op(LD_ABS, _arg(0))
    op(JEQ, AF_UNIX, "refuse", None)
    op(RET, RET_ALLOW)
    at("socketpair")
    op(LD_ABS, _arg(1))
    op(AND, SOCK_TYPE_MASK)
    op(JEQ, SOCK_DGRAM, "refuse", None)
    op(RET, RET_ALLOW)
    at("refuse")
    op(RET, RET_ERRNO | EACCES)
    out = bytearray()
    for index, (code, true, false, k) in enumerate(program):
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise Failed("the seccomp filter's jumps do not fit BPF's 8 bits")
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install_seccomp() -> None:
    """The filter on this process and every one it starts (no_new_privs first, as seccomp(2)
    asks of a process without CAP_SYS_ADMIN)."""
    program = seccomp_filter()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    for name, args in (
        ("PR_SET_NO_NEW_PRIVS", (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
        ("PR_SET_SECCOMP", (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)),
    ):
        if _LIBC.prctl(*(ctypes.c_ulong(a) for a in args)) != 0:
            raise Failed(f"the seccomp filter: prctl {name}: {os.strerror(ctypes.get_errno())}")


def _plan(text: str) -> dict[str, object]:
    plan = json.loads(text)
    if not isinstance(plan, dict):
        raise Failed("the plan is not a JSON object")
    return plan


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("wheelforge fence: usage: fence_init.py PLAN -- COMMAND...\n")
        return 125
    try:
        plan = _plan(argv[1])
        if plan.get("only") != "seccomp":
            set_up(plan)
        install_seccomp()
    except (Failed, OSError, ValueError) as exc:
        sys.stderr.write(f"wheelforge fence: {exc}\n")
        return 125
    # bubblewrap has dropped the capabilities already; the unshare way drops them with setpriv.
    setpriv = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    command = argv[3:] if plan.get("only") == "seccomp" else [*setpriv, *argv[3:]]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"wheelforge fence: cannot run {command[0]}: {exc.strerror}\n")
    return 125


if __name__ == "__main__":
    sys.exit(main(sys.argv))
