"""Load every binary of one installed wheel, as its package loads it, and print what happened as
JSON: the evidence behind tests/data/gallery.toml. Run by tools/gallery.py under the Python of
the environment being tried (standard library only: it runs in any venv).

    python tools/gallery_load.py TARGET WHEEL [--torch] [--import PKG ...]

TARGET is the folder the wheel was installed into (``pip install --target``); it goes first on
``sys.path``. With ``--torch``, ``import torch`` runs before anything else (what every user of a
torch extension has done). Each binary is loaded in a forked child of that process, so one
failure does not hide another and nothing loaded for one binary helps the next:

- an extension module (a file named like one that defines ``PyInit_<leaf>``) is imported by its
  dotted name (``importlib.import_module``); where that fails before reaching the file (a parent
  package that does not import, a file name this Python's import system does not look for) the
  failure is kept and the file is then loaded by path under the same name, to tell the two apart;
- any other shared object is opened with ``ctypes.CDLL(path, RTLD_GLOBAL)`` (how
  ``torch.ops.load_library`` and ctypes-loading packages open theirs); one that fails alone is
  tried again after opening the members given with ``--preload`` (RTLD_GLOBAL, as the package
  does) and importing its package (which may preload what it needs), and said so;
- an executable (it has a program interpreter) is not loaded;
- where the loader cannot find a library that the wheel itself holds (a binary without an RPATH
  to it, whose package opens it first), that library is opened first and the load tried again,
  and said so (``own_first``).

The packages (``--import``, else the wheel's top-level packages) are imported in children too.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import importlib.util
import json
import mmap
import os
import re
import struct
import sys
import traceback
import zipfile
from pathlib import Path
from typing import Any

_EXT = re.compile(r"^(?P<leaf>[A-Za-z_][A-Za-z0-9_]*)(\.(abi3|cpython-[^.]+))?\.so$")


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:400] if text else type(exc).__name__


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _has_interpreter(path: Path) -> bool:
    """True for an executable: a PT_INTERP program header (ELF64 little-endian only)."""
    with path.open("rb") as fh:
        head = fh.read(64)
        if head[4] != 2 or head[5] != 1:
            return False
        (phoff,) = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    return any(struct.unpack_from("<I", table, i * phentsize)[0] == 3 for i in range(phnum))


def _defines(path: Path, name: bytes) -> bool:
    """Whether *name* appears as a whole string in the file (its .dynstr holds exported names)."""
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return mm.find(b"\0" + name + b"\0") != -1


def _in_child(action: Any) -> dict[str, Any]:
    """Run *action* in a forked child; its dict (or the exception's first line) comes back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(2, 1)  # what a package prints on import must not mix with the JSON on stdout
        try:
            result = action()
        except BaseException as exc:  # everything a load can raise, SystemExit included
            result = {"result": "error", "error": _first_line(exc),
                      "where": traceback.format_exc().splitlines()[-3:-1]}  # fmt: skip
        with os.fdopen(write, "w") as fh:
            json.dump(result, fh)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"result": "error", "error": f"the loading process died (wait status {status})"}
    out: dict[str, Any] = json.loads(text)
    return out


_MISSING = re.compile(r"([^\s:]+\.so[.\d]*): cannot open shared object file")


def _own_libraries_first(action: Any, target: Path, members: list[str]) -> dict[str, Any]:
    """*action*, retried after opening (RTLD_GLOBAL) each library of the wheel itself that the
    loader could not find: a binary without an RPATH to its sibling relies on its package to
    open that library first (torchaudio's ``_load_lib``), which is said in the result."""
    opened: list[str] = []
    while True:
        try:
            result: dict[str, Any] = action()
        except (OSError, ImportError) as exc:
            failure, result = exc, {}
        else:
            failure = None
        said = str(failure) if failure else result.get("error", "")
        found = _MISSING.search(said) if failure or result.get("result") == "error" else None
        own = [m for m in members if found and Path(m).name == found[1] and m not in opened]
        if not own:
            if failure:
                raise failure
            if opened:
                result["own_first"] = opened
            return result
        ctypes.CDLL(str(target / own[0]), mode=ctypes.RTLD_GLOBAL)
        opened.append(own[0])


