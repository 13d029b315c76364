"""CUDA toolkits: finding every nvcc on the machine (and in wheelforge's cache), asking each one
which archs it builds and which host compilers it accepts, and choosing one per arch set.

Where toolkits are looked for: ``$CUDA_HOME``, ``$CUDA_PATH``, the PATH, NVIDIA's and the
distributions' folders (``/usr/local/cuda-12.4``, ...), conda-style prefixes (``$CONDA_PREFIX``
and ``/opt/conda``: ``bin/nvcc`` with the headers and libraries under ``targets/x86_64-linux``),
NVIDIA's PyPI layout in a Python's site-packages (``nvidia/cu13/bin/nvcc``: the
``nvidia-cuda-nvcc`` wheels of CUDA 13), and the toolkits wheelforge provisioned."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from wheelforge.configuration import releases
from wheelforge.configuration.archs import Arch, sm_range
from wheelforge.foundation import cachefiles, log, numbers, proc, readers
from wheelforge.foundation.document import from_document, to_document
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, ToolError
from wheelforge.toolchain import probecache

NVCC_HINT = (
    "install a CUDA toolkit, or run 'wheelforge toolkit install VERSION' (see docs/toolkits.md)"
)
TOOLKITS = "toolkits"  # <cache>/toolkits/<recipe folder>: provisioned toolkits
# Written last into provisioned toolkits (provision.py); its mtime: when a build last used it.
TOOLKIT_JSON = "toolkit.json"
_VERSION_RE = re.compile(r"release ([0-9]{1,3}\.[0-9]{1,3}), V([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,6})")
# "Build cuda_13.0.r13.0/compiler.36424714_0": NVIDIA's build of the compiler, path-free.
_BUILD_RE = re.compile(r"^Build (\S+)", re.MULTILINE)
# An option as `nvcc --help` lists it: at the start of a line, then its argument or spaces.
_OPTION_RE = {
    name: re.compile(rf"^{re.escape(name)}(?:\s|$)", re.MULTILINE)
    for name in ("--split-compile", "--jobserver")
}
_DRY_VAR_RE = {
    name: re.compile(rf"^#\$ {name}=(.+?)/?$", re.MULTILINE)
    for name in ("_HERE_", "TOP", "INCLUDES", "SYSTEM_INCLUDES")
}
# crt/host_config.h: `#if __GNUC__ > 11` ... `#error -- unsupported GNU version!`
_GCC_MAX_RE = re.compile(r"#if\s+__GNUC__\s*>\s*([0-9]{1,3})\b")
# Where toolkits usually live, besides $CUDA_HOME, $CUDA_PATH, $CONDA_PREFIX and PATH.
STANDARD_GLOBS = (
    "/usr/local/cuda/bin/nvcc",
    "/usr/local/cuda-*/bin/nvcc",
    "/opt/cuda*/bin/nvcc",
    "/opt/nvidia/cuda*/bin/nvcc",
    "/usr/lib/nvidia-cuda-toolkit/bin/nvcc",
    "/opt/conda/bin/nvcc",  # conda-based images (the conda-forge cuda-nvcc package)
    "/opt/conda/envs/*/bin/nvcc",
)
# NVIDIA's PyPI wheels of CUDA 13 (nvidia-cuda-nvcc) put nvcc here, under site-packages; pip's
# CUDA torch builds install their CUDA libraries beside it (nvidia/cu13/lib, nvidia/cu13/include).
PYPI_NVCC = "nvidia/cu*/bin/nvcc"
# A Python's site-packages, found from the interpreter's path without running it: a venv's and
# a prefix install's (lib/python3.X/site-packages), Debian's (dist-packages).
_SITE_GLOBS = ("lib/python3*/site-packages", "lib/python3*/dist-packages")


def release_builds(release: Version, sass: frozenset[int], arch: Arch) -> bool:
    """Whether a CUDA release whose nvcc lists *sass* (--list-gpu-code) builds *arch*: the one
    rule, for toolkits found and for recipes still to provision. Whether it builds a and f
    variants is the release table's (configuration/releases.py)."""
    if arch.sm not in sass:
        return False
    features = releases.features(release)
    if arch.suffix == "a":
        return features.arch_specific
    if arch.suffix == "f":
        return features.family_specific
    return True


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    nvcc: Path  # the real nvcc driver (not a wrapper script)
    root: Path
    version: Version  # e.g. 13.0.88
    sass: frozenset[int]  # compute capabilities as numbers (75, 80, ...) from --list-gpu-code
    cudart_static: Path | None
    gcc_max: int | None = None  # the newest GCC major its crt/host_config.h accepts
    host_cxx: Path | None = None  # a host compiler that came with it (provisioned toolkits)
    origin: str = ""  # how it was found: "$CUDA_HOME", "PATH", "/usr/local/cuda-*", "provisioned"
    # The folders nvcc itself adds for its headers (cuda_runtime.h, CCCL); a .cpp source that
    # includes them needs them from the C++ compiler too.
    include_dirs: tuple[Path, ...] = ()
    build: str = ""  # nvcc's own build identity, e.g. cuda_13.0.r13.0/compiler.36424714_0
    # nvcc's options that planning uses where it has them (`nvcc --help`): --split-compile
    # (its optimizer and ptxas cut a compile into partitions run on threads) and --jobserver
    # (those threads take GNU make jobserver tokens, so they run only on idle cores)
    split_compile: bool = False
    jobserver: bool = False

    @property
    def short(self) -> str:
        """``cu130`` for CUDA 13.0."""
        return f"cu{self.version.major}{self.version.minor}"

    @property
    def release(self) -> str:
        return f"{self.version.major}.{self.version.minor}"

    def supports(self, arch: Arch) -> bool:
        return release_builds(self.version, self.sass, arch)

    def describe_range(self) -> str:
        return sm_range(self.sass)

    def describe(self) -> str:
        return f"CUDA {self.version} ({self.describe_range()}) at {self.root}"


