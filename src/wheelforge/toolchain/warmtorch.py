"""Warm torch processes: children of the build Python that import torch ahead of need, then
answer the torch probe and run one import check each.

Importing torch is the slowest thing a build does outside the compiler (3.5-4 s on the H200
machine, ~1.5 s here), and a cold build did it twice, one after the other: the probe
(torchprobe.py) before compiling, the import check (build/importcheck.py) after packing.
Now one child does both. It imports torch (niced, so the compiles it overlaps come first),
prints the probe's answer, then waits on its stdin for the wheel to import, the way a fresh
``python -c 'import torch; import pkg'`` would: the wheel's folder first on sys.path, its
packages and extension modules imported by name in a process that has only imported torch, and
the loaders' messages and exit status are that process's own. A child is
used for one import check (one wheel: all its extensions, in the matrix's order) and then ends:
two variants' modules register the same operator namespace, which one process refuses, and a
crash while loading ends only that child.

``warm(python)`` starts one in the background when none is warm; ``reserve(python)`` when a
variant is about to compile: one child for each import check to come, so with variants side by
side (build/together.py) each variant's child imports torch while the compiles run,
not one after another in the import checks at the end; ``probe`` uses the first warm child
(and keeps it warm), ``import_modules`` takes one (or starts it). A no-op build starts none. ``session()`` stops whatever was left unused when the build ends;
a child also ends by itself when its stdin closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from wheelforge.foundation import proc, removal

_PROBE_MARK = "wheelforge-torch-probe: "
_NICENESS = 5

# Runs inside the build Python: torch's own path helpers, not guesses about its layout.
_SCRIPT = r"""
import json, os, sys, sysconfig
try:
    os.nice(int(sys.argv[1]))
except OSError:
    pass
import torch
try:
    from torch.utils import cpp_extension as ce
    include_dirs, library_dirs = ce.include_paths("cpu"), ce.library_paths("cpu")
except ImportError:  # torch 2.10's cpp_extension imports setuptools, which may not be there
    root = os.path.dirname(torch.__file__)
    include = os.path.join(root, "include")
    include_dirs = [include, os.path.join(include, "torch", "csrc", "api", "include")]
    library_dirs = [os.path.join(root, "lib")]
print(sys.argv[2] + json.dumps({
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "include_dirs": include_dirs,
    "library_dirs": library_dirs,
    "python_include": sysconfig.get_paths()["include"],
    "python_version": "%d.%d" % sys.version_info[:2],
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
    "torch_file": torch.__file__,
    "sys_path": sys.path,
}), flush=True)
request = sys.stdin.readline()
if not request:
    sys.exit(0)
import importlib
request = json.loads(request)
# The wheel as installed: its folder first on sys.path (what an install puts on it), and the
# folders the project's sources are importable from taken off it, so the source tree cannot
# stand in for the wheel. (An import through the project's .pth of an editable install is of
# a name the wheel's folder, ahead of it, already answers.)
hidden = {os.path.realpath(p) for p in request["hide"]}
sys.path[:] = [request["site"]] + [
    p for p in sys.path if os.path.realpath(p or os.getcwd()) not in hidden
]
importlib.invalidate_caches()
site = os.path.realpath(request["site"])
tops = set(request["tops"])


def load(kind, name, path):
    # A package and an extension module are imported by name, as their user imports them, and
    # must come from the wheel's folder; a library of operators is loaded the way its package
    # loads it, with torch.ops.load_library; a plain library with ctypes.
    if kind == "library":
        torch.ops.load_library(path)
        return
    if kind == "plain":  # a plain library with ctypes (what bitsandbytes' cextension.py does)
        import ctypes
        ctypes.CDLL(path)
        return
    module = importlib.import_module(name)
    found = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), None)
    if found is None or not os.path.realpath(found).startswith(site + os.sep):
        raise ImportError(f"{name} was imported from {found}, not from the wheel")
    if kind == "module" and os.path.realpath(found) != os.path.realpath(path):
        raise ImportError(f"{name} was imported from {found}, not from the wheel's {path}")


