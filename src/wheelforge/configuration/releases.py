"""The CUDA releases wheelforge knows, read from ``data/cuda-releases.toml``: the one owner of
what differs between releases. Per release: the archs its nvcc builds (SASS and PTX), whether it
builds ``a``/``f`` variants, the PTX ISA it writes and the drivers it needs, where wheelforge can
provision it from, what its nvcc needs for a path-free build, and which size levers it has. The
file's comments say where each fact comes from.

Every room asks here and compares no release numbers itself. A release that is not in the table
(a newer nvcc found on the machine, or one between two entries) still builds: the archs are the
ones its own nvcc lists (``Toolkit.sass``, from ``--list-gpu-code``), and its :class:`Features`
are those of the newest entry not newer than it, or of the oldest entry when it is older than
all of them. It has no recipe and no PTX ISA or driver facts (:func:`release` gives None).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from wheelforge.foundation.errors import ConfigError

if TYPE_CHECKING:  # `inspect` reads the table and never a version: packaging stays unloaded
    from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DATA_FILE = "cuda-releases.toml"
ReleaseKey = tuple[int, int]  # (13, 0)
Feature = Literal[
    "arch_specific", "family_specific", "compress_mode", "fixed_pid", "random_seed", "jobserver"
]

_VERSION_RE = re.compile(r"^\d+\.\d+$")
_DRIVER_RE = re.compile(r"^\d+(\.\d+)*$")
_FAMILY_RE = re.compile(r"^\d+\.\df$")


@dataclass(frozen=True, kw_only=True)
class Features:
    """What nvcc of a release can do and what it needs: the rules that a release missing from
    the table borrows from its nearest entry."""

    arch_specific: bool  # builds a variants (sm_90a)
    family_specific: bool  # builds f variants (sm_100f)
    compress_mode: bool  # nvcc --compress-mode, a size lever
    fixed_pid: bool  # nvcc must run from / with the fixed-pid library (planning/reproducible.py)
    random_seed: bool  # nvcc takes --frandom-seed
    jobserver: bool  # nvcc and ptxas take a FIFO jobserver (--jobserver)

    @property
    def absolute_paths(self) -> bool:
        """Whether the compile commands name every path absolutely: nvcc runs from / when it
        needs the fixed-pid library (its module ids hash the working folder)."""
        return self.fixed_pid


@dataclass(frozen=True, kw_only=True)
class PypiSource:
    """A release made of PyPI wheels of one version (``==X.Y.*``)."""

    packages: tuple[str, ...]
    nvcc: str  # where nvcc lies in the unpacked wheels
    download: str  # what a user is told it costs
    kind: Literal["pypi"] = "pypi"

    @property
    def where(self) -> str:
        return "PyPI's nvidia-* packages"


@dataclass(frozen=True, kw_only=True)
class DebianSource:
    """A release made of Debian packages, fetched with a private apt configuration."""

    suite: str  # bookworm, trixie
    components: tuple[str, ...]
    packages: tuple[str, ...]  # apt names, =VERSION where pinned
    # the host compiler among the packages, relative to the unpacked tree; None: the system's
    # (found by toolkit.host_compiler among those the release accepts)
    host_cxx: str | None
    prune: tuple[str, ...]  # prefixes of libraries removed after unpacking
    download: str
    kind: Literal["debian"] = "debian"

    @property
    def where(self) -> str:
        return f"Debian {self.suite} non-free"


Source = PypiSource | DebianSource


@dataclass(frozen=True, kw_only=True)
class Release:
    """One entry of the table."""

    version: str  # "13.0"
    sass: frozenset[int]  # sm numbers of --list-gpu-code
    ptx: frozenset[int]  # sm numbers of --list-gpu-arch
    ptx_isa: str  # "9.0"
    driver: str | None  # the lowest Linux driver of its GA (its PTX JITs there); None: unpublished
    compat_driver: str  # the lowest driver branch of minor version compatibility (its SASS runs)
    features: Features
    provision: tuple[Source, ...]  # where wheelforge can install it from, in order

    @property
    def key(self) -> ReleaseKey:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@dataclass(frozen=True)
class Table:
    """Every release, oldest first, and the family targets."""

    releases: tuple[Release, ...]
    families: tuple[tuple[str, tuple[int, ...]], ...]  # ("10.0f", (100, 103))

    def get(self, release: Version | str | ReleaseKey) -> Release | None:
        key = release_key(release)
        return next((r for r in self.releases if r.key == key), None)

    def features(self, release: Version | str | ReleaseKey) -> Features:
        """The features of *release*: its entry's, else those of the newest entry not newer
        than it, else the oldest entry's."""
        key = release_key(release)
        older = [r for r in self.releases if r.key <= key]
        return (older[-1] if older else self.releases[0]).features

    def first(self, feature: Feature) -> Release | None:
        """The oldest release that has *feature* (a :class:`Features` field)."""
        return next((r for r in self.releases if getattr(r.features, feature)), None)