def site_packages(python: Path) -> list[Path]:
    """The site-packages folders of the interpreter *python*, from its path alone (a venv's
    bin/python: <venv>/lib/python3.X/site-packages); nothing is run."""
    prefix = Path(os.path.abspath(python)).parent.parent  # noqa: PTH100 - a venv's python is a link: not resolved
    return [Path(p) for pattern in _SITE_GLOBS for p in sorted(glob.glob(str(prefix / pattern)))]  # noqa: PTH207


def _nvcc_candidates(
    env: Mapping[str, str],
    extra: Iterable[Path],
    pythons: Iterable[Path] = (),
    globs: Iterable[str] = STANDARD_GLOBS,
) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"):
        if env.get(var):
            found.append((Path(env[var]) / "bin" / "nvcc", f"${var}"))
    for folder in env.get("PATH", "").split(os.pathsep):
        if folder:
            found.append((Path(folder) / "nvcc", "PATH"))
    for pattern in globs:
        found += [(Path(p), pattern) for p in sorted(glob.glob(pattern))]  # noqa: PTH207 - absolute patterns
    for python in dict.fromkeys(pythons):
        for site in site_packages(python):
            nvccs = sorted(glob.glob(str(site / PYPI_NVCC)))  # noqa: PTH207
            found += [(Path(p), f"PyPI ({site})") for p in nvccs]
    found += [(p, "provisioned") for p in extra]
    return found


def _host_gcc_max(root: Path) -> int | None:
    for rel in ("include/crt/host_config.h", "targets/x86_64-linux/include/crt/host_config.h"):
        header = root / rel
        if header.is_file():
            text = readers.read_text(header, cap=readers.HEADER_CAP, errors="replace")
            match = _GCC_MAX_RE.search(
                text[text.find("__GNUC__") - 200 :] if "__GNUC__" in text else ""
            )
            if match:
                return int(match[1])
    return None


