"""One precedence chain for every command's settings: defaults, then matrix.yaml, then the
environment (TORCH_CUDA_ARCH_LIST, MAX_JOBS, NVCC_THREADS, WHEELFORGE_SPLIT_COMPILE, CXX, CC, compiler launchers,
SOURCE_DATE_EPOCH, XDG_CACHE_HOME, WHEELFORGE_COMPILE_CACHE, WHEELFORGE_MEMORY_LIMIT, WHEELFORGE_DIST_SCHEDULER and _TOKEN), then
command-line flags. The default folders (dist/,
build/wheelforge/, the cache) are decided here and nowhere else; flag values the CLI passes
through raw (--target, --python-abi, --python) are parsed here too.

Compiler launchers follow the two conventions build tools share: ``CXX="ccache g++"`` (make,
setuptools: the words before the compiler launch it) and CMake's ``CMAKE_CXX_COMPILER_LAUNCHER``,
``CMAKE_C_COMPILER_LAUNCHER`` and ``CMAKE_CUDA_COMPILER_LAUNCHER`` environment variables (CMake
3.17+). The CUDA launcher wraps nvcc; nvcc's own host compiler (-ccbin) is always a bare compiler.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.configuration import abi
from wheelforge.configuration.archs import ArchSet, arch_list_id, parse_arch_list
from wheelforge.configuration.bytesizes import parse_size
from wheelforge.configuration.matrix.keys import COMPILE_CACHES, PYTHON_ABI_RE
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.matrix.model import Matrix, TestsConfig, WheelVariantsConfig
from wheelforge.foundation import fsutil, numbers
from wheelforge.foundation.cachehome import default_cache
from wheelforge.foundation.errors import ConfigError
from wheelforge.foundation.resources import MemoryLimit


@dataclass(frozen=True, kw_only=True)
class Flags:
    """What the command line said; None where it said nothing."""

    matrix: Path
    archs: str | None = None
    out: Path | None = None
    build_dir: Path | None = None
    jobs: int | None = None
    python: str | None = None  # a path, or a command name looked up on the PATH (as tox and uv do)
    only: tuple[str, ...] = ()
    offline: bool = False
    cache_dir: Path | None = None
    import_check: bool = True
    size_budget: str | None = None  # as written: 100MiB, 450MB
    wait: bool = True  # another build holds the build folder: wait (False: --no-wait, fail)
    wheel_variants: bool = False  # --wheel-variants: PEP 825 variant wheels (else the matrix's key)
    verify_reproducible: bool = False
    compile_cache: str | None = None  # auto, sccache, ccache, none
    memory_limit: str | None = None  # as written: 24GiB
    dist_scheduler: str | None = None  # sccache-dist's scheduler URL
    torch_from: str | None = None  # --torch-from: a path or a command name


@dataclass(frozen=True, kw_only=True)
class Launchers:
    """The words run in front of each compiler (ccache, sccache, distcc), e.g.
    ``("/usr/bin/ccache",)``; empty: the compiler runs itself."""

    cxx: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    cuda: tuple[str, ...] = ()  # in front of nvcc


@dataclass(frozen=True, kw_only=True)
class Compilers:
    """The host compilers (``$CXX``, ``$CC``) and the launchers the environment names."""

    cxx: str
    cc: str
    launchers: Launchers = Launchers()


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    matrix: Matrix
    arch_source: str  # where the arch sets came from: "matrix.yaml", "--archs", ...
    out_dir: Path
    build_root: Path
    jobs: int | None
    nvcc_threads: int | None
    # nvcc --split-compile's partitions (WHEELFORGE_SPLIT_COMPILE; 1: none); None: the planner's
    # default where the toolkit has the option (planning/planner.split_partitions)
    split_compile: int | None = None
    python: Path
    compilers: Compilers
    source_date_epoch: int | None = None  # checked here, before compiling; packing reads it again
    only: tuple[str, ...]  # variant ids to build (all when empty)
    offline: bool  # never download a toolkit
    cache_dir: Path  # provisioned toolkits, test environments, tool probes
    import_check: bool = True  # import each extension module before publishing its wheel
    size_budget: int  # bytes per wheel: --size-budget, else size-budget of the matrix
    wait: bool = True  # for another build's lock on the build folder
    verify_reproducible: bool = False  # build each variant twice, in two folders, and compare
    compile_cache: str = "auto"  # auto, sccache, ccache, none (toolchain/compilecache.py)
    compile_cache_source: str = ""  # where it was given: "--compile-cache none", ...; "": auto
    # the memory the compiles may use (planning/parallelism.py) and where it was given
    # (--memory-limit, ..., matrix.yaml); None: what the machine leaves, read when planned
    memory_limit: MemoryLimit | None = None
    # sccache-dist (toolchain/compilecache.Dist): the scheduler's URL and the client token
    dist_scheduler: str | None = None
    dist_token: str | None = field(default=None, repr=False)
    # The interpreter whose own torch an unstable-ABI build compiles against, no pip and no
    # network: --torch-from, or `torch: installed` (then the build Python). None: the matrix's
    # torch versions, each in an environment of its own.
    torch_from: Path | None = None


def cache_dir(flag: Path | None) -> Path:
    """--cache-dir, else the default cache."""
    return fsutil.resolved(flag or default_cache())


def out_dir(matrix: Matrix, flag: Path | None) -> Path:
    """--out, else dist/ beside the matrix."""
    return fsutil.resolved(flag or matrix.root / "dist")


def build_root(matrix: Matrix, flag: Path | None) -> Path:
    """--build-dir, else build/wheelforge/ beside the matrix."""
    return fsutil.resolved(flag or matrix.root / "build" / "wheelforge")


def _shown(value: str) -> str:
    """A value as an error quotes it: 5,000 digits are named, not printed."""
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")


def _positive_int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    number = numbers.whole(value, low=1, high=numbers.MAX_JOBS)
    if number is None:
        raise ConfigError(
            f"{name}={_shown(value)} must be a positive whole number (ASCII digits, at most "
            f"{numbers.MAX_JOBS}); unset it or fix it"
        )
    return number


def _program(name: str, what: str, where: str, fix: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ConfigError(f"{what} '{name}' ({where}) was not found; {fix}")
    return found


def _launcher(env: Mapping[str, str], var: str) -> tuple[str, ...]:
    try:
        words = shlex.split(env.get(var) or "")
    except ValueError as exc:
        raise ConfigError(f"${var}: {exc}; quote it as a shell would") from None
    if words:
        words[0] = _program(
            words[0], "the compiler launcher", f"${var}", f"install it or unset {var}"
        )
    return tuple(words)


def _compiler(env: Mapping[str, str], var: str, default: str) -> tuple[tuple[str, ...], str]:
    """(launcher words, compiler) of ``$CXX``/``$CC``: the last word is the compiler, words
    before it launch it; CMake's ``CMAKE_<LANG>_COMPILER_LAUNCHER`` comes first."""
    given = env.get(var)
    value = given or default
    # Name the variable; quote its value when it is more than one word.
    where = "default" if not given else f"${var}" if " " not in given else f"${var}={given!r}"
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}; quote it as a shell would") from None
    if not words:
        raise ConfigError(f"${var} is blank; unset it or name a compiler")
    if words[-1].startswith("-"):
        raise ConfigError(
            f"{where} ends in the flag {words[-1]!r}; put compiler flags in extension.cxx-flags "
            f"and let {var} name a compiler, optionally after a launcher ('ccache g++')"
        )
    fix = f"install it (e.g. apt-get install g++) or set {var}"
    compiler = _program(words[-1], "the C/C++ compiler", where, fix)
    launcher = (
        [_program(words[0], "the compiler launcher", where, fix), *words[1:-1]]
        if len(words) > 1
        else []
    )
    cmake_var = f"CMAKE_{'CXX' if var == 'CXX' else 'C'}_COMPILER_LAUNCHER"
    return (*_launcher(env, cmake_var), *launcher), compiler


