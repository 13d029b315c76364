"""Provisioning CUDA toolkits into wheelforge's per-user cache, from sources that hold a complete
toolkit, pinned (every file's sha256 is recorded) and reused offline once there.

Which releases can be provisioned, and from where (package names and versions, the Debian suite,
the host compiler, what is pruned), is the release table's (configuration/releases.py and
data/cuda-releases.toml); this module knows how each kind of source is installed:

- ``pypi``: the nvidia-* wheels of one release, unpacked (CUDA 13.x: nvidia-cuda-nvcc, -crt,
  -runtime with libcudart_static.a, -cccl and nvidia-nvvm add up to a complete nvcc, the same
  packages NVIDIA's CUDA 13 images are made of). PyPI's 12.x nvcc package
  (nvidia-cuda-nvcc-cu12) holds no nvcc driver, so there is no PyPI recipe for 12.x. Each
  package is installed at the exact version data/cuda-pypi.json names for the release
  (tools/cuda_pypi.py writes it from PyPI: the release's cuda-toolkit metapackage's pins;
  nvidia-cuda-cccl's versions do not follow the CUDA release); a release that file does not
  hold whole is no recipe: never listed, chosen or installed.
- ``debian``: Debian's nvidia-cuda-toolkit and friends from a suite's non-free, unpacked with
  dpkg-deb into the cache (no root, no system change), with the host compiler the release
  accepts (CUDA 11.8 from bookworm, with g++ 11: it refuses GCC newer than 11; CUDA 12.4 from
  trixie accepts GCC up to 13, which covers bookworm's own g++ 12, so it brings none: trixie's
  g++ 13 needs a newer glibc than bookworm's). They cover the archs CUDA 13 dropped (11.8:
  Kepler to Volta, 12.4: Maxwell to Volta).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.version import Version

from wheelforge.configuration import releases
from wheelforge.configuration.archs import Arch, sm_range
from wheelforge.configuration.releases import DebianSource, PypiSource, Release, Source
from wheelforge.foundation import fsutil, locks, log, proc, readers, removal, writers
from wheelforge.foundation.errors import ConfigError, ToolError
from wheelforge.toolchain.toolkits import (
    TOOLKIT_JSON,
    TOOLKITS,
    Toolkit,
    release_builds,
    toolkit_file_text,
)

_DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Where Debian's nvidia-cuda-toolkit puts nvcc, relative to the unpacked tree.
_DEBIAN_NVCC_DIR = Path("usr/lib/nvidia-cuda-toolkit/bin")

DEBIAN_NVCC_PROFILE = """\
# Written by wheelforge: Debian's nvcc.profile, relocated into the cache.
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/libdevice
PATH += $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs" "-L$(_HERE_)/../../x86_64-linux-gnu"
"""


PYPI_DATA = "cuda-pypi.json"


@dataclass(frozen=True, kw_only=True)
class PypiPins:
    """data/cuda-pypi.json: per release, each package's exact version on PyPI and the size of
    its wheel; the releases it lacks, with why."""

    versions: dict[str, dict[str, str]]  # "13.5" -> {"nvidia-cuda-cccl": "13.3.5.0.6", ...}
    sizes: dict[str, int]  # "13.5" -> bytes of its wheels together
    unavailable: dict[str, str]  # "13.6" -> "PyPI has no nvidia-cuda-cccl==13.6.*"

    def pins(self, release: str, packages: tuple[str, ...]) -> tuple[str, ...] | None:
        """``name==version`` of each of *packages* for *release*; None unless all are there."""
        versions = self.versions.get(release, {})
        if not all(p in versions for p in packages):
            return None
        return tuple(f"{p}=={versions[p]}" for p in packages)


def parse_pins(text: str) -> PypiPins:
    data = json.loads(text)
    entries = data["releases"]
    return PypiPins(
        versions={
            r: {name: p["version"] for name, p in e["packages"].items()} for r, e in entries.items()
        },
        sizes={r: sum(p["size"] for p in e["packages"].values()) for r, e in entries.items()},
        unavailable=dict(data["unavailable"]),
    )


@cache
def pypi_pins() -> PypiPins:
    """The file shipped with wheelforge (read once)."""
    path = Path(__file__).resolve().parents[1] / "data" / PYPI_DATA
    return parse_pins(readers.read_text(path, cap=readers.CONFIG_CAP))


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A release wheelforge can provision, and the source it comes from (the table's entry)."""

    release: str  # "13.1"
    sass: frozenset[int]
    how: Source  # which packages, from where
    pins: tuple[str, ...] = ()  # PyPI: each package ==its exact version (data/cuda-pypi.json)
    size: int | None = None  # PyPI: bytes of its wheels, from the same file

    @property
    def source(self) -> str:
        """The kind of source: "pypi" or "debian" (part of the folder's name and toolkit.json)."""
        return self.how.kind

    @property
    def download(self) -> str:
        """What a user is told it costs: the wheels' size where known."""
        if self.size is not None:
            return f"about {round(self.size / 1e6)} MB"
        return self.how.download

    @property
    def folder(self) -> str:
        return f"cuda-{self.release}-{self.source}"

    def supports(self, arch: Arch) -> bool:
        return release_builds(Version(self.release), self.sass, arch)

    def describe(self) -> str:
        return f"CUDA {self.release} from {self.how.where} ({sm_range(self.sass)}, {self.download})"


