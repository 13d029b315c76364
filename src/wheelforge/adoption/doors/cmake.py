"""The CMake front door: the project configured only (``cmake -S . -B <a folder wheelforge
owns>``, never built), ``compile_commands.json`` read for each source's flags and archs, and
CMake's file API (codemodel-v2) for the targets: which are Python modules, what each links.

Configuring runs the project's CMake code; downloads are refused (``FETCHCONTENT_FULLY_DISCONNECTED``,
and every proxy variable points at a closed port, so ``file(DOWNLOAD)`` and git clones fail
fast): a dependency CMake would fetch is named, with the flag that gives its folder instead.
torch's CMake files come from the build Python (``torch.utils.cmake_prefix_path``). CMake runs
in the sandbox of foundation/fence.py: the project and the build folder the only writable
places, no network, no process left when it ends."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wheelforge.adoption.doors.flags import merge_archs, sort_flags
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    Refusal,
)
from wheelforge.adoption.record.setuprun import Attempt
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.foundation import fence, proc, readers, writers
from wheelforge.foundation.errors import ToolError

DEADLINE_S = 600.0
_CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, a download fails at once
# Flags of a compile command that are CMake's plumbing, not the project's choices: with a value…
_PLUMBING_WITH_VALUE = ("-o", "-MT", "-MF", "-MQ", "-x", "--options-file", "-Xcompiler=-MD")
# … and alone (position-independent code and dependency files are wheelforge's too).
_PLUMBING = ("-c", "-MD", "-MMD", "-fPIC", "-Xcompiler=-fPIC", "-forward-unknown-to-host-compiler")
_INCLUDE_RE = re.compile(r"^-(I|isystem)(.*)$")
_IMPORT_RE = r"^\s*(?:from\s+(\.?)\s*import\s+{leaf}\b|import\s+{leaf}\b|from\s+{leaf}\s+import)"


@dataclass(frozen=True, kw_only=True)
class CMakeContext:
    python: Path
    nvcc: Path | None = None
    archs: str | None = None  # TORCH_CUDA_ARCH_LIST for torch's CMake files
    args: tuple[str, ...] = ()  # --cmake-arg, $CMAKE_ARGS
    deadline_s: float = DEADLINE_S
    sandbox: fence.Choice = "auto"  # --sandbox


def _torch_prefix(python: Path) -> str | None:
    result = proc.run(
        [python, "-c", "import torch.utils; print(torch.utils.cmake_prefix_path)"],
        hint="pass --python with the interpreter that has torch",
        check=False,
        timeout=proc.PROBE_S,
    )
    lines = result.stdout.strip().splitlines()
    return lines[-1] if result.returncode == 0 and lines else None


def _configure(
    root: Path, build: Path, context: CMakeContext, *, project: Path | None = None
) -> str:
    kind = fence.choose(context.sandbox, what=f"CMake's configure of {root / 'CMakeLists.txt'}")
    if kind is not None:
        fence.say_foreign_owner(project or root, what="CMake's configure")
    query = build / ".cmake" / "api" / "v1" / "query"
    query.mkdir(parents=True)
    writers.write_atomic(query / "codemodel-v2", "")
    python = str(context.python)
    cmake = proc.which("cmake", hint="install CMake 3.18 or newer (pip install cmake)")
    args: list[str | Path] = [
        cmake,
        "-S",
        root,
        "-B",
        build,
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
        f"-DPython_EXECUTABLE={python}",
        f"-DPython3_EXECUTABLE={python}",
        f"-DPYTHON_EXECUTABLE={python}",
    ]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if context.nvcc is not None:
        # The toolkit wheelforge builds with, for CMake's CUDA language and for torch's Caffe2
        # CMake files (FindCUDA reads CUDA_TOOLKIT_ROOT_DIR, else takes nvcc's folder on the
        # PATH, a wrapper script's here).
        root_dir = context.nvcc.parent.parent
        args += [
            f"-DCMAKE_CUDA_COMPILER={context.nvcc}",
            f"-DCUDA_TOOLKIT_ROOT_DIR={root_dir}",
            f"-DCUDAToolkit_ROOT={root_dir}",
        ]
    prefix = _torch_prefix(context.python)
    if prefix:
        args.append(f"-DCMAKE_PREFIX_PATH={prefix}")
    args += list(context.args)
    cut = fence.environment(os.environ, named=fence.named_in(root / "CMakeLists.txt"), home=build)
    fence.say_left_out(cut, what=f"CMake's configure of {root / 'CMakeLists.txt'}")
    env = cut.kept | dict.fromkeys(
        ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"),
        _CLOSED,
    )
    env |= {"no_proxy": "", "NO_PROXY": "", "GIT_TERMINAL_PROMPT": "0"}
    if context.archs:
        env["TORCH_CUDA_ARCH_LIST"] = context.archs
    env["TMPDIR"] = str(build)
    readable = (
        *fence.python_folders(context.python),
        *fence.program_folders(cmake),
        *fence.program_folders("ninja"),
        *([context.nvcc.parent.parent] if context.nvcc is not None else []),
        *([Path(prefix)] if prefix else []),
        *_named_folders(context.args),
        *fence.env_paths(env),
        *fence.repository(root, root / "CMakeLists.txt"),
    )
    result = proc.run(
        fence.wrap(kind, args, cwd=build, writable=(project or root, build), readable=readable),
        hint=fence.FIX,
        env=env,
        replace_env=True,
        check=False,
        what="cmake (configure only)",
        timeout=context.deadline_s,
        cwd=build,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0 and (said := fence.failure(output)) is not None:
        raise ToolError(
            f"the sandbox init configures {root / 'CMakeLists.txt'} in could not be set up ({said})",
            details=proc.tail(output),
        )
    if result.returncode != 0:
        unfetched = _unfetched(build, context.args)
        error = re.search(r"CMake Error[^\n]*\n((?:[ \t]+\S[^\n]*\n?){1,3})", output)
        said = " ".join(error[1].split()) if error else "see its output below"
        fix = (
            "it needs downloads init never makes: give "
            + ", ".join(f"-DFETCHCONTENT_SOURCE_DIR_{n.upper()}=<folder>" for n in unfetched)
            + " with --cmake-arg"
            if unfetched
            else "fix what it needs (--cmake-arg -DNAME=VALUE, CMAKE_ARGS, --python with torch)"
        )
        raise ToolError(
            f"{root / 'CMakeLists.txt'}: CMake's configure failed ({said[:200]}); {fix}",
            details=proc.tail(output),
        )
    return output


def _named_folders(args: Iterable[str]) -> list[Path]:
    """The folders --cmake-arg / CMAKE_ARGS name (``-DFETCHCONTENT_SOURCE_DIR_X=../x``): shown
    inside the sandbox, read-only, wherever they lie."""
    found = []
    for arg in args:
        value = arg.partition("=")[2] if arg.startswith("-D") else ""
        if value and (folder := Path(value).absolute()).is_dir():
            found.append(folder)
    return found


def _named_by(name: str, args: Iterable[str]) -> bool:
    """Whether a --cmake-arg gives the dependency *name* a folder by a variable of the project's
    own (``-DVLLM_CUTLASS_SRC_DIR=...`` for cutlass, ``-DFLASH_MLA_SRC_DIR=...`` for flashmla),
    which its CMake declares as the dependency's SOURCE_DIR."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for arg in args:
        variable, eq, value = arg.removeprefix("-D").partition("=")
        words = re.sub(r"[^a-z0-9]", "", variable.split(":")[0].lower())
        if eq and arg.startswith("-D") and key in words and Path(value).is_dir():
            return True
    return False