def release_key(release: Version | str | ReleaseKey) -> ReleaseKey:
    """(major, minor) of a Version, a "13.0" / "13.0.88" string or a key."""
    from packaging.version import Version

    if isinstance(release, tuple):
        return release
    version = release if isinstance(release, Version) else Version(release)
    return version.major, version.minor


@cache
def table() -> Table:
    """The table shipped with wheelforge (read once)."""
    from importlib import resources

    text = resources.files("wheelforge").joinpath(f"data/{DATA_FILE}").read_text(encoding="utf-8")
    return parse(text, source=DATA_FILE)


def releases() -> tuple[Release, ...]:
    return table().releases


def release(version: Version | str | ReleaseKey) -> Release | None:
    """The table's entry for *version*'s release (13.0 for 13.0.88), None when it has none."""
    return table().get(version)


@cache
def _features(key: ReleaseKey) -> Features:
    return table().features(key)


def features(version: Version | str | ReleaseKey) -> Features:
    """What nvcc of *version* can do and needs, by the rules in the module notes."""
    return _features(release_key(version))


def writing_ptx_isa(isa: str) -> Release | None:
    """The oldest release that writes PTX ISA *isa* ("8.4": CUDA 12.4): the PTX of a binary
    says which toolkit made it, and its entry which driver can JIT it."""
    return next((r for r in releases() if r.ptx_isa == isa), None)


def gpu_generations(lowest: int = 70) -> tuple[int, ...]:
    """The GPUs the table's releases build SASS for, as sm numbers from *lowest* up (70: Volta,
    the oldest a current torch supports), oldest first: the newest release's, and those older
    releases built below its oldest (Volta, which CUDA 13 dropped). One an older release built
    within the newest's range but the newest does not was renamed (CUDA 13.0 calls sm_101
    sm_110), so it is left out."""
    newest = releases()[-1].sass
    older = {sm for r in releases() for sm in r.sass if sm < min(newest)}
    return tuple(sorted(sm for sm in newest | older if sm >= lowest))


def families() -> Mapping[str, tuple[int, ...]]:
    """Family targets and the sm numbers of the GPUs one cubin of each runs on."""
    return dict(table().families)


def first(feature: Feature) -> str:
    """The oldest release with *feature* ("12.8" for compress_mode), for messages."""
    found = table().first(feature)
    return found.version if found else "none"


# --- reading and checking the file ---------------------------------------------------------

_RELEASE_KEYS = {
    "version": str,
    "sass": list,
    "ptx": list,
    "ptx-isa": str,
    "driver": str,
    "compat-driver": str,
    "arch-specific": bool,
    "family-specific": bool,
    "compress-mode": bool,
    "fixed-pid": bool,
    "random-seed": bool,
    "jobserver": bool,
    "provision": list,
}
_OPTIONAL = {"driver", "provision"}
_SOURCE_KEYS: dict[str, dict[str, type]] = {
    "pypi": {"source": str, "packages": list, "nvcc": str, "download": str},
    "debian": {
        "source": str,
        "suite": str,
        "components": list,
        "packages": list,
        "host-cxx": str,
        "prune": list,
        "download": str,
    },
}


