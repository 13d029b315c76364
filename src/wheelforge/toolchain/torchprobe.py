"""The build environment's torch: its version, headers, libraries and C++ ABI, asked of torch
itself; and the weak-declarations header for its CUDA-only shims."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from wheelforge.foundation import proc
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.toolchain import probecache, shims, warmtorch

# What steers which torch an interpreter imports, besides its own files.
PYTHON_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONSAFEPATH")


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
    # What the answer depends on (probecache's watch list): a verdict about this torch (the
    # import check's) is cached as long as these keep their size and mtime.
    watch: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.version}+{self.local}" if self.local else str(self.version)


def _watched(python: Path, info: dict[str, Any]) -> list[str | Path]:
    """What would change the answer: the interpreter, its venv, every folder on its sys.path
    (installing or removing a package changes the folder's mtime) and torch's version files."""
    torch_dir = Path(info["torch_file"]).parent
    paths: list[str | Path] = [python, python.parent.parent / "pyvenv.cfg"]
    paths += [p for p in info.get("sys_path", []) if p]  # '' is the caller's folder: not torch's
    paths += [torch_dir, torch_dir / "version.py", torch_dir / "__init__.py"]
    return paths


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
    except (ValueError, KeyError, TypeError, InvalidVersion):
        raise EnvironmentProblem(
            f"{python} printed {lines[-1][:80]!r} where a Python with torch prints torch's "
            "details; is it a Python interpreter?"
        ) from None
    return info, watch


def probe_torch(python: Path, *, cache: Path | None = None) -> TorchEnv:
    """Ask *python* about its torch (or reuse the answer cached in *cache* while nothing it
    depends on changed); a missing torch is an error that says how to install it."""
    key = {"python": str(python), "env": {k: os.environ.get(k) for k in PYTHON_ENV}}
    info = probecache.cached(cache, "torch", key, lambda: _ask(python))
    full = Version(info["version"])
    include = Path(info["include_dirs"][0])
    if not (include / "torch" / "csrc" / "stable").is_dir():
        raise EnvironmentProblem(
            f"torch {full} at {include} has no stable-ABI headers (torch/csrc/stable); use torch >= 2.9"
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

    value = probecache.cached(cache, "cuda-shims", {"include": str(include_dir)}, parse)
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