def recipes_of(table: tuple[Release, ...], pins: PypiPins | None = None) -> tuple[Recipe, ...]:
    """The recipes of *table*'s releases, newest release first (``auto`` takes the first that
    builds an arch set). A PyPI source is one only where *pins* (data/cuda-pypi.json) hold an
    exact version of each of its packages for the release."""
    pins = pins if pins is not None else pypi_pins()
    found = []
    for r in reversed(table):
        for how in r.provision:
            if not isinstance(how, PypiSource):
                found.append(Recipe(release=r.version, sass=r.sass, how=how))
                continue
            exact = pins.pins(r.version, how.packages)
            if exact is not None:
                size = pins.sizes.get(r.version)
                found.append(Recipe(release=r.version, sass=r.sass, how=how, pins=exact, size=size))
    return tuple(found)


RECIPES: tuple[Recipe, ...] = recipes_of(releases.releases())


def unprovisionable(release: str) -> str | None:
    """Why the table's PyPI source of *release* is no recipe (data/cuda-pypi.json), else None."""
    entry = releases.release(release)
    if entry is None or recipe_for(release) is not None:
        return None
    if not any(isinstance(how, PypiSource) for how in entry.provision):
        return None
    return pypi_pins().unavailable.get(release, f"{PYPI_DATA} holds no PyPI versions for it")


def not_found(found: Sequence[Toolkit]) -> tuple[Recipe, ...]:
    """The releases wheelforge can provision that no toolkit in *found* is (`toolkit list`)."""
    have = {t.release for t in found}
    return tuple(r for r in RECIPES if r.release not in have)


def recipe_for(release: str) -> Recipe | None:
    return next((r for r in RECIPES if r.release == release), None)


def _pypi(
    release: str, how: PypiSource, pins: tuple[str, ...], prefix: Path, fetched: Path
) -> dict[str, object]:
    from wheelforge.toolchain import downloads  # pip's and apt's progress: only when provisioning

    log.info(f"  [1/2] download {len(pins)} packages from PyPI: {', '.join(pins)}")
    downloads.pip(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            fetched,
            *pins,
        ],
        hint="pip ships with Python",
        what=f"pip download of CUDA {release}",
    )
    files = []
    wheels = sorted(fetched.glob("*.whl"))
    for i, wheel in enumerate(wheels, 1):
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.infolist() if ".dist-info/" not in m.filename]
            size = downloads.si(sum(m.file_size for m in members))
            what = f"{downloads.label(wheel.name)}: {len(members)} files, {size}"
            log.info(f"  [2/2] unpack {i}/{len(wheels)} {what}")
            for info in members:
                target = zf.extract(info, prefix)
                if "/bin/" in info.filename:  # wheels don't keep the executable bit
                    Path(target).chmod(
                        Path(target).stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
                    )
        files.append({"file": wheel.name, "sha256": fsutil.sha256(wheel)})
    nvcc = prefix / how.nvcc
    if not nvcc.is_file():
        raise ToolError(f"the PyPI packages of CUDA {release} hold no nvcc at {nvcc}")
    return {"nvcc": str(nvcc.relative_to(prefix)), "host_cxx": None, "files": files}


def apt_sources(how: DebianSource) -> str:
    """The sources.list of the private apt configuration that fetches *how*'s packages."""
    return (
        f"deb [signed-by={_DEBIAN_KEYRING}] {_DEBIAN_MIRROR} {how.suite} "
        f"{' '.join(how.components)}\n"
    )


def _debian(release: str, how: DebianSource, prefix: Path, fetched: Path) -> dict[str, object]:
    from wheelforge.toolchain import downloads  # pip's and apt's progress: only when provisioning

    for tool in ("apt-get", "dpkg-deb"):
        proc.which(tool, hint=f"provisioning CUDA {release} needs Debian's apt-get and dpkg-deb")
    if not _DEBIAN_KEYRING.is_file():
        raise ToolError(f"{_DEBIAN_KEYRING} is missing; install debian-archive-keyring")
    apt = fetched / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True)
    writers.write_atomic(apt / "sources.list", apt_sources(how))
    # A private apt configuration: nothing of the system's apt state is read or changed.
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
        "-oDir::State::Status=/dev/null",
        "-oAPT::Sandbox::User=root" if os.geteuid() == 0 else "-oDebug::NoLocking=1",
    ]
    log.info(f"  [1/3] read Debian {how.suite}'s package lists")
    downloads.apt_get(["apt-get", *options, "update"], what=f"apt-get update (Debian {how.suite})")
    log.info(f"  [2/3] download {len(how.packages)} packages: {', '.join(how.packages)}")
    downloads.apt_get(
        ["apt-get", *options, "download", *how.packages],
        cwd=fetched,
        what=f"apt-get download of CUDA {release}",
    )
    files = []
    debs = sorted(fetched.glob("*.deb"))
    for i, deb in enumerate(debs, 1):
        log.info(f"  [3/3] unpack {i}/{len(debs)} {deb.name} ({downloads.si(deb.stat().st_size)})")
        proc.run(
            ["dpkg-deb", "-x", deb, prefix],
            hint="dpkg-deb",
            what=f"dpkg-deb -x {deb.name}",
            timeout=proc.TOOL_S,
        )
        files.append({"file": deb.name, "sha256": fsutil.sha256(deb)})
    return {**relocate_debian(prefix, how.prune), "host_cxx": how.host_cxx, "files": files}