def _unfetched(build: Path, args: Iterable[str] = ()) -> list[str]:
    """The FetchContent dependencies the configure reached (each gets a FETCHCONTENT_SOURCE_DIR_
    cache entry) that were neither given a folder nor downloaded."""
    try:
        cache = readers.read_text(build / "CMakeCache.txt", cap=readers.STATE_CAP, errors="replace")
    except OSError:
        return []
    return [
        name
        for name, folder in re.findall(r"^FETCHCONTENT_SOURCE_DIR_(\w+):PATH=(.*)$", cache, re.M)
        if not folder.strip()
        and not any((build / "_deps" / f"{name.lower()}-src").glob("*"))
        and not _named_by(name, args)
    ]


def _given_sources(build: Path) -> set[str]:
    """The FetchContent dependencies given a folder (``-DFETCHCONTENT_SOURCE_DIR_X=<folder>``),
    lower case."""
    try:
        cache = readers.read_text(build / "CMakeCache.txt", cap=readers.STATE_CAP, errors="replace")
    except (OSError, readers.FileRefused):
        return set()
    return {
        name.lower()
        for name, folder in re.findall(r"^FETCHCONTENT_SOURCE_DIR_(\w+):PATH=(.*)$", cache, re.M)
        if folder.strip()
    }


def download_lines(output: str, given: set[str]) -> list[str]:
    """The configure's lines that tell of a download (``Downloading X``, ``Cloning into``), but
    for a dependency given a folder: fast_rnnt's own ``message("Downloading pybind11")`` comes
    before a FetchContent_Populate that takes ``FETCHCONTENT_SOURCE_DIR_PYBIND11``."""
    lines = []
    for line in dict.fromkeys(re.findall(r"^.*(?:Downloading|Cloning into)[^\n]*", output, re.M)):
        named = re.search(r"Downloading\s+['\"]?([\w.-]+)", line)
        if named and named[1].lower() in given:
            continue
        lines.append(line.strip())
    return lines