def source_date_epoch(value: str | None) -> int | None:
    """``SOURCE_DATE_EPOCH`` (reproducible-builds.org): whole seconds since 1970, or unset."""
    if value is None or value == "":
        return None
    seconds = numbers.whole(value, high=numbers.MAX_EPOCH)
    if seconds is None:
        raise ConfigError(
            f"SOURCE_DATE_EPOCH={_shown(value)} must be whole seconds since 1970, before 2108 "
            "(a wheel's zip dates end in 2107; e.g. $(git log -1 --format=%ct)); unset it or fix it"
        )
    return seconds


def resolve_python(value: str | None, flag: str = "--python") -> Path:
    """An interpreter named by *flag*: this one (None), a path, or a command name on the PATH."""
    if value is None:
        return Path(sys.executable)
    if os.sep not in value:
        found = shutil.which(value)
        if found is None:
            raise ConfigError(
                f"{flag} {value}: no such command on the PATH; name an interpreter or its path"
            )
        return Path(found)
    path = Path(value)
    if not path.exists():
        raise ConfigError(f"{flag} {value}: no such file; name an interpreter or its path")
    if path.is_dir():
        raise ConfigError(f"{flag} {value} is a folder; name the interpreter in it (bin/python)")
    if not os.access(path, os.X_OK):
        raise ConfigError(f"{flag} {value} is not executable; name a Python interpreter")
    return path.absolute()


