"""One precedence chain for a build's settings: defaults, then matrix.yaml, then the environment
(TORCH_CUDA_ARCH_LIST, MAX_JOBS, NVCC_THREADS, CXX, CC, WHEELFORGE_COMPILE_CACHE), then
command-line flags."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix import Matrix
from wheelforge.configuration.reader import COMPILE_CACHES, load_matrix
from wheelforge.foundation.errors import ConfigError

# The arch set built when --archs or TORCH_CUDA_ARCH_LIST replaces the matrix's arch sets.
OVERRIDE_ARCH_SET = "custom"


@dataclass(frozen=True, kw_only=True)
class Flags:
    """What the command line said; None where it said nothing."""

    matrix: Path
    archs: str | None = None
    out: Path | None = None
    build_dir: Path | None = None
    jobs: int | None = None
    python: Path | None = None
    only: tuple[str, ...] = ()
    offline: bool = False
    cache_dir: Path | None = None
    compile_cache: str | None = None  # auto, sccache, ccache, none


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    matrix: Matrix
    arch_source: str  # where the arch sets came from: "matrix.yaml", "--archs", ...
    out_dir: Path
    build_root: Path
    jobs: int | None
    nvcc_threads: int | None
    python: Path
    cxx: str
    cc: str
    only: tuple[str, ...]  # variant ids to build (all when empty)
    offline: bool  # never download a toolkit
    cache: Path  # provisioned toolkits, test environments, tool probes
    compile_cache: str = "auto"  # auto, sccache, ccache, none (toolchain/compilecache.py)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wheelforge"


def _positive_int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"{name}={value!r} must be a positive whole number; unset it or fix it")
    return int(value)


def _compiler(env: Mapping[str, str], var: str, default: str) -> str:
    name = env.get(var) or default
    found = shutil.which(name)
    if found is None:
        raise ConfigError(
            f"the C/C++ compiler '{name}' ({'$' + var if env.get(var) else 'default'}) was not found; "
            f"install it (e.g. apt-get install g++) or set {var}"
        )
    return found


def _compile_cache(flags: Flags, matrix: Matrix, env: Mapping[str, str]) -> str:
    if flags.compile_cache is not None:
        return flags.compile_cache
    value = env.get("WHEELFORGE_COMPILE_CACHE")
    if value:
        if value not in COMPILE_CACHES:
            raise ConfigError(
                f"WHEELFORGE_COMPILE_CACHE={value!r} must be one of {', '.join(COMPILE_CACHES)}; "
                "unset it or fix it"
            )
        return value
    return matrix.compile_cache or "auto"


def resolve(flags: Flags, env: Mapping[str, str] | None = None) -> BuildSettings:
    env = os.environ if env is None else env
    matrix = load_matrix(flags.matrix)
    arch_source = str(flags.matrix)
    override = None
    if flags.archs is not None:
        override, arch_source = flags.archs, "--archs"
    elif env.get("TORCH_CUDA_ARCH_LIST"):
        override, arch_source = env["TORCH_CUDA_ARCH_LIST"], "TORCH_CUDA_ARCH_LIST"
    if override is not None:
        specs = parse_arch_list(override, source=arch_source)
        matrix = matrix.with_arch_sets((ArchSet(OVERRIDE_ARCH_SET, specs),))
    jobs = flags.jobs if flags.jobs is not None else _positive_int(env.get("MAX_JOBS"), "MAX_JOBS")
    return BuildSettings(
        matrix=matrix,
        arch_source=arch_source,
        out_dir=(flags.out or matrix.root / "dist").resolve(),
        build_root=(flags.build_dir or matrix.root / "build" / "wheelforge").resolve(),
        jobs=jobs,
        nvcc_threads=_positive_int(env.get("NVCC_THREADS"), "NVCC_THREADS"),
        python=flags.python or Path(sys.executable),
        cxx=_compiler(env, "CXX", "c++"),
        cc=_compiler(env, "CC", "cc"),
        only=flags.only,
        offline=flags.offline,
        cache=(flags.cache_dir or default_cache()).resolve(),
        compile_cache=_compile_cache(flags, matrix, env),
    )