def answer(exc):
    # torch 2.13's load_library says "Could not load this library: PATH" and keeps dlopen's own
    # words ("undefined symbol: ...") in the exception it raised from. A module another
    # distribution gives (not one of the wheel's top-level names) is named as missing: the
    # build Python lacks it, which says nothing of the wheel.
    cause = exc.__cause__ or exc.__context__
    said = f"{type(exc).__name__}: {exc}"
    said += f" ({cause})" if cause is not None and str(cause) not in said else ""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if missing and owned(missing):
        missing = None
    return {"said": said, "missing": missing, "ok": False}


def owned(module):
    # Whether the wheel should have *module*: its deepest parent folder in the wheel is a
    # regular package (a namespace package's other portions come from other distributions:
    # witwin.core beside witwin-radar's witwin.radar); with none, a top-level name of the wheel.
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):
        folder = os.path.join(site, *parts[:i])
        if os.path.isdir(folder):
            return os.path.isfile(os.path.join(folder, "__init__.py"))
    return parts[0] in tops


def stub_parents(name):
    # The packages above an extension module, as empty modules over the wheel's folders: the
    # module is imported by its dotted name without their __init__, which needs what is missing.
    import types
    parts = name.split(".")[:-1]
    for i in range(1, len(parts) + 1):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            stub = types.ModuleType(parent)
            stub.__path__ = [os.path.join(site, *parts[:i])]
            sys.modules[parent] = stub


answers = []
for kind, name, path in request["loads"]:
    try:
        load(kind, name, path)
        answers.append(None)
        continue
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a package's sys.exit() too: its message, not the child's end
        said = answer(exc)
    if said["missing"] and kind == "module":
        try:
            stub_parents(name)
            load(kind, name, path)
            said["ok"] = True
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            said = answer(exc)
    answers.append(said)