def _compile_cache(flags: Flags, matrix: Matrix, env: Mapping[str, str]) -> tuple[str, str]:
    """--compile-cache, else $WHEELFORGE_COMPILE_CACHE, else matrix.yaml's compile-cache, else
    auto; and where it was given (the summary names it)."""
    if flags.compile_cache is not None:
        return flags.compile_cache, f"--compile-cache {flags.compile_cache}"  # click checked it
    if given := env.get("WHEELFORGE_COMPILE_CACHE"):
        _known_cache(f"WHEELFORGE_COMPILE_CACHE={given!r}", given, "unset it or fix it")
        return given, f"WHEELFORGE_COMPILE_CACHE={given}"
    if given := matrix.compile_cache:
        _known_cache(f"{matrix.path}: compile-cache {given!r}", given, "fix it in the matrix")
        return given, f"{matrix.path.name}'s compile-cache: {given}"
    return "auto", ""


def _known_cache(where: str, value: str, fix: str) -> None:
    if value not in COMPILE_CACHES:
        raise ConfigError(f"{where} must be one of {', '.join(COMPILE_CACHES)}; {fix}")


def _memory_limit(flags: Flags, matrix: Matrix, env: Mapping[str, str]) -> MemoryLimit | None:
    """--memory-limit, else $WHEELFORGE_MEMORY_LIMIT, else matrix.yaml's memory-limit, else
    None (the machine's available memory, read when the build is planned)."""
    if flags.memory_limit is not None:
        return MemoryLimit(
            bytes=parse_size(flags.memory_limit, where="--memory-limit"), source="--memory-limit"
        )
    if env.get("WHEELFORGE_MEMORY_LIMIT"):
        given = env["WHEELFORGE_MEMORY_LIMIT"]
        bytes_ = parse_size(given, where="WHEELFORGE_MEMORY_LIMIT")
        return MemoryLimit(bytes=bytes_, source="WHEELFORGE_MEMORY_LIMIT")
    if matrix.memory_limit is not None:
        return MemoryLimit(bytes=matrix.memory_limit, source=f"{matrix.path.name} memory-limit")
    return None