def _libdirs(root: Path) -> list[Path]:
    libdirs = [root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib"]
    # Debian's packaging keeps the static runtime in the multiarch folder beside the toolkit.
    return [
        *libdirs,
        root.parent.parent / "lib" / "x86_64-linux-gnu",
        root.parent / "x86_64-linux-gnu",
    ]


def _ask(nvcc: Path) -> tuple[dict[str, Any], list[str | Path]]:
    """nvcc's version, the archs it builds and where it really lives, and the files to watch."""
    version_out = proc.run([nvcc, "--version"], hint=NVCC_HINT, timeout=proc.PROBE_S).stdout
    match = _VERSION_RE.search(version_out)
    if match is None:
        raise ToolError(f"{nvcc} --version printed no CUDA release; is it a real nvcc?")
    codes = proc.run([nvcc, "--list-gpu-code"], hint=NVCC_HINT, timeout=proc.PROBE_S).stdout.split()
    sass = sorted(
        {a.sm for c in codes if (a := Arch.from_code(c)) is not None and c.startswith("sm_")}
    )
    if not sass:  # a toolkit that builds nothing would be passed over for a download
        said = repr(" ".join(codes)[:80]) if codes else "nothing"
        raise ToolError(
            f"{nvcc} --list-gpu-code listed no sm_ code (it printed {said}); is it a real nvcc?"
        )
    # nvcc may be a wrapper script; its dry run names the real install (TOP) and driver (_HERE_).
    dry = proc.run(
        [nvcc, "--dryrun", "-x", "cu", "-E", os.devnull],
        hint=NVCC_HINT,
        check=False,
        timeout=proc.PROBE_S,
    ).stderr
    here = _DRY_VAR_RE["_HERE_"].search(dry)
    top = _DRY_VAR_RE["TOP"].search(dry)
    real = Path(here[1]) / "nvcc" if here else nvcc
    root = Path(top[1]).resolve() if top else real.parent.parent
    libdirs = _libdirs(root)
    static = next(
        (d / "libcudart_static.a" for d in libdirs if (d / "libcudart_static.a").is_file()), None
    )
    # The options it lists; a wrapper or an nvcc too old to list them answers nothing we use.
    options = proc.run([nvcc, "--help"], hint=NVCC_HINT, check=False, timeout=proc.PROBE_S).stdout
    include_roots = [root, root.parent.parent]  # Debian: headers in <prefix>/usr/include
    gcc_max = next((g for r in include_roots if (g := _host_gcc_max(r)) is not None), None)
    info = {
        "nvcc": str(real),
        "root": str(root),
        "version": match[2],
        "sass": sass,
        "cudart_static": str(static) if static else None,
        "gcc_max": gcc_max,
        "include_dirs": [str(d) for d in _dry_includes(dry)],
        "build": b[1] if (b := _BUILD_RE.search(version_out)) else "",
        "split_compile": bool(_OPTION_RE["--split-compile"].search(options)),
        "jobserver": bool(_OPTION_RE["--jobserver"].search(options)),
    }
    # An update in place changes the driver, version.json or the library folders.
    watch: list[str | Path] = [nvcc, real, root / "version.json", root / "bin", *libdirs]
    watch += [r / "include" / "crt" / "host_config.h" for r in include_roots]
    return info, watch


# What _ask answers (and the probe cache holds): an entry of another shape is asked again.
_NVCC = {
    "nvcc": str,
    "root": str,
    "version": numbers.is_version,
    # an nvcc that listed none was refused (_ask): an entry of none is not its answer
    "sass": lambda v: cachefiles.fits(v, [int]) and bool(v),
    "cudart_static": (str, None),
    "gcc_max": (int, None),
    "include_dirs?": [str],
    "build?": str,
    "split_compile": bool,
    "jobserver": bool,
}


def probe_toolkit(
    nvcc: Path, *, origin: str = "", host_cxx: Path | None = None, cache: Path | None = None
) -> Toolkit:
    """Ask *nvcc* for its version, the archs it builds and where it really lives (or reuse the
    answer cached in *cache* while none of its files changed)."""
    info = probecache.cached(cache, "nvcc", {"nvcc": str(nvcc)}, lambda: _ask(nvcc), shape=_NVCC)
    return Toolkit(
        nvcc=Path(info["nvcc"]),
        root=Path(info["root"]),
        version=Version(info["version"]),
        sass=frozenset(info["sass"]),
        cudart_static=Path(info["cudart_static"]) if info["cudart_static"] else None,
        gcc_max=info["gcc_max"],
        host_cxx=host_cxx,
        origin=origin,
        include_dirs=tuple(Path(d) for d in info.get("include_dirs", [])),
        build=info.get("build", ""),
        split_compile=info["split_compile"],
        jobserver=info["jobserver"],
    )


def _dry_includes(dry: str) -> tuple[Path, ...]:
    """The header folders of nvcc's dry run (``#$ INCLUDES="-I..."``, ``SYSTEM_INCLUDES``),
    so each toolkit of a matrix, provisioned ones too, gives its own; never a fixed path."""
    found: list[Path] = []
    for var in ("INCLUDES", "SYSTEM_INCLUDES"):
        match = _DRY_VAR_RE[var].search(dry)
        words = shlex.split(match[1]) if match else []
        for i, word in enumerate(words):
            folder = word[2:] if word.startswith("-I") and len(word) > 2 else None
            if word in ("-I", "-isystem") and i + 1 < len(words):
                folder = words[i + 1]
            # /usr/include is the compiler's own: naming it with -I breaks #include_next.
            if folder and Path(folder).is_dir() and Path(folder).resolve() != Path("/usr/include"):
                found.append(Path(folder).resolve())
    return tuple(dict.fromkeys(found))


def _provisioned_tools(folder: Path) -> tuple[Path, Path | None] | None:
    """(nvcc, host compiler) that provision.py recorded in *folder*, if it holds a whole toolkit."""
    info = cachefiles.load(
        folder / TOOLKIT_JSON, ToolkitFile, what="the provisioned toolkit's", within=folder
    )
    if info is None:
        return None
    nvcc = folder / info.nvcc
    cxx = folder / info.host_cxx if info.host_cxx else None
    return (nvcc, cxx) if nvcc.is_file() else None


@dataclass(frozen=True, kw_only=True)
class FetchedFile:
    """A package a provisioned toolkit was unpacked from."""

    file: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ToolkitFile:
    """What provision.py writes into toolkit.json (read back here and by `cache list`)."""

    release: str = ""
    source: str = ""
    nvcc: str  # relative to the toolkit's folder
    host_cxx: str | None = None  # the GCC provisioned with it, relative to the folder
    files: tuple[FetchedFile, ...] = ()


def toolkit_file_text(release: str, source: str, fetched: dict[str, object]) -> str:
    """toolkit.json's text for a toolkit provisioned from *source*; *fetched*: what the
    installing step recorded (nvcc, host_cxx, files). A ValueError names what does not fit."""
    info = from_document(ToolkitFile, {"release": release, "source": source, **fetched})
    return json.dumps(to_document(info), indent=1) + "\n"


def provisioned(cache: Path) -> list[tuple[Path, Path | None]]:
    """(nvcc, host compiler) of every toolkit provisioned into *cache*."""
    found = (
        _provisioned_tools(meta.parent)
        for meta in sorted((cache / TOOLKITS).glob(f"*/{TOOLKIT_JSON}"))
    )
    return [tools for tools in found if tools is not None]


def describe_provisioned(folder: Path) -> str | None:
    """What the provisioned toolkit *folder* is ("CUDA 13.0 from pypi"), from its toolkit.json."""
    try:
        text = readers.read_text(folder / TOOLKIT_JSON, cap=readers.STATE_CAP)
        info = from_document(ToolkitFile, json.loads(text))
    except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
        return None
    if not (info.release and info.source):
        return None
    return f"CUDA {info.release} from {info.source}"


def provisioned_folder(toolkit: Toolkit, cache: Path) -> Path | None:
    """The folder of *cache* that *toolkit* was provisioned into, None for any other toolkit."""
    if toolkit.origin != "provisioned":
        return None
    nvcc = toolkit.nvcc.resolve()
    for meta in (cache / TOOLKITS).glob(f"*/{TOOLKIT_JSON}"):
        if nvcc.is_relative_to(meta.parent.resolve()):
            return meta.parent
    return None


def mark_used(toolkit: Toolkit, cache: Path) -> None:
    """Record that a build uses *toolkit* now, when it is one provisioned into *cache* (the
    mtime of its toolkit.json: last used, for `wheelforge cache prune`)."""
    folder = provisioned_folder(toolkit, cache)
    if folder is not None:
        with contextlib.suppress(OSError):
            os.utime(folder / TOOLKIT_JSON)


def load_provisioned(folder: Path, *, cache: Path | None = None) -> Toolkit:
    """The toolkit provisioned into *folder*."""
    tools = _provisioned_tools(folder)
    if tools is None:
        raise ToolError(
            f"{folder} holds no usable toolkit ({TOOLKIT_JSON} or nvcc missing); delete it and "
            "provision again"
        )
    nvcc, host = tools
    return probe_toolkit(nvcc, origin="provisioned", host_cxx=host, cache=cache)


def _check_named(env: Mapping[str, str]) -> None:
    """A toolkit named by $CUDA_HOME or $CUDA_PATH must be there: a typo must not silently
    fall back to whatever /usr/local/cuda holds."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var)
        if not value:
            continue
        nvcc = Path(value) / "bin" / "nvcc"
        if not Path(value).is_dir():
            problem = "is not a folder"
        elif not nvcc.is_file():
            problem = f"has no {Path('bin') / 'nvcc'}"
        elif not os.access(nvcc, os.X_OK):
            problem = f"has a {Path('bin') / 'nvcc'} that is not executable"
        else:
            continue
        raise ConfigError(
            f"{var}={value} {problem}; point {var} at a CUDA toolkit (the folder holding "
            f"bin/nvcc) or unset it"
        )


_NAMED = ("$CUDA_HOME", "$CUDA_PATH")  # the origins of toolkits the environment names


def path_nvcc(env: Mapping[str, str]) -> Path | None:
    """The nvcc a shell runs for ``nvcc`` (the first executable one on PATH), which a user who
    sets neither $CUDA_HOME nor $CUDA_PATH points wheelforge at; a PATH whose only nvcc cannot
    be run is refused by name (the shell would say 'Permission denied')."""
    found = shutil.which("nvcc", path=env.get("PATH", ""))
    if found is not None:
        return Path(found).absolute()  # not resolved: a link to nvcc is kept as named
    for folder in env.get("PATH", "").split(os.pathsep):
        nvcc = Path(folder) / "nvcc" if folder else None
        if nvcc is not None and nvcc.is_file():
            raise ConfigError(
                f"the nvcc on PATH, {nvcc}, is not executable; make it executable (chmod +x), "
                "take its folder off PATH, or set CUDA_HOME to a CUDA toolkit"
            )
    return None


def _refuse_named(nvcc: Path, origin: str, env: Mapping[str, str], exc: ToolError) -> None:
    """A toolkit the user pointed to answered wrongly: an error naming it, never a fallback to
    another toolkit (nor to provisioning one)."""
    if origin in _NAMED:
        var = origin[1:]
        raise ConfigError(
            f"{var}={env[var]}: its bin/nvcc does not answer as nvcc does "
            f"({exc.message}); point {var} at a working CUDA toolkit or unset it",
            details=exc.details,
        ) from None
    raise ConfigError(
        f"the nvcc on PATH, {nvcc}, does not answer as nvcc does ({exc.message}); fix or "
        "remove it, take its folder off PATH, or set CUDA_HOME to a working CUDA toolkit",
        details=exc.details,
    ) from None


def discover(
    env: Mapping[str, str] | None = None,
    *,
    cache: Path | None = None,
    pythons: Sequence[Path] = (),
    globs: Iterable[str] = STANDARD_GLOBS,
) -> list[Toolkit]:
    """Every distinct toolkit found, newest first: *pythons* (the build Python; wheelforge's own
    is always looked at) for NVIDIA's PyPI layout; *globs*: where toolkits usually live.

    A toolkit the user pointed to ($CUDA_HOME, $CUDA_PATH, else the nvcc PATH runs) that fails
    its probe (exits non-zero, hangs past its deadline, prints no CUDA release) is an error
    naming it; any other that fails is skipped with a warning that names it."""
    env = os.environ if env is None else env
    _check_named(env)
    proc.check_temp_folder(env)  # nvcc fails every probe in an unusable one: say so first
    named_by_path = None if any(env.get(v) for v in ("CUDA_HOME", "CUDA_PATH")) else path_nvcc(env)
    extra = provisioned(cache) if cache is not None else []
    host = {str(n): c for n, c in extra}
    seen: dict[Path, Toolkit] = {}
    everywhere = [*pythons, Path(sys.executable)]
    for nvcc, origin in _nvcc_candidates(env, [n for n, _ in extra], everywhere, globs):
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            continue
        try:
            toolkit = probe_toolkit(nvcc, origin=origin, host_cxx=host.get(str(nvcc)), cache=cache)
        except ToolError as exc:
            if origin in _NAMED or (origin == "PATH" and nvcc.absolute() == named_by_path):
                _refuse_named(nvcc, origin, env, exc)
            log.warning(f"skipped the nvcc at {nvcc} (found by {origin}): {exc.message}")
            continue
        key = toolkit.nvcc.resolve()
        if key not in seen:
            seen[key] = toolkit
    return sorted(seen.values(), key=lambda t: t.version, reverse=True)


def _gcc_major(cxx: str, cache: Path | None) -> int | None:
    def ask() -> tuple[dict[str, Any], list[str | Path]]:
        result = proc.run(
            [cxx, "-dumpversion"], hint="install g++", check=False, timeout=proc.PROBE_S
        )
        head = result.stdout.strip().split(".")[0]
        major = numbers.whole(head, high=numbers.MAX_MINOR) if result.returncode == 0 else None
        return {"major": major}, [cxx]

    major = probecache.cached(cache, "cxx", {"cxx": cxx}, ask, shape={"major": (int, None)})[
        "major"
    ]
    return major if isinstance(major, int) else None


def host_compiler(toolkit: Toolkit, cxx: str, *, cache: Path | None = None) -> str:
    """The host compiler nvcc should run: the toolkit's own, else *cxx* when the toolkit accepts
    its GCC version (crt/host_config.h), else an older g++-N on the PATH that it accepts."""
    if toolkit.host_cxx is not None:
        return str(toolkit.host_cxx)
    if toolkit.gcc_max is None:
        return cxx
    major = _gcc_major(cxx, cache)
    if major is None or major <= toolkit.gcc_max:
        return cxx
    for n in range(toolkit.gcc_max, toolkit.gcc_max - 6, -1):
        if found := shutil.which(f"g++-{n}"):
            return found
    raise EnvironmentProblem(
        f"CUDA {toolkit.version} at {toolkit.root} accepts g++ up to {toolkit.gcc_max} (its crt/host_config.h), "
        f"but {cxx} is g++ {major}; install g++-{toolkit.gcc_max} and set CXX to it, or run "
        f"'wheelforge toolkit install {toolkit.release}' where a recipe brings its own compiler"
    )