def parse(text: str, *, source: str) -> Table:
    """The table in *text* (TOML), checked: every entry complete, no unknown key, versions in
    ascending order, arch lists sorted sm numbers. *source* names the file in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    _keys(data, {"families": dict, "release": list}, set(), source)
    entries = [_release(entry, source) for entry in data["release"]]
    if not entries:
        raise ConfigError(f"{source}: no [[release]] entry; the table needs at least one")
    for before, after in itertools.pairwise(entries):
        if after.key <= before.key:
            raise ConfigError(
                f"{source}: release {after.version} follows {before.version}; keep the "
                "entries in ascending order, one per release"
            )
    return Table(tuple(entries), tuple(_family(k, v, source) for k, v in data["families"].items()))


def _keys(table: Mapping[str, Any], known: dict[str, type], optional: set[str], where: str) -> None:
    for key in table:
        if key not in known:
            import difflib  # a malformed table only, never on a good one's read

            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
            raise ConfigError(f"{where}: unknown key '{key}'; {hint}")
    for key, kind in known.items():
        if key not in table:
            if key in optional:
                continue
            raise ConfigError(f"{where}: '{key}' is missing; every entry names it")
        if not isinstance(table[key], kind):
            raise ConfigError(f"{where}: '{key}' must be a {kind.__name__}, not {table[key]!r}")


def _sms(value: list[Any], where: str) -> frozenset[int]:
    if not value or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 10 for v in value
    ):
        raise ConfigError(f"{where}: write a list of sm numbers (75 for sm_75), not {value!r}")
    if value != sorted(set(value)):
        raise ConfigError(f"{where}: list each sm number once, in ascending order")
    return frozenset(value)


def _strings(value: list[Any], where: str) -> tuple[str, ...]:
    if not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: write a list of names, not {value!r}")
    return tuple(value)


def _release(entry: Any, source: str) -> Release:
    version = entry.get("version") if isinstance(entry, dict) else None
    where = f"{source}: release {version}" if isinstance(version, str) else f"{source}: a release"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: write each release as a [[release]] table")
    _keys(entry, _RELEASE_KEYS, _OPTIONAL, where)
    for key, pattern in (
        ("version", _VERSION_RE),
        ("ptx-isa", _VERSION_RE),
        ("driver", _DRIVER_RE),
        ("compat-driver", _DRIVER_RE),
    ):
        if key in entry and not pattern.match(entry[key]):
            raise ConfigError(
                f"{where}: '{key}' = {entry[key]!r} is not a dotted number like 13.0 or 580.65.06"
            )
    features = Features(
        arch_specific=entry["arch-specific"],
        family_specific=entry["family-specific"],
        compress_mode=entry["compress-mode"],
        fixed_pid=entry["fixed-pid"],
        random_seed=entry["random-seed"],
        jobserver=entry["jobserver"],
    )
    if not (features.fixed_pid or features.random_seed):
        raise ConfigError(
            f"{where}: neither 'fixed-pid' nor 'random-seed'; nvcc needs one of them for a "
            "path-free build (planning/reproducible.py)"
        )
    return Release(
        version=entry["version"],
        sass=_sms(entry["sass"], f"{where}: sass"),
        ptx=_sms(entry["ptx"], f"{where}: ptx"),
        ptx_isa=entry["ptx-isa"],
        driver=entry.get("driver"),
        compat_driver=entry["compat-driver"],
        features=features,
        provision=tuple(
            _source(s, f"{where}: provision {i + 1}")
            for i, s in enumerate(entry.get("provision", []))
        ),
    )


def _source(entry: Any, where: str) -> Source:
    kind = entry.get("source") if isinstance(entry, dict) else None
    if kind not in _SOURCE_KEYS:
        raise ConfigError(
            f"{where}: 'source' must be one of {', '.join(_SOURCE_KEYS)}, not {kind!r}"
        )
    _keys(entry, _SOURCE_KEYS[kind], {"host-cxx"}, where)
    packages = _strings(entry["packages"], f"{where}: packages")
    if kind == "pypi":
        return PypiSource(packages=packages, nvcc=entry["nvcc"], download=entry["download"])
    components = _strings(entry["components"], f"{where}: components")
    if "non-free" not in components:
        raise ConfigError(f"{where}: components: CUDA lies in Debian's non-free; name it")
    return DebianSource(
        suite=entry["suite"],
        components=components,
        packages=packages,
        host_cxx=entry.get("host-cxx"),
        prune=_strings(entry["prune"], f"{where}: prune"),
        download=entry["download"],
    )


def _family(name: str, members: Any, source: str) -> tuple[str, tuple[int, ...]]:
    where = f"{source}: families: {name}"
    if not _FAMILY_RE.match(name):
        raise ConfigError(f"{where}: name a family arch like 10.0f")
    if not isinstance(members, list):
        raise ConfigError(f"{where}: write a list of sm numbers, not {members!r}")
    return name, tuple(sorted(_sms(members, where)))