def _dist(flags: Flags, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """--dist-scheduler, else $WHEELFORGE_DIST_SCHEDULER; the token from
    $WHEELFORGE_DIST_TOKEN only (a secret has no place on a command line or in a file that is
    committed)."""
    scheduler = flags.dist_scheduler or env.get("WHEELFORGE_DIST_SCHEDULER") or None
    if scheduler is None:
        return None, None
    where = "--dist-scheduler" if flags.dist_scheduler else "WHEELFORGE_DIST_SCHEDULER"
    if not scheduler.startswith(("http://", "https://")):
        raise ConfigError(f"{where} {scheduler!r} is no URL: write it like http://10.0.0.5:10600")
    token = env.get("WHEELFORGE_DIST_TOKEN")
    if not token:
        raise ConfigError(
            f"{where} names a scheduler but WHEELFORGE_DIST_TOKEN is not set: set it to the "
            "client token of the scheduler's [client_auth]"
        )
    return scheduler, token


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
        matrix = dataclasses.replace(matrix, arch_sets=(ArchSet(arch_list_id(specs), specs),))
    elif not matrix.arch_sets and matrix.extensions:  # a pure-Python wheel has no archs
        raise ConfigError(
            f"{flags.matrix} names no archs: add arch-sets (e.g. 'arch-sets: \"8.0 9.0+PTX\"'), "
            "or pass --archs, or set TORCH_CUDA_ARCH_LIST"
        )
    if flags.wheel_variants and not matrix.variant_wheels:
        null = matrix.wheel_variants.null if matrix.wheel_variants else None
        matrix = matrix.with_wheel_variants(WheelVariantsConfig(enabled=True, null=null))
    jobs = flags.jobs if flags.jobs is not None else _positive_int(env.get("MAX_JOBS"), "MAX_JOBS")
    cxx_launcher, cxx = _compiler(env, "CXX", "c++")
    cc_launcher, cc = _compiler(env, "CC", "cc")
    compile_cache, compile_cache_source = _compile_cache(flags, matrix, env)
    dist_scheduler, dist_token = _dist(flags, env)
    return BuildSettings(
        matrix=matrix,
        arch_source=arch_source,
        out_dir=out_dir(matrix, flags.out),
        build_root=build_root(matrix, flags.build_dir),
        jobs=jobs,
        nvcc_threads=_positive_int(env.get("NVCC_THREADS"), "NVCC_THREADS"),
        split_compile=_positive_int(
            env.get("WHEELFORGE_SPLIT_COMPILE"), "WHEELFORGE_SPLIT_COMPILE"
        ),
        python=resolve_python(flags.python),
        compilers=Compilers(
            cxx=cxx,
            cc=cc,
            launchers=Launchers(
                cxx=cxx_launcher,
                cc=cc_launcher,
                cuda=_launcher(env, "CMAKE_CUDA_COMPILER_LAUNCHER"),
            ),
        ),
        source_date_epoch=source_date_epoch(env.get("SOURCE_DATE_EPOCH")),
        only=flags.only,
        offline=flags.offline,
        cache_dir=cache_dir(flags.cache_dir),
        size_budget=(
            parse_size(flags.size_budget, where="--size-budget")
            if flags.size_budget is not None
            else matrix.size_budget
        ),
        import_check=flags.import_check,
        wait=flags.wait,
        verify_reproducible=flags.verify_reproducible,
        compile_cache=compile_cache,
        compile_cache_source=compile_cache_source,
        memory_limit=_memory_limit(flags, matrix, env),
        dist_scheduler=dist_scheduler,
        dist_token=dist_token,
        torch_from=_torch_from(flags, matrix),
    )


def _torch_from(flags: Flags, matrix: Matrix) -> Path | None:
    """--torch-from's interpreter, else the build Python for `torch: installed`."""
    if flags.torch_from is not None:
        if not abi.of(matrix.abi).per_torch:
            raise ConfigError(
                f"--torch-from {flags.torch_from}: a stable-ABI build compiles against the torch of "
                "--python (one binary for every torch); --torch-from is for abi: unstable"
            )
        return resolve_python(flags.torch_from, "--torch-from")
    return resolve_python(flags.python) if matrix.torch.installed else None


@dataclass(frozen=True, kw_only=True)
class TestFlags:
    """What ``wheelforge test``'s command line said."""

    __test__ = False  # not a pytest test class

    matrix: Path
    wheels: tuple[Path, ...] = ()
    torch: tuple[str, ...] = ()
    torch_from: tuple[str, ...] = ()  # as given: a path or a command name
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
    cache_dir: Path


def resolve_test(flags: TestFlags) -> TestSettings:
    matrix = load_matrix(flags.matrix)
    if matrix.tests is None:
        raise ConfigError(f"{flags.matrix} has no 'tests' section; add one (see docs/matrix.md)")
    return TestSettings(
        matrix=matrix,
        tests=matrix.tests,
        wheels=flags.wheels,
        torch=flags.torch or (() if flags.torch_from else matrix.tests.torch),
        # `torch: installed`: the torch of this Python, unless --torch or --torch-from says
        torch_from=tuple(resolve_python(v, "--torch-from") for v in flags.torch_from)
        or ((Path(sys.executable),) if matrix.torch.installed and not flags.torch else ()),
        out_dir=out_dir(matrix, flags.out),
        build_root=build_root(matrix, flags.build_dir),
        cache_dir=cache_dir(flags.cache_dir),
    )


Version2 = tuple[int, int]


def torch_floor_flag(value: str | None, flag: str = "--target") -> Version2 | None:
    """A torch version flag like 2.10, as (2, 10)."""
    if value is None:
        return None
    parts = [numbers.whole(p, high=numbers.MAX_MINOR) for p in value.split(".")[:2]]
    if len(parts) < 2 or parts[0] is None or parts[1] is None:
        shown = _shown(value)[1:-1]
        raise ConfigError(f"Invalid value for '{flag}': '{shown}' is not a torch version like 2.10")
    return (parts[0], parts[1])


def python_abi_flag(value: str | None, flag: str = "--python-abi") -> Version2 | None:
    """An abi3 floor flag like cp310, as (3, 10); the spelling is matrix.yaml's python-abi."""
    if value is None:
        return None
    m = PYTHON_ABI_RE.match(value)
    if m is None:
        raise ConfigError(f"Invalid value for '{flag}': '{value}' is not like cp310")
    return (3, int(m[1]))
