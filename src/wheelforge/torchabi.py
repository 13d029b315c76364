"""The build environment's torch: where its headers and libraries are, and what its stable-ABI
headers say (which C shim functions exist only in CUDA builds)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import proc
from .errors import ConfigError, ToolError

# Runs inside the build Python: torch's own path helpers, not guesses about its layout.
_PROBE = r"""
import json, sys, sysconfig
import torch
from torch.utils import cpp_extension as ce
print(json.dumps({
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "include_dirs": ce.include_paths("cpu"),
    "library_dirs": ce.library_paths("cpu"),
    "python_include": sysconfig.get_paths()["include"],
    "python_version": "%d.%d" % sys.version_info[:2],
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
}))
"""

# Shim headers whose `#ifdef USE_CUDA` blocks declare functions that only libtorch_cuda exports.
_SHIM_HEADERS = (
    "torch/csrc/inductor/aoti_torch/c/shim.h",
    "torch/csrc/stable/c/shim.h",
)
_EXPORT_RE = re.compile(r"AOTI_TORCH_EXPORT\b[^;{(]*?\b((?:aoti_torch|torch)_\w+)\s*\(", re.DOTALL)
_IF_RE = re.compile(r"^\s*#\s*(if|ifdef|ifndef)\b(.*)$")
_ELSE_RE = re.compile(r"^\s*#\s*(else|elif)\b")
_ENDIF_RE = re.compile(r"^\s*#\s*endif\b")


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

    @property
    def label(self) -> str:
        return f"{self.version}+{self.local}" if self.local else str(self.version)


def probe_torch(python: Path) -> TorchEnv:
    """Ask *python* about its torch; a missing torch is an error that says how to install it."""
    hint = "point --python at an interpreter, or install Python"
    result = proc.run([python, "-c", _PROBE], hint=hint, check=False)
    if result.returncode != 0:
        if "No module named 'torch'" in result.stderr:
            raise ToolError(
                f"{python} has no torch to build against; install one there, e.g. "
                f"'{python} -m pip install torch==2.13.0'"
            )
        raise ToolError(f"{python} could not import torch", details=proc.tail(result.stderr))
    try:
        info = json.loads(result.stdout.strip().splitlines()[-1])
        full = Version(info["version"])
    except (ValueError, IndexError, KeyError, InvalidVersion) as exc:
        raise ToolError(f"could not read torch's details from {python}: {exc}") from None
    include = Path(info["include_dirs"][0])
    if not (include / "torch" / "csrc" / "stable").is_dir():
        raise ToolError(
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
    )


def check_target(torch: TorchEnv, lowest: Version) -> None:
    """The headers must be at least as new as the target version they are asked to emulate."""
    if (torch.version.major, torch.version.minor) < (lowest.major, lowest.minor):
        raise ConfigError(
            f"the matrix targets torch {lowest.major}.{lowest.minor}, but the build environment has "
            f"torch {torch.label}, whose headers are older; install torch >= {lowest.major}.{lowest.minor} "
            "to build with"
        )


def cuda_only_shims(include_dir: Path) -> tuple[str, ...]:
    """Names of the C shim functions declared under ``#ifdef USE_CUDA`` in torch's shim headers.

    They live in libtorch_cuda; an extension that calls them declares them weak so it still loads
    on a CPU-only torch (where its CUDA kernels can never be reached)."""
    names: set[str] = set()
    for rel in _SHIM_HEADERS:
        header = include_dir / rel
        if header.is_file():
            names.update(
                _names_under_use_cuda(header.read_text(encoding="utf-8", errors="replace"))
            )
    return tuple(sorted(names))


def _names_under_use_cuda(text: str) -> set[str]:
    # A stack of "is this #if level a USE_CUDA one (and are we in its true branch)".
    stack: list[bool] = []
    kept: list[str] = []
    for line in text.splitlines():
        if m := _IF_RE.match(line):
            cond = m.group(2)
            stack.append(m.group(1) != "ifndef" and "USE_CUDA" in cond and "!" not in cond)
            continue
        if _ELSE_RE.match(line) and stack:
            stack[-1] = False
            continue
        if _ENDIF_RE.match(line) and stack:
            stack.pop()
            continue
        if any(stack):
            kept.append(line)
    return set(_EXPORT_RE.findall("\n".join(kept)))


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
