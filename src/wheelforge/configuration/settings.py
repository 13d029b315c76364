"""One precedence chain for every command's settings: defaults, then matrix.yaml, then the
environment (TORCH_CUDA_ARCH_LIST, MAX_JOBS, NVCC_THREADS, CXX, CC, XDG_CACHE_HOME,
WHEELFORGE_COMPILE_CACHE), then
command-line flags. The default folders (dist/, build/wheelforge/, the cache) are decided here
and nowhere else; flag values the CLI passes through raw (--target, --python-abi) are parsed
here too."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix import COMPILE_CACHES, PYTHON_ABI_RE, Matrix, TestsConfig
from wheelforge.configuration.reader import load_matrix
from wheelforge.configuration.sizes import parse_size
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
    size_budget: str | None = None  # as written: 100MiB, 450MB
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
    size_budget: int  # bytes per wheel: --size-budget, else size-budget of the matrix
    compile_cache: str = "auto"  # auto, sccache, ccache, none (toolchain/compilecache.py)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wheelforge"


def cache_dir(flag: Path | None) -> Path:
    """--cache-dir, else the default cache."""
    return (flag or default_cache()).resolve()


def out_dir(matrix: Matrix, flag: Path | None) -> Path:
    """--out, else dist/ beside the matrix."""
    return (flag or matrix.root / "dist").resolve()


def build_root(matrix: Matrix, flag: Path | None) -> Path:
    """--build-dir, else build/wheelforge/ beside the matrix."""
    return (flag or matrix.root / "build" / "wheelforge").resolve()


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
        out_dir=out_dir(matrix, flags.out),
        build_root=build_root(matrix, flags.build_dir),
        jobs=jobs,
        nvcc_threads=_positive_int(env.get("NVCC_THREADS"), "NVCC_THREADS"),
        python=flags.python or Path(sys.executable),
        cxx=_compiler(env, "CXX", "c++"),
        cc=_compiler(env, "CC", "cc"),
        only=flags.only,
        offline=flags.offline,
        cache=cache_dir(flags.cache_dir),
        size_budget=(
            parse_size(flags.size_budget, where="--size-budget")
            if flags.size_budget is not None
            else matrix.size_budget
        ),
        compile_cache=_compile_cache(flags, matrix, env),
    )


@dataclass(frozen=True, kw_only=True)
class TestFlags:
    """What ``wheelforge test``'s command line said."""

    __test__ = False  # not a pytest test class

    matrix: Path
    wheels: tuple[Path, ...] = ()
    torch: tuple[str, ...] = ()
    torch_from: tuple[Path, ...] = ()
    out: Path | None = None
    build_dir: Path | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True, kw_only=True)
class TestSettings:
    """What ``wheelforge test`` runs: the matrix's tests, under these torches."""

    __test__ = False

    matrix: Matrix
    tests: TestsConfig
    wheels: tuple[Path, ...]  # --wheel: test these (else the built ones)
    torch: tuple[
        str, ...
    ]  # versions to install: --torch, else tests.torch (none with --torch-from)
    torch_from: tuple[Path, ...]  # interpreters whose torch to borrow
    out_dir: Path
    build_root: Path
    cache: Path


def resolve_test(flags: TestFlags) -> TestSettings:
    matrix = load_matrix(flags.matrix)
    if matrix.tests is None:
        raise ConfigError(f"{flags.matrix} has no 'tests' section; add one (see docs/matrix.md)")
    return TestSettings(
        matrix=matrix,
        tests=matrix.tests,
        wheels=flags.wheels,
        torch=flags.torch or (() if flags.torch_from else matrix.tests.torch),
        torch_from=tuple(p.absolute() for p in flags.torch_from),
        out_dir=out_dir(matrix, flags.out),
        build_root=build_root(matrix, flags.build_dir),
        cache=cache_dir(flags.cache_dir),
    )


Version2 = tuple[int, int]


def torch_floor_flag(value: str | None, flag: str = "--target") -> Version2 | None:
    """A torch version flag like 2.10, as (2, 10)."""
    if value is None:
        return None
    parts = value.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ConfigError(f"Invalid value for '{flag}': '{value}' is not a torch version like 2.10")
    return (int(parts[0]), int(parts[1]))


def python_abi_flag(value: str | None, flag: str = "--python-abi") -> Version2 | None:
    """An abi3 floor flag like cp310, as (3, 10); the spelling is matrix.yaml's python-abi."""
    if value is None:
        return None
    m = PYTHON_ABI_RE.match(value)
    if m is None:
        raise ConfigError(f"Invalid value for '{flag}': '{value}' is not like cp310")
    return (3, int(m[1]))
