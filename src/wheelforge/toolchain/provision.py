"""Provisioning CUDA toolkits into wheelforge's per-user cache, from sources that hold a complete
toolkit, pinned (every file's sha256 is recorded) and reused offline once there.

Recipes:

- CUDA 13.x from PyPI: nvidia-cuda-nvcc, -crt, -runtime (with libcudart_static.a), -cccl and
  nvidia-nvvm of one release add up to a complete nvcc (NVIDIA's own CUDA 13 images are made of
  the same packages). PyPI's 12.x nvcc package (nvidia-cuda-nvcc-cu12) holds no nvcc driver, so
  there is no PyPI recipe for 12.x.
- CUDA 12.4 from Debian 13 (trixie) non-free and 11.8 from Debian 12 (bookworm) non-free:
  nvidia-cuda-toolkit and friends, unpacked with dpkg-deb into the cache (no root, no system
  change). CUDA 11.8 refuses GCC newer than 11, so its recipe brings g++ 11 from bookworm main;
  CUDA 12.4 accepts GCC up to 13, which covers bookworm's own g++ 12 (trixie's g++ 13 needs a
  newer glibc than bookworm's, so it is not brought). They build sm_50/sm_35 to sm_90, so they
  cover the archs CUDA 13 dropped (Maxwell to Volta; Kepler: 11.8 only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from wheelforge.configuration.archs import Arch, sm_range
from wheelforge.foundation import fsutil, locks, log, proc
from wheelforge.foundation.errors import ConfigError, ToolError
from wheelforge.toolchain.toolkit import TOOLKIT_JSON, TOOLKITS, release_builds

# nvcc --list-gpu-code of each release (read off the toolkits themselves when the recipes were written).
_CUDA13_SASS = frozenset({75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121})
_CUDA118_SASS = frozenset({35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90})

_CUDA124_SASS = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90})


@dataclass(frozen=True, kw_only=True)
class DebianRecipe:
    """What one Debian release ships of a CUDA toolkit: the suite and the exact packages (the
    versions pinned, so a recipe installs the same files for as long as the suite keeps them)."""

    suite: str  # "bookworm"
    packages: tuple[str, ...]
    host_cxx: str | None  # the g++ the packages bring (usr/bin/g++-11), None: the system's


_CUDA118_DEB = "11.8.89~11.8.0-5~deb12u1"
_CUDA124_DEB = "12.4.127~12.4.1-2"
_DEBIAN: dict[str, DebianRecipe] = {
    "11.8": DebianRecipe(
        suite="bookworm",
        packages=(
            f"nvidia-cuda-toolkit={_CUDA118_DEB}",
            f"nvidia-cuda-dev={_CUDA118_DEB}",
            f"libnvvm4={_CUDA118_DEB}",
            "libthrust-dev",
            "libcub-dev",
            "libcu++-dev",  # headers torch's headers include (thrust/complex.h)
            "g++-11",
            "gcc-11",
            "cpp-11",
            "libstdc++-11-dev",
            "libgcc-11-dev",
            "gcc-11-base",
        ),
        host_cxx="usr/bin/g++-11",
    ),
    # Versions from deb.debian.org/debian/dists/trixie/{non-free,main}/binary-amd64/Packages.
    "12.4": DebianRecipe(
        suite="trixie",
        packages=(
            "nvidia-cuda-toolkit=12.4.131~12.4.1-2",  # nvcc, ptxas, fatbinary, nvlink, cicc
            "libnvvm4=12.4.131~12.4.1-2",
            f"nvidia-cuda-dev={_CUDA124_DEB}",  # the headers, libcudart_static.a, libcudadevrt.a
            f"libcudart12={_CUDA124_DEB}",
            # CCCL 2.3 (trixie main): thrust, CUB (still with the debug_synchronous overloads
            # CCCL 3 dropped), libcu++
            "libthrust-dev=2.3.2-2",
            "libcub-dev=2.3.2-2",
            "libcu++-dev=2.3.2-2",
        ),
        host_cxx=None,
    ),
}
# Libraries of nvidia-cuda-dev an extension build never needs (several GB unpacked).
_DEBIAN_PRUNE = ("libcublas", "libcufft", "libcusparse", "libcusolver", "libnpp", "libnvjpeg", "libcurand",
                 "libnvblas", "libcupti", "libnvrtc", "libaccinj", "libcuinj", "libnvJitLink",
                 "libnvptxcompiler", "libnvfatbin", "libmetis", "libcufilt")  # fmt: skip


DEBIAN_NVCC_PROFILE = """\
# Written by wheelforge: Debian's nvcc.profile, relocated into the cache.
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/libdevice
PATH += $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs" "-L$(_HERE_)/../../x86_64-linux-gnu"
"""


@dataclass(frozen=True, kw_only=True)
class Recipe:
    release: str  # "13.1"
    source: str  # "pypi" or "debian"
    sass: frozenset[int]
    download: str  # what a user is told it costs

    @property
    def folder(self) -> str:
        return f"cuda-{self.release}-{self.source}"

    def supports(self, arch: Arch) -> bool:
        return release_builds(Version(self.release), self.sass, arch)

    def describe(self) -> str:
        debian = _DEBIAN.get(self.release)
        where = f"Debian {debian.suite} non-free" if debian else "PyPI's nvidia-* packages"
        return f"CUDA {self.release} from {where} ({sm_range(self.sass)}, {self.download})"


RECIPES: tuple[Recipe, ...] = (
    *(
        Recipe(release=f"13.{m}", source="pypi", sass=_CUDA13_SASS, download="about 110 MB")
        for m in range(5, -1, -1)
    ),
    Recipe(release="12.4", source="debian", sass=_CUDA124_SASS, download="about 1 GB"),
    Recipe(release="11.8", source="debian", sass=_CUDA118_SASS, download="about 900 MB"),
)


def recipe_for(release: str) -> Recipe | None:
    return next((r for r in RECIPES if r.release == release), None)


def _pypi(recipe: Recipe, prefix: Path, downloads: Path) -> dict[str, object]:
    names = (
        "nvidia-cuda-nvcc",
        "nvidia-cuda-crt",
        "nvidia-cuda-runtime",
        "nvidia-cuda-cccl",
        "nvidia-nvvm",
    )
    proc.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
         "--quiet", "-d", downloads, *(f"{n}=={recipe.release}.*" for n in names)],
        hint="pip ships with Python", what=f"pip download of CUDA {recipe.release}",
    )  # fmt: skip
    files = []
    for wheel in sorted(downloads.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if ".dist-info/" in info.filename:
                    continue
                target = zf.extract(info, prefix)
                if "/bin/" in info.filename:  # wheels don't keep the executable bit
                    Path(target).chmod(
                        Path(target).stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
                    )
        files.append({"file": wheel.name, "sha256": fsutil.sha256(wheel)})
    nvcc = prefix / "nvidia" / "cu13" / "bin" / "nvcc"
    if not nvcc.is_file():
        raise ToolError(f"the PyPI packages of CUDA {recipe.release} hold no nvcc at {nvcc}")
    return {"nvcc": str(nvcc.relative_to(prefix)), "host_cxx": None, "files": files}


def _debian(recipe: Recipe, prefix: Path, downloads: Path) -> dict[str, object]:
    debian = _DEBIAN[recipe.release]
    for tool in ("apt-get", "dpkg-deb"):
        proc.which(
            tool, hint=f"provisioning CUDA {recipe.release} needs Debian's apt-get and dpkg-deb"
        )
    keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    if not keyring.is_file():
        raise ToolError(f"{keyring} is missing; install debian-archive-keyring")
    apt = downloads / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True)
    (apt / "sources.list").write_text(
        f"deb [signed-by={keyring}] http://deb.debian.org/debian {debian.suite} main contrib non-free\n"
    )
    # A private apt configuration: nothing of the system's apt state is read or changed.
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}", "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}", "-oDir::State::Status=/dev/null",
        "-oAPT::Sandbox::User=root" if os.geteuid() == 0 else "-oDebug::NoLocking=1",
    ]  # fmt: skip
    proc.run(
        ["apt-get", *options, "update"],
        hint="apt-get",
        what=f"apt-get update (Debian {debian.suite})",
    )
    proc.run(["apt-get", *options, "download", *debian.packages], hint="apt-get", cwd=downloads,
             what=f"apt-get download of CUDA {recipe.release}")  # fmt: skip
    files = []
    for deb in sorted(downloads.glob("*.deb")):
        proc.run(["dpkg-deb", "-x", deb, prefix], hint="dpkg-deb", what=f"dpkg-deb -x {deb.name}")
        files.append({"file": deb.name, "sha256": fsutil.sha256(deb)})
    return {**relocate_debian(prefix), "host_cxx": debian.host_cxx, "files": files}


def relocate_debian(prefix: Path) -> dict[str, str]:
    """Make the Debian toolkit unpacked into *prefix* work from there: Debian's compiler
    wrappers and its link to /etc/nvcc.profile replaced, the libraries no extension build needs
    removed. Nothing outside *prefix* is read or written. Returns where nvcc is."""
    usr = prefix / "usr"
    bin_dir = usr / "lib" / "nvidia-cuda-toolkit" / "bin"
    # Debian's g++/gcc wrappers there look for a system g++-N; the host compiler is named instead.
    for wrapper in ("g++", "gcc"):
        (bin_dir / wrapper).unlink(missing_ok=True)
    for lib in (usr / "lib" / "x86_64-linux-gnu").glob("*"):
        if lib.name.startswith(_DEBIAN_PRUNE):
            lib.unlink()
    # Debian's nvcc.profile is a link to /etc/nvcc.profile: removed first (writing through it
    # would write /etc), then one pointing at the unpacked tree, relative to nvcc itself
    # (usr/lib/nvidia-cuda-toolkit/bin), so the folder can move.
    profile = bin_dir / "nvcc.profile"
    profile.unlink(missing_ok=True)
    profile.write_text(DEBIAN_NVCC_PROFILE)
    return {"nvcc": str((bin_dir / "nvcc").relative_to(prefix))}


_SOURCES: dict[str, Callable[[Recipe, Path, Path], dict[str, object]]] = {
    "pypi": _pypi,
    "debian": _debian,
}


def install(recipe: Recipe, cache: Path) -> Path:
    """Provision *recipe* into ``<cache>/toolkits/`` (once) and return its folder. One process
    provisions a toolkit at a time; another waits for it and then finds it there."""
    final = cache / TOOLKITS / recipe.folder
    if (final / TOOLKIT_JSON).is_file():
        return final
    with locks.hold(lock_path(final), what=f"the toolkit folder {final}"):
        if (final / TOOLKIT_JSON).is_file():
            return final
        return _install(recipe, final)


def lock_path(folder: Path) -> Path:
    """The lock file of the provisioned toolkit *folder*, held while it is installed (and by
    `wheelforge cache prune` while it is removed)."""
    return folder.parent / f".{folder.name}.lock"


def _install(recipe: Recipe, final: Path) -> Path:
    with (
        fsutil.staged_folder(final) as prefix,
        log.step(f"provision {recipe.describe()} into {final}"),
    ):
        downloads = prefix / ".downloads"
        downloads.mkdir(parents=True)
        info = _SOURCES[recipe.source](recipe, prefix, downloads)
        shutil.rmtree(downloads)
        (prefix / TOOLKIT_JSON).write_text(
            json.dumps({"release": recipe.release, "source": recipe.source, **info}, indent=1)
            + "\n"
        )
    return final


def install_release(release: str, cache: Path) -> Path:
    if not re.fullmatch(r"\d+\.\d+", release):
        raise ConfigError(
            f"'{release}' is a malformed CUDA release; write MAJOR.MINOR, e.g. 13.0 or 11.8"
        )
    recipe = recipe_for(release)
    if recipe is None:
        known = ", ".join(r.release for r in RECIPES)
        raise ConfigError(
            f"wheelforge has no recipe for CUDA {release} (it can provision {known}); install it yourself and set CUDA_HOME"
        )
    return install(recipe, cache)