def relocate_debian(prefix: Path, prune: tuple[str, ...]) -> dict[str, str]:
    """Make the Debian toolkit unpacked into *prefix* work from there: Debian's compiler
    wrappers and its link to /etc/nvcc.profile replaced, the libraries starting with *prune*
    removed. Nothing outside *prefix* is read or written. Returns where nvcc is."""
    bin_dir = prefix / _DEBIAN_NVCC_DIR
    # Debian's g++/gcc wrappers there look for a system g++-N; the host compiler is named instead.
    for wrapper in ("g++", "gcc"):
        removal.remove(bin_dir / wrapper, within=prefix)
    for lib in (prefix / "usr" / "lib" / "x86_64-linux-gnu").glob("*"):
        if lib.name.startswith(prune):
            removal.remove(lib, within=prefix)
    # Debian's nvcc.profile is a link to /etc/nvcc.profile: removed first (the writer keeps a
    # link and replaces what it points to: that would write /etc), then one pointing at the
    # unpacked tree, relative to nvcc itself (usr/lib/nvidia-cuda-toolkit/bin), so the folder
    # can move.
    profile = bin_dir / "nvcc.profile"
    removal.remove(profile, within=prefix)
    writers.write_atomic(profile, DEBIAN_NVCC_PROFILE)
    return {"nvcc": str((bin_dir / "nvcc").relative_to(prefix))}


def _fetch(recipe: Recipe, prefix: Path, fetched: Path) -> dict[str, object]:
    """Download and unpack *recipe*'s packages into *prefix*; what toolkit.json records."""
    how = recipe.how
    if isinstance(how, PypiSource):
        return _pypi(recipe.release, how, recipe.pins, prefix, fetched)
    return _debian(recipe.release, how, prefix, fetched)


def install(recipe: Recipe, cache: Path) -> Path:
    """Provision *recipe* into ``<cache>/toolkits/`` (once) and return its folder. One process
    provisions a toolkit at a time; another waits for it and then finds it there."""
    final = cache / TOOLKITS / recipe.folder
    if (final / TOOLKIT_JSON).is_file():
        return final
    proc.check_temp_folder()  # pip and apt-get download through it: refused before they start
    writers.require_writable(final.parent, f"provisioning CUDA {recipe.release}", cache=cache)
    with locks.hold(lock_path(final), what=f"the toolkit folder {final}"):
        if (final / TOOLKIT_JSON).is_file():
            return final
        return _install(recipe, final)


def lock_path(folder: Path) -> Path:
    """The lock file of the provisioned toolkit *folder*, held while it is installed (and by
    `wheelforge cache prune` while it is removed)."""
    return folder.parent / f".{folder.name}.lock"


def _install(recipe: Recipe, final: Path) -> Path:
    from wheelforge.toolchain import downloads  # pip's and apt's progress: only when provisioning

    with (
        fsutil.staged_folder(final) as prefix,
        log.step(f"provision {recipe.describe()} into {final}"),
    ):
        fetched = prefix / ".downloads"
        fetched.mkdir(parents=True)
        info = _fetch(recipe, prefix, fetched)
        removal.remove(fetched, within=prefix)
        size = sum(
            f.stat().st_size for f in prefix.rglob("*") if f.is_file() and not f.is_symlink()
        )
        log.info(f"  CUDA {recipe.release}: {downloads.si(size)} in {final}")
        text = toolkit_file_text(recipe.release, recipe.source, info)
        writers.write_atomic(prefix / TOOLKIT_JSON, text)
    return final


def install_release(release: str, cache: Path) -> Path:
    if not re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}", release):
        raise ConfigError(
            f"'{release}' is a malformed CUDA release; write MAJOR.MINOR, e.g. 13.0 or 11.8"
        )
    recipe = recipe_for(release)
    if recipe is None:
        known = ", ".join(r.release for r in RECIPES)
        why = unprovisionable(release)
        if why is not None:
            raise ConfigError(
                f"CUDA {release} cannot be provisioned from PyPI: {why} (data/{PYPI_DATA}); "
                f"wheelforge can provision {known}, or install {release} yourself and set CUDA_HOME"
            )
        raise ConfigError(
            f"wheelforge has no recipe for CUDA {release} (it can provision {known}); install "
            "it yourself and set CUDA_HOME"
        )
    return install(recipe, cache)