def _targets(build: Path) -> dict[str, dict[str, Any]]:
    """The codemodel's targets by id (CMake's file API reply)."""
    reply = build / ".cmake" / "api" / "v1" / "reply"
    index = max(reply.glob("index-*.json"), default=None)
    if index is None:
        return {}
    objects = json.loads(readers.read_text(index, cap=readers.STATE_CAP))["objects"]
    model = next((o for o in objects if o["kind"] == "codemodel"), None)
    if model is None:
        return {}
    codemodel = json.loads(readers.read_text(reply / model["jsonFile"], cap=readers.STATE_CAP))
    targets = {}
    for entry in codemodel["configurations"][0]["targets"]:
        target = json.loads(readers.read_text(reply / entry["jsonFile"], cap=readers.STATE_CAP))
        targets[target["id"]] = target
    return targets


@dataclass(frozen=True)
class _Command:
    flags: tuple[str, ...]
    includes: tuple[str, ...]
    cuda: bool


def _command(entry: Mapping[str, Any]) -> _Command:
    """One compile command without CMake's plumbing: its flags and include folders."""
    argv = list(entry.get("arguments") or shlex.split(entry["command"]))
    directory = Path(entry["directory"])
    source = (directory / entry["file"]).resolve()
    flags: list[str] = []
    includes: list[str] = []
    i = 1  # argv[0] is the compiler
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in _PLUMBING_WITH_VALUE:
            i += 1
        elif (
            arg in _PLUMBING
            or arg.startswith(("-MF", "-MT", "-MQ"))
            or (arg.startswith("-o") and len(arg) > 2)
            or (not arg.startswith("-") and (directory / arg).resolve() == source)
        ):
            continue
        elif m := _INCLUDE_RE.match(arg):
            value = m[2].removeprefix("=")
            if not value and i < len(argv):
                value, i = argv[i], i + 1
            includes.append(str((directory / value).resolve()))
        else:
            flags.append(arg)
    return _Command(tuple(flags), tuple(includes), entry["file"].endswith(".cu"))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _common(lists: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    lists = list(lists)
    if not lists:
        return ()
    counts = Counter(f for flags in lists for f in dict.fromkeys(flags))
    return tuple(f for f in dict.fromkeys(lists[0]) if counts[f] == len(lists))


def _installed_name(target: Mapping[str, Any], stem: str) -> str | None:
    """``pkg.stem`` for a target CMake installs into ``pkg`` (``install(TARGETS ... DESTINATION
    pkg)``: vLLM's define_extension_target, scikit-build-core's way)."""
    for destination in (target.get("install") or {}).get("destinations", []):
        parts = Path(destination["path"]).parts
        if parts and all(p.isidentifier() for p in parts):
            return ".".join((*parts, stem))
    return None


def _library_name(root: Path, target: Mapping[str, Any], stem: str) -> str:
    """Where a plain library lands, as a dotted name: the package folder CMake writes it into
    (``LIBRARY_OUTPUT_DIRECTORY`` inside the project) or installs it to (``install(TARGETS ...
    DESTINATION pkg)``, scikit-build-core's way), else the wheel's root."""
    folders = [Path(a["path"]).parent for a in target.get("artifacts", [])]
    for folder in folders:
        full = folder if folder.is_absolute() else root / folder
        if full.resolve().is_relative_to(root.resolve()) and full.resolve() != root.resolve():
            parts = full.resolve().relative_to(root.resolve()).parts
            if all(p.isidentifier() for p in parts) and (full / "__init__.py").is_file():
                return ".".join((*parts, stem))
    return _installed_name(target, stem) or stem


def _module_name(root: Path, leaf: str) -> str:
    """Where the package imports the module from: ``pkg.leaf`` for ``from . import leaf``
    in pkg/, else the top-level ``leaf``."""
    pattern = re.compile(_IMPORT_RE.format(leaf=re.escape(leaf)), re.M)
    for path in sorted(root.rglob("*.py"))[:2000]:
        if "build" in path.relative_to(root).parts:
            continue
        m = pattern.search(readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace"))
        if m and m[1]:
            parts = path.parent.relative_to(root).parts
            return ".".join((*parts, leaf))
    return leaf


# Libraries wheelforge links itself (planning/planner.py): the CUDA runtime (static), the device
# runtime of relocatable device code, the C runtime's, torch's and Python's.
_OWN_LIBRARIES = frozenset(
    {
        "cudart",
        "cudart_static",
        "cudadevrt",
        "rt",
        "pthread",
        "dl",
        "m",
        "c",
        "stdc++",
        "c10",
        "c10_cuda",
        "torch",
        "torch_cpu",
        "torch_cuda",
        "torch_python",
    }
)
_SYSTEM_LIBDIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
_LIBRARY_FILE_RE = re.compile(r"^lib(?P<name>.+?)\.(?:so(?:\.[0-9.]+)?|a)$")


def link_library(word: str) -> tuple[str, str | None] | None:
    """A word of a link command as a library: ``-lcublas`` → (cublas, None),
    ``/x/lib64/libcublas.so.13`` → (cublas, /x/lib64); None for anything else (a flag, an
    object). A Python library (``libpython3.12.so``) counts as Python's, not the project's."""
    if word.startswith("-l") and len(word) > 2:
        name = word[2:].removeprefix(":")
        m = _LIBRARY_FILE_RE.match(name)
        return (m["name"] if m else name), None
    if word.startswith("-"):
        return None
    m = _LIBRARY_FILE_RE.match(Path(word).name)
    if m is None or m["name"].startswith("python"):
        return None
    return m["name"], str(Path(word).parent)


class _Reader:
    def __init__(
        self,
        root: Path,
        build: Path,
        toolkit: tuple[Path, ...] = (),
        given: tuple[Path, ...] = (),
        source: Path | None = None,
    ) -> None:
        self.root = root.resolve()
        # the folder CMake was configured in (csrc/): the file API's source paths are its
        self.source = (source or root).resolve()
        self.build = build.resolve()
        self.toolkit = toolkit  # the toolkit's folder: its libraries need no library-dirs
        # the folders --cmake-arg names (a FetchContent source, VLLM_CUTLASS_SRC_DIR): their
        # include folders are the project's too, written relative to it (``../cutlass/include``)
        self.given = tuple(g.resolve() for g in given)
        self.hand: list[str] = []
        self.done: list[str] = []
        commands = json.loads(
            readers.read_text(build / "compile_commands.json", cap=readers.STATE_CAP)
        )
        self.commands = {
            str(Path(e["directory"], e["file"]).resolve()): _command(e) for e in commands
        }

    def rel(self, path: str) -> str | None:
        p = Path(path).resolve()
        return p.relative_to(self.root).as_posix() or "." if p.is_relative_to(self.root) else None

    def include(self, path: str) -> str | None:
        """An include folder as matrix.yaml writes it: in the project, or in a folder
        --cmake-arg names (``../cutlass/include``, which the writer may make a header library);
        None for torch's, Python's, the toolkit's and the system's, which wheelforge adds."""
        if (rel := self.rel(path)) is not None:
            return rel
        p = Path(path).resolve()
        # the toolkit's own headers, also where --cmake-arg names the toolkit
        # (-DCUDA_TOOLKIT_ROOT_DIR): a variant's toolkit brings its own, and another release's
        # would not compile with its nvcc
        if self.toolkit_headers(p):
            return None
        # a folder CMake names that is not there adds nothing to a compile (a submodule the
        # given source lacks)
        if p.is_dir() and any(p.is_relative_to(g) for g in self.given if g != self.root):
            return Path(os.path.relpath(p, self.root)).as_posix()
        return None

    def toolkit_headers(self, folder: Path) -> bool:
        """Whether *folder* holds a CUDA toolkit's headers, or lies in such a folder
        (include/cccl): under the nvcc CMake used, or beside cuda_runtime_api.h (pip's
        nvidia/cu13/include too)."""
        if any(folder.is_relative_to(t.resolve()) for t in self.toolkit):
            return True
        return any((d / "cuda_runtime_api.h").is_file() for d in (folder, *folder.parents[:2]))

    def sources(
        self, target: Mapping[str, Any], targets: Mapping[str, dict[str, Any]]
    ) -> list[str]:
        """A module's own sources and those of the project libraries it links."""
        found = [s["path"] for s in target.get("sources", []) if not s.get("isGenerated")]
        for dep in target.get("dependencies", []):
            linked = targets.get(dep["id"])
            if linked and linked["type"] in ("STATIC_LIBRARY", "SHARED_LIBRARY", "OBJECT_LIBRARY"):
                found += [s["path"] for s in linked.get("sources", []) if not s.get("isGenerated")]
                self.done.append(
                    f"CMake target {target['name']}: the sources of {linked['name']} "
                    f"({linked['type'].lower()}), which it links, are compiled into it"
                )
        return [str((self.source / p).resolve()) for p in dict.fromkeys(found)]

    def extension(
        self,
        target: Mapping[str, Any],
        targets: Mapping[str, dict[str, Any]],
        name: str,
        *,
        plain: bool = False,
    ) -> CapturedExtension:
        """A target as one extension; *plain*: a shared library the package loads with
        ctypes/cffi, whose exports (its visibility flags) stay the project's."""
        label = f"CMake target {target['name']}"
        paths = [p for p in self.sources(target, targets) if Path(p).suffix in SOURCE_SUFFIXES]
        missing = [p for p in paths if p not in self.commands]
        if missing:
            self.hand.append(f"{label}: no compile command for {', '.join(missing[:3])}")
        commands = {p: self.commands[p] for p in paths if p in self.commands}
        sorted_by = {p: sort_flags(c.flags, own_exports=plain) for p, c in commands.items()}
        cxx = [sorted_by[p].kept for p, c in commands.items() if not c.cuda]
        nvcc = [sorted_by[p].kept for p, c in commands.items() if c.cuda]
        cxx_common, nvcc_common = _common(cxx), _common(nvcc)
        extra_by = {
            p: tuple(
                f for f in sorted_by[p].kept if f not in (nvcc_common if c.cuda else cxx_common)
            )
            for p, c in commands.items()
        }
        if any(extra_by.values()):
            self.done.append(
                f"{label}: the sources compiled with flags of their own keep them "
                "(`{files: ..., flags: [...]}`)"
            )
        archs_by = {p: sorted_by[p].archs for p, c in commands.items() if c.cuda}
        union = merge_archs(*archs_by.values())
        includes: list[str] = []
        for c in commands.values():
            for inc in c.includes:
                rel = self.include(inc)
                if rel is not None and rel not in includes:
                    includes.append(rel)
        owned = sorted({f for s in sorted_by.values() for f in s.owned})
        if owned:
            self.done.append(
                f"{label}: left out {', '.join(owned)}: wheelforge sets these itself (from the "
                "matrix)"
            )
        defines = [f for f in _common([*cxx, *nvcc]) if f.startswith(("-D", "-U"))]
        drop = set(defines)
        # the target's Py_LIMITED_API (CMake's USE_SABI) and torch target, as setup.py's door
        # reads them: the matrix's limited-api / python-abi and torch-target
        limited = {s.limited_api for s in sorted_by.values() if s.limited_api}
        targeted = {s.torch_target for s in sorted_by.values() if s.torch_target}
        libraries, library_dirs = self.libraries(target, label)
        return CapturedExtension(
            name=name,
            plain=plain,
            libraries=libraries,
            library_dirs=library_dirs,
            kind=f"CMake {target['type'].lower()}",
            where=f"CMake target {target['name']}",
            sources=tuple(
                CapturedSource(
                    path=r,
                    archs=(a if (a := archs_by.get(p)) and a != union else None),
                    flags=extra_by[p],
                )
                for p in commands
                if (r := self.rel(p)) is not None
            ),
            include_dirs=tuple(includes),
            defines=tuple(defines),
            cxx_flags=tuple(f for f in cxx_common if f not in drop),
            nvcc_flags=tuple(f for f in nvcc_common if f not in drop),
            archs=union,
            link_flags=self.link_flags(target),
            limited_api=max(limited, key=_version) if limited else None,
            torch_target=max(targeted, key=_version) if targeted else None,
        )

    def libraries(
        self, target: Mapping[str, Any], label: str
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The libraries the link names (``-lcublas``, ``/usr/local/cuda/lib64/libcublas.so``)
        as ``libraries`` and ``library-dirs``: not those wheelforge links itself (cudart, the
        device runtime, torch, Python), nor the project's own (their sources are compiled in)."""
        names: list[str] = []
        folders: list[str] = []
        for fragment in (target.get("link") or {}).get("commandFragments", []):
            if fragment.get("role") != "libraries":
                continue
            for word in shlex.split(fragment["fragment"]):
                found = link_library(word)
                if found is None or found[0] in _OWN_LIBRARIES or found[0] in names:
                    continue
                name, folder = found
                if folder is not None and self.within(folder, (self.root, self.build)):
                    continue
                names.append(name)
                if folder is None or self.within(folder, (*self.toolkit, *_SYSTEM_LIBDIRS)):
                    continue
                if folder not in folders:
                    folders.append(folder)
                    self.hand.append(
                        f"{label}: links {word}; library-dirs names its folder on this machine"
                    )
        if names:
            self.done.append(f"{label}: links {', '.join(names)} (libraries)")
        return tuple(names), tuple(folders)

    @staticmethod
    def within(folder: str, roots: Iterable[Path | str]) -> bool:
        path = Path(folder).resolve()
        return any(path.is_relative_to(Path(r).resolve()) for r in roots)

    def link_flags(self, target: Mapping[str, Any]) -> tuple[str, ...]:
        """The link's own flags: not its libraries from torch, Python, CUDA or the build."""
        out = []
        for fragment in (target.get("link") or {}).get("commandFragments", []):
            if fragment.get("role") != "flags":
                continue
            for flag in shlex.split(fragment["fragment"]):
                if flag.startswith("-Wl,-rpath") or flag in ("-shared",):
                    continue
                out.append(flag)
        return tuple(out)


@dataclass(frozen=True)
class SetupConfigure:
    """The ``cmake <folder> -D...`` a setup.py's build_ext starts (NATTEN's csrc/), as init's
    capture child recorded it (refused, never run)."""

    folder: Path  # the folder with the CMakeLists.txt, inside the project
    args: tuple[str, ...]  # its -D arguments
    where: str


def setup_configure(root: Path, refusals: Iterable[Refusal | Attempt]) -> SetupConfigure | None:
    """The first CMake configure among the commands setup.py tried (a folder of the project
    holding a CMakeLists.txt, not ``cmake --build``)."""
    for refusal in refusals:
        if getattr(refusal, "what", "command") != "command":
            continue
        try:
            argv = shlex.split(refusal.detail)
        except ValueError:
            continue
        if not argv or Path(argv[0]).name != "cmake" or "--build" in argv:
            continue
        folders = [a for a in argv[1:] if not a.startswith("-")]
        if "-S" in argv[:-1]:
            folders = [argv[argv.index("-S") + 1]]
        for word in folders:
            folder = Path(os.path.normpath(root / word))
            if folder.is_relative_to(root) and (folder / "CMakeLists.txt").is_file():
                args = tuple(a for a in argv[1:] if a.startswith("-D") and not _ours(a))
                return SetupConfigure(folder=folder, args=args, where=refusal.where)
    return None


def _ours(arg: str) -> bool:
    """A -D wheelforge's configure sets itself (build type, compilers, the build Python)."""
    name = arg[2:].split("=", 1)[0].split(":", 1)[0]
    return name in ("CMAKE_BUILD_TYPE", "CMAKE_CUDA_COMPILER", "CMAKE_EXPORT_COMPILE_COMMANDS")


def capture_cmake(
    root: Path,
    context: CMakeContext,
    *,
    modules: Mapping[str, str] | None = None,
    folder: Path | None = None,
) -> CapturedBuild:
    """Configure *root* (or its *folder* holding the CMakeLists.txt: NATTEN's csrc/) and read
    its targets. *modules* maps a target's file stem to the module name setup.py gives it (a
    setup.py that drives CMake, as vLLM's, fast_rnnt's and NATTEN's do)."""
    with tempfile.TemporaryDirectory(prefix="wheelforge-cmake-") as tmp:
        build = Path(tmp)
        output = _configure(folder or root, build, context, project=root)
        unfetched = _unfetched(build, context.args)
        given = _given_sources(build)
        flags = ", ".join(f"-DFETCHCONTENT_SOURCE_DIR_{n.upper()}=<folder>" for n in unfetched)
        if not (build / "compile_commands.json").is_file():
            raise ToolError(
                f"{root / 'CMakeLists.txt'}: CMake's configure wrote no compile commands (it compiles nothing as configured)"
                + (
                    f"; it declares downloads init does not make ({', '.join(unfetched)}): give {flags} with --cmake-arg"
                    if unfetched
                    else ""
                )
            )
        targets = _targets(build)
        toolkit = (context.nvcc.resolve().parent.parent,) if context.nvcc is not None else ()
        reader = _Reader(root, build, toolkit, tuple(_named_folders(context.args)), folder)
        python_modules = [t for t in targets.values() if t["type"] == "MODULE_LIBRARY"]
        chosen = python_modules or [t for t in targets.values() if t["type"] == "SHARED_LIBRARY"]
        linked = {d["id"] for t in python_modules for d in t.get("dependencies", [])}
        extensions = []
        for target in chosen:
            if target["id"] in linked:
                continue
            # OUTPUT_NAME may hold a folder (NATTEN's natten/libnatten.cpython-...): its file's
            stem = Path(str(target.get("nameOnDisk") or target["name"])).name.split(".")[0]
            wanted: Mapping[str, str] = modules or {}
            if python_modules or stem in wanted or stem.removeprefix("lib") in wanted:
                stem = stem if python_modules or stem in wanted else stem.removeprefix("lib")
                name = wanted.get(stem) or _module_name(root, stem)
                if "." not in name:  # no import names its package: where CMake installs it
                    name = _installed_name(target, stem) or name
                extensions.append(reader.extension(target, targets, name))
                continue
            # No Python module (MODULE library) at all: a shared library the package loads
            # with ctypes/cffi (bitsandbytes' libbitsandbytes_cuda130.so), kept as it is.
            name = _library_name(root, target, stem)
            reader.done.append(
                f"CMake target {target['name']}: kind: plain ({stem}.so, loaded with ctypes/cffi:"
                " no PyInit, its exports kept), in the wheel where CMake puts it"
            )
            extensions.append(reader.extension(target, targets, name, plain=True))
    # A target whose sources the project's arch checks all left out for these archs (vLLM's
    # _vllm_fa3_C below 9.0): no extension, since ninja has nothing to build it from.
    for extension in extensions:
        if not extension.sources:
            reader.done.append(
                f"{extension.name}: CMake compiles no source of it for these archs; left out "
                "(init again with the archs that build it, --archs or TORCH_CUDA_ARCH_LIST)"
            )
    extensions = [e for e in extensions if e.sources]
    refusals = [
        Refusal(what="network", detail=line[:160], where="CMake", attempted=True)
        for line in download_lines(output, given)
    ]
    if unfetched:
        reader.hand.append(
            f"CMake declares downloads init does not make ({', '.join(unfetched)}); if the "
            f"build needs them, give {flags} with --cmake-arg"
        )
    if sys.platform != "linux":  # pragma: no cover - wheelforge builds Linux wheels
        reader.hand.append("CMake was configured on a platform wheelforge does not build for")
    return CapturedBuild(
        root=root,
        front_door="CMake",
        extensions=tuple(extensions),
        refusals=tuple(refusals),
        hand=tuple(reader.hand),
        done=tuple(reader.done),
    )