print(json.dumps(answers))
"""

_HINT = "point --python at an interpreter with torch"


@dataclass
class _Child:
    folder: Path  # its working folder (sys.path[0]), empty, removed with it
    stderr: IO[str]
    popen: subprocess.Popen[str]
    before_probe: list[str] = field(default_factory=list)  # what it printed before the probe
    probe_line: str | None = None

    def read_probe(self) -> str | None:
        assert self.popen.stdout is not None  # stdout=PIPE
        kept = sum(len(line) for line in self.before_probe)
        with proc.watchdog(self.popen, proc.PROBE_S, what="the build Python, importing torch,"):
            while self.probe_line is None:
                line = self.popen.stdout.readline(proc.LINE_CAP)
                if not line:
                    return None
                if line.startswith(_PROBE_MARK):
                    self.probe_line = line[len(_PROBE_MARK) :].strip()
                elif kept < proc.OUTPUT_CAP:  # what it prints before: kept within the cap
                    self.before_probe.append(line)
                    kept += len(line)
        return self.probe_line

    def finish(self, request: str | None) -> proc.Result:
        """Send *request* (or nothing: close its stdin), wait for its end, and return all it
        printed after the probe (within proc.OUTPUT_CAP), its stderr and its exit status."""
        assert self.popen.stdin is not None and self.popen.stdout is not None
        with proc.watchdog(
            self.popen, proc.PROBE_S, what="the build Python, importing the extension,"
        ):
            with contextlib.suppress(BrokenPipeError):  # it ended already: its status says why
                if request is not None:
                    self.popen.stdin.write(request + "\n")
                self.popen.stdin.close()
            rest = self.popen.stdout.read(proc.OUTPUT_CAP)
            if len(rest) == proc.OUTPUT_CAP:
                proc.stop(self.popen)
            returncode = self.popen.wait()
        self.stderr.seek(0)
        return proc.Result(
            args=tuple(str(a) for a in self.popen.args),  # type: ignore[union-attr]
            returncode=returncode,
            stdout="".join(self.before_probe) + rest,
            stderr=self.stderr.read(proc.OUTPUT_CAP),
        )

    def close(self) -> None:
        if self.popen.poll() is None:
            proc.stop(self.popen)
        self.stderr.close()
        removal.remove(self.folder, within=self.folder.parent)


# The warm children of each Python, in the order they were started, and how many import checks
# are still to come that asked for a child of their own (reserve).
_WARM: dict[Path, list[_Child]] = {}
_RESERVED: dict[Path, int] = {}


def resolved_pythonpath(value: str, cwd: str) -> str:
    """*value*, a PYTHONPATH, with each entry made absolute against *cwd* as Python itself
    reads it: an empty entry (``a:``, ``:a``, ``a::b``) is the current folder, a relative one
    lies under it, ``..`` and ``.`` are resolved (os.path.abspath, as sys.path shows them). An
    empty PYTHONPATH adds nothing, so it stays empty."""
    if not value:
        return value
    # os.path, not Path.resolve(): Python does not follow symlinks in PYTHONPATH's entries.
    return os.pathsep.join(
        os.path.abspath(os.path.join(cwd, entry))  # noqa: PTH100, PTH118
        for entry in value.split(os.pathsep)
    )


def child_environment() -> dict[str, str]:
    """What the torch children (this module's, torchprobe's layout probe) get on top of this
    process's environment: PYTHONPATH resolved against this process's working folder, which
    is what the user who set it meant. Left as it was, an empty or relative entry would name the
    child's own folder: a throwaway one for a warm child, which its answer would then list on
    sys.path and the probe cache watch, gone by the next run (a miss every time)."""
    value = os.environ.get("PYTHONPATH")
    if value is None:
        return {}
    return {"PYTHONPATH": resolved_pythonpath(value, str(Path.cwd()))}


def _start(python: Path) -> _Child:
    folder = Path(tempfile.mkdtemp(prefix="wheelforge-torch-"))
    stderr = (folder / "stderr").open("w+", encoding="utf-8", errors="replace")
    try:
        popen = proc.start(
            [python, "-c", _SCRIPT, str(_NICENESS), _PROBE_MARK],
            hint=_HINT,
            cwd=folder,
            stderr=stderr,
            env=child_environment(),
        )
    except BaseException:
        stderr.close()
        removal.remove(folder, within=folder.parent)
        raise
    return _Child(folder=folder, stderr=stderr, popen=popen)


def warm(python: Path) -> None:
    """Start importing torch in *python* now, for a probe or an import check to come, unless a
    child of it is warm already."""
    if not _WARM.get(python):
        _WARM.setdefault(python, []).append(_start(python))


def reserve(python: Path) -> None:
    """One more import check to come in *python*: a child of its own starts importing torch now
    unless one is warm that no other import check to come has asked for (the probe's child
    serves the first)."""
    _RESERVED[python] = _RESERVED.get(python, 0) + 1
    children = _WARM.setdefault(python, [])
    while len(children) < _RESERVED[python]:
        children.append(_start(python))


def probe(python: Path) -> proc.Result:
    """The probe's answer (a JSON line in ``stdout``) from *python*'s warm child; when it fails,
    everything the child printed and its exit status."""
    warm(python)
    child = _WARM[python][0]
    line = child.read_probe()
    if line is not None:
        return proc.Result(args=(str(python),), returncode=0, stdout=line + "\n", stderr="")
    _WARM[python].remove(child)
    try:
        return child.finish(None)
    finally:
        child.close()


# What to import in the warm child: ("package", name, its folder or file in the wheel's
# folder) for a top-level package or module of the wheel, ("module", dotted name, its file) for
# an extension module, ("library", name, file) for a library loaded with torch.ops.load_library.
Load = tuple[str, str, Path]


def import_modules(
    python: Path, site: Path, loads: Sequence[Load], *, hide: Sequence[Path] = ()
) -> proc.Result:
    """Import each of *loads*, in order, in one child of *python* that imported torch first, as
    one process of the wheel's user does: with *site* (the wheel installed: unpacked) first on
    sys.path and the folders in *hide* (where the project's sources are importable from) off
    it; a package or module must come from *site*. Its output's last line is JSON: a list with,
    per load, null (done) or {"said": the loader's message, "missing": the module of another
    distribution the build Python lacks, or null, "ok": whether an extension module imported
    all the same, its packages' __init__ skipped}."""
    warm(python)
    child = _WARM[python].pop(0)
    if _RESERVED.get(python):
        _RESERVED[python] -= 1
    request = {
        "site": str(site),
        "hide": [str(p) for p in hide],
        "tops": sorted({name.partition(".")[0] for kind, name, _ in loads if kind != "library"}),
        "loads": [[kind, name, str(path)] for kind, name, path in loads],
    }
    try:
        return child.finish(json.dumps(request))
    finally:
        child.close()


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Stop, at the end, every warm child that was not used."""
    try:
        yield
    finally:
        _RESERVED.clear()
        while _WARM:
            for child in _WARM.popitem()[1]:
                child.close()
