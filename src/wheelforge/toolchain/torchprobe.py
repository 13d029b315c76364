"""The build environment's torch: its version, headers, libraries and C++ ABI, asked of torch
itself; and the weak-declarations header for its CUDA-only shims."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from wheelforge.foundation import cachefiles, numbers, proc, readers
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.toolchain import probecache, shims, warmtorch

# The C++ standard torch's cpp_extension passes ("-std=c++20"), and the floor its headers check
# (ATen/ATen.h: `#if !defined(_MSC_VER) && __cplusplus < 202002L` / `#error C++20 or later ...`).
_STD_FLAG_RE = re.compile(r"-std=c\+\+([0-9]{2})\b")
_STD_GUARD_RE = re.compile(r"__cplusplus\s*<\s*[0-9]{2}([0-9]{2})[0-9]{2}L")
DEFAULT_CXX_STD = 17  # what torch's headers needed before 2.14 (and wheelforge passed)
# Where pip's CUDA builds of torch put the CUDA libraries' headers (cusparse.h, cublas_v2.h, ...
# that ATen/cuda/CUDAContextLight.h includes), beside torch in site-packages: CUDA 13's wheels
# in one folder (nvidia/cu13/include), CUDA 12's one folder per library (nvidia/cusparse/include).
_PIP_CUDA_INCLUDES = ("nvidia/cu[0-9]*/include", "nvidia/*/include")

# What steers which torch an interpreter imports, besides its own files.
_PYTHON_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONSAFEPATH")


@dataclass(frozen=True, kw_only=True)
class TorchEnv:
    python: Path
    version: Version  # the release, without a local label: 2.13.0
    local: str | None  # the local label: 'cpu', 'cu130'
    cuda: str | None
    include_dir: Path  # torch/include
    include_dirs: tuple[
        Path, ...
    ]  # every folder torch's cpp_extension names (the unstable ABI needs them)
    library_dirs: tuple[Path, ...]
    python_include: Path
    python_version: str
    ext_suffix: str  # e.g. .cpython-311-x86_64-linux-gnu.so
    cxx11_abi: int
    cxx_std: int = DEFAULT_CXX_STD  # the C++ standard torch's cpp_extension compiles with: 17, 20
    # The CUDA headers pip installed beside a CUDA build of torch (torch_source_facts).
    cuda_include_dirs: tuple[Path, ...] = ()
    # What the answer depends on (probecache's watch list): a verdict about this torch (the
    # import check's) is cached as long as these keep their size and mtime.
    # Not compared: importing torch adds folders to sys.path (setuptools/_vendor, ...), so
    # torch's files read and torch's own answer watch different lists for one torch.
    watch: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        return f"{self.version}+{self.local}" if self.local else str(self.version)


# What a torch probe answers (and the probe cache holds); an entry of another shape is asked
# again. The warm child's answer (warmtorch.py) has the same keys.
TORCH_SHAPE = {
    "version": numbers.is_version,
    "cuda": (str, None),
    "include_dirs": lambda v: bool(v) and cachefiles.fits(v, [str]),
    "library_dirs": [str],
    "python_include": str,
    "python_version": str,
    "ext_suffix": str,
    "cxx11_abi": (int, bool),
    "torch_file": str,
    "sys_path?": [str],
}


def _watched(python: Path, info: dict[str, Any]) -> list[str | Path]:
    """What would change the answer: the interpreter, its venv, every folder on its sys.path
    (installing or removing a package changes the folder's mtime) and torch's version files."""
    torch_dir = Path(info["torch_file"]).parent
    paths: list[str | Path] = [python, python.parent.parent / "pyvenv.cfg"]
    paths += [p for p in info.get("sys_path", []) if p]  # '' is the caller's folder: not torch's
    paths += [torch_dir, torch_dir / "version.py", torch_dir / "__init__.py"]
    return paths


def torch_source_facts(torch_file: str) -> dict[str, Any]:
    """What torch's files say about compiling against it, read without importing torch (so
    the early guess and torch's own answer agree): the C++ standard its cpp_extension passes
    (at least the floor its headers check), and pip's CUDA header folders beside it."""
    root = Path(torch_file).parent
    source = _torch_text(root / "utils" / "cpp_extension.py")
    header = _torch_text(root / "include" / "ATen" / "ATen.h")
    # The standard cpp_extension passes is the one it names most often: its docstrings also
    # show other flags (2.11's: "extra_compile_args={'cxx': ['-g', '-std=c++20', ...]}").
    passed = Counter(int(m) for m in _STD_FLAG_RE.findall(source)).most_common()
    stds = [max(n for n, c in passed if c == passed[0][1])] if passed else []
    stds += [int(m) for m in _STD_GUARD_RE.findall(header)]
    site = root.parent
    folders = [
        p for pattern in _PIP_CUDA_INCLUDES for p in sorted(site.glob(pattern)) if p.is_dir()
    ]
    return {
        "cxx_std": max([DEFAULT_CXX_STD, *stds]),
        "cuda_include_dirs": [str(p) for p in dict.fromkeys(folders)],
    }


def _torch_text(path: Path) -> str:
    """One of torch's files, as text (bounded, regular files only); "" when it can't be read."""
    try:
        return readers.read_text(path, cap=readers.HEADER_CAP, errors="replace")
    except (OSError, readers.FileRefused):
        return ""


def _ask(python: Path) -> tuple[dict[str, Any], list[str | Path]]:
    result = warmtorch.probe(python)  # its child stays, warm, for the import check
    if result.returncode != 0:
        if "No module named 'torch'" in result.stderr:
            raise EnvironmentProblem(
                f"{python} has no torch to build against; install one there, e.g. "
                f"'{python} -m pip install torch==2.13.0'"
            )
        raise EnvironmentProblem(
            f"{python} could not import torch", details=proc.tail(result.stderr)
        )
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise EnvironmentProblem(
            f"{python} printed nothing when asked for its torch's details; is it a Python "
            "interpreter? (--python names the Python whose torch to build against)"
        )
    try:
        info = json.loads(lines[-1])
        Version(info["version"])
        watch = _watched(python, info)
        info.update(torch_source_facts(info["torch_file"]))
    except (ValueError, KeyError, TypeError, InvalidVersion, RecursionError):
        raise EnvironmentProblem(
            f"{python} printed {lines[-1][:80]!r} where a Python with torch prints torch's "
            "details; is it a Python interpreter?"
        ) from None
    _refuse_misfit(python, info)
    return info, watch


def _refuse_misfit(python: Path, info: dict[str, Any]) -> None:
    """An answer that is JSON but not of TORCH_SHAPE (``include_dirs: []``: no headers to
    compile against) is named by its key, never indexed into (issue 32)."""
    for key, shape in TORCH_SHAPE.items():
        name = key.removesuffix("?")
        if name not in info and key.endswith("?"):
            continue
        if name in info and cachefiles.fits(info[name], shape):
            continue
        shown = json.dumps(info.get(name))[:60] if name in info else "nothing"
        why = (
            "torch.utils.cpp_extension.include_paths() names no header folder"
            if name == "include_dirs"
            else "not what torch answers there"
        )
        raise EnvironmentProblem(
            f"{python}'s torch answered {name}: {shown} ({why}), so there is nothing to "
            f"compile against; reinstall torch there ('{python} -m pip install --force-reinstall "
            "torch') or name another Python"
        )


# Finds torch without importing it: the layout torch's cpp_extension helpers describe (include/,
# include/torch/csrc/api/include, lib/ beside torch/__init__.py) and torch/version.py. Only a
# guess to start compiling with: torch's own answer replaces it (confirm) before any packing.
_LAYOUT = r"""
import importlib.util, json, os, sys, sysconfig
spec = importlib.util.find_spec("torch")
if spec is None or not spec.origin:
    sys.exit(3)
root = os.path.dirname(spec.origin)
version = {}
with open(os.path.join(root, "version.py"), encoding="utf-8") as f:
    exec(f.read(), version)
include = os.path.join(root, "include")
print(json.dumps({
    "version": version["__version__"],
    "cuda": version.get("cuda"),
    "include_dirs": [include, os.path.join(include, "torch", "csrc", "api", "include")],
    "library_dirs": [os.path.join(root, "lib")],
    "python_include": sysconfig.get_paths()["include"],
    "python_version": "%d.%d" % sys.version_info[:2],
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "cxx11_abi": 1,
    "torch_file": spec.origin,
    "sys_path": sys.path,
}))
"""

# Answers from _LAYOUT: python → (cache key, the guessed env, torch's own once confirmed).
_GUESSED: dict[Path, tuple[dict[str, Any], TorchEnv, TorchEnv | None]] = {}


def probe_key(python: Path) -> dict[str, Any]:
    """What an answer about *python*'s torch is keyed by (the probe's, the import check's): the
    variables as the children get them (warmtorch.child_environment: PYTHONPATH resolved
    against this folder, so ``a:`` run from two folders is two keys, and ``a:`` and ``a:$PWD``
    from one folder are one)."""
    env: dict[str, str | None] = {k: os.environ.get(k) for k in _PYTHON_ENV}
    env.update(warmtorch.child_environment())
    return {"python": str(python), "env": env}


def probe_torch(python: Path, *, cache: Path | None = None, early: bool = False) -> TorchEnv:
    """Ask *python* about its torch (or reuse the answer cached in *cache* while nothing it
    depends on changed); a missing torch is an error that says how to install it.

    *early*: on a cache miss, answer at once from torch's files (no ``import torch``, which
    takes seconds) while a warm child imports torch in the background; the build compiles with
    that answer and calls confirm() before packing, which waits for torch's own answer."""
    key = probe_key(python)
    hit = probecache.lookup(cache, "torch", key, TORCH_SHAPE)
    if hit is None and early:
        guessed = _layout(python)
        if guessed is not None:
            warmtorch.warm(python)
            env = _env(python, guessed)
            _GUESSED[python] = (key, env, None)
            return env
    return _env(
        python,
        hit or probecache.cached(cache, "torch", key, lambda: _ask(python), shape=TORCH_SHAPE),
    )


def _layout(python: Path) -> dict[str, Any] | None:
    result = proc.run(
        [python, "-c", _LAYOUT],
        env=warmtorch.child_environment(),
        hint="point --python at an interpreter",
        check=False,
        timeout=proc.PROBE_S,
    )
    try:
        info = json.loads(result.stdout.strip().splitlines()[-1])
        Version(info["version"])
        info.update(torch_source_facts(info["torch_file"]))
    except (ValueError, IndexError, KeyError, TypeError, InvalidVersion, RecursionError):
        return None  # no torch, or not a Python: the full probe says which, in its words
    fits = isinstance(info, dict) and cachefiles.fits(info, TORCH_SHAPE)
    return info if fits and result.returncode == 0 else None  # a misfit: the full probe names it


def confirm(torch: TorchEnv, *, cache: Path | None = None) -> TorchEnv:
    """*torch*, or, when it came from torch's files (probe_torch's *early*), torch's own answer
    (waiting for the warm child's probe), then cached. Compare: a different answer means what
    was compiled with the guess must be planned and compiled again."""
    guessed = _GUESSED.get(torch.python)
    if guessed is None or guessed[1] != torch:
        return torch
    key, _, confirmed = guessed
    if confirmed is None:
        info = probecache.cached(cache, "torch", key, lambda: _ask(torch.python), shape=TORCH_SHAPE)
        confirmed = _env(torch.python, info)
        _GUESSED[torch.python] = (key, torch, confirmed)  # the next variant's plan holds it too
    return confirmed


def _env(python: Path, info: dict[str, Any]) -> TorchEnv:
    full = Version(info["version"])
    include = Path(info["include_dirs"][0])
    if not (include / "torch" / "csrc" / "stable").is_dir():
        raise EnvironmentProblem(
            f"torch {full} at {include} has no stable-ABI headers (torch/csrc/stable); use "
            "torch >= 2.9"
        )
    return TorchEnv(
        python=python,
        version=Version(full.base_version),
        local=full.local,
        cuda=info["cuda"],
        # Only torch/include: the stable ABI needs nothing from torch/csrc/api/include, and leaving it
        # out turns an accidental `#include <torch/extension.h>` into a compile error.
        include_dir=include,
        include_dirs=tuple(Path(p) for p in info["include_dirs"]),
        library_dirs=tuple(Path(p) for p in info["library_dirs"]),
        python_include=Path(info["python_include"]),
        python_version=info["python_version"],
        ext_suffix=info["ext_suffix"],
        cxx11_abi=int(info["cxx11_abi"]),
        cxx_std=int(info.get("cxx_std", DEFAULT_CXX_STD)),
        cuda_include_dirs=tuple(Path(p) for p in info.get("cuda_include_dirs", [])),
        watch=tuple(str(p) for p in _watched(python, info)),
    )


def check_target(torch: TorchEnv, lowest: Version) -> None:
    """The headers must be at least as new as the target version they are asked to emulate."""
    if (torch.version.major, torch.version.minor) < (lowest.major, lowest.minor):
        raise EnvironmentProblem(
            f"the matrix targets torch {lowest.major}.{lowest.minor}, but the build environment has "
            f"torch {torch.label}, whose headers are older; install torch >= {lowest.major}.{lowest.minor} "
            "to build with"
        )


def cuda_only_shims(include_dir: Path, *, cache: Path | None = None) -> tuple[str, ...]:
    """shims.cuda_only_shims, cached while torch's shim headers are unchanged (parsing them
    costs ~0.1 s, a third of a no-op build)."""

    def parse() -> tuple[dict[str, Any], list[str | Path]]:
        folders = [include_dir / d for d in shims.SHIM_DIRS]
        headers = [h for f in folders if f.is_dir() for h in sorted(f.glob("*.h"))]
        return {"names": list(shims.cuda_only_shims(include_dir))}, [*folders, *headers]

    value = probecache.cached(
        cache, "cuda-shims", {"include": str(include_dir)}, parse, shape={"names": [str]}
    )
    return tuple(value["names"])


def weak_shims_header(names: tuple[str, ...]) -> str:
    """A header force-included into every translation unit (``-include``)."""
    lines = [
        "// Generated by wheelforge. CUDA-only torch shim functions, declared weak so the",
        "// extension also loads on a CPU-only torch (they are null there). See docs/stable-abi.md.",
        "#pragma once",
        *(f"#pragma weak {name}" for name in names),
        "",
    ]
    return "\n".join(lines)