def _import(name: str) -> dict[str, Any]:
    importlib.import_module(name)
    return {"result": "ok"}


def _load_extension(target: Path, member: Path, leaf: str) -> dict[str, Any]:
    dotted = ".".join((*member.parent.parts, leaf))
    try:
        module = importlib.import_module(dotted)
    except Exception as exc:  # its package's own import may fail in any way: keep the line
        first = _first_line(exc)
    else:
        where = getattr(module, "__file__", "") or ""
        if Path(where).resolve() == (target / member).resolve():
            return {"result": "ok", "how": f"import {dotted}"}
        first = f"import {dotted} found {where or 'a module without a file'}, not this file"
    spec = importlib.util.spec_from_file_location(dotted, target / member)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"result": "by-path", "how": f"loaded by path as {dotted}", "import_error": first}


def _load_library(
    target: Path, member: Path, packages: list[str], preload: list[str]
) -> dict[str, Any]:
    path = str(target / member)
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        alone = _first_line(exc)
    else:
        return {"result": "ok", "how": "ctypes.CDLL RTLD_GLOBAL"}
    for name in preload:  # what the package opens RTLD_GLOBAL before this one
        ctypes.CDLL(str(target / name), mode=ctypes.RTLD_GLOBAL)
    for package in packages:
        try:
            importlib.import_module(package)
        except BaseException:  # a package that does not import preloads nothing
            continue
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return {"result": "error", "error": alone, "after_import": _first_line(exc)}
    before = ", ".join([*preload, *(f"import {p}" for p in packages)])
    return {"result": "ok", "how": f"ctypes.CDLL after {before}",
            "alone": alone}  # fmt: skip


def _packages(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        top = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        if top:
            listed = zf.read(top[0]).decode().split()
            return [p for p in listed if p and not p.startswith("_")] or listed
    inits = [n for n in names if n.count("/") == 1 and n.endswith("/__init__.py")]
    return sorted({n.split("/")[0] for n in inits})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--torch", action="store_true")
    parser.add_argument("--import", dest="imports", action="append", default=[])
    parser.add_argument("--preload", action="append", default=[], help="a member to open first")
    args = parser.parse_args()
    target: Path = args.target.resolve()
    sys.path.insert(0, str(target))
    env: dict[str, Any] = {"python": sys.version.split()[0]}
    if args.torch:
        import torch  # the environment's torch, imported as its users do

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
    packages = args.imports or _packages(args.wheel)
    with zipfile.ZipFile(args.wheel) as zf:
        members = sorted(n for n in zf.namelist() if not n.endswith("/"))
    results: dict[str, Any] = {"environment": env, "imports": {}, "binaries": {}}
    for package in packages:
        results["imports"][package] = _in_child(lambda p=package: _import(p))
    for name in members:
        member = Path(name)
        path = target / member
        if ".data/" in name or not path.is_file() or not _is_elf(path):
            continue
        if _has_interpreter(path):
            results["binaries"][name] = {"result": "program", "how": "an executable: not loaded"}
            continue
        match = _EXT.match(member.name)
        if match and _defines(path, b"PyInit_" + match["leaf"].encode()):
            leaf = match["leaf"]
            action = lambda m=member, lf=leaf: _load_extension(target, m, lf)  # noqa: E731
        else:
            action = lambda m=member: _load_library(target, m, packages, args.preload)  # noqa: E731
        outcome = _in_child(lambda a=action: _own_libraries_first(a, target, members))
        results["binaries"][name] = outcome
    # The scratch folder's name is no part of the evidence.
    text = json.dumps(results, indent=1).replace(str(target) + "/", "")
    sys.stdout.write(text)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
