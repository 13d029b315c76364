"""Provisioning CUDA toolkits into wheelforge's per-user cache, from sources that hold a complete
toolkit, pinned (every file's sha256 is recorded) and reused offline once there.

Recipes:

- CUDA 13.x from PyPI: nvidia-cuda-nvcc, -crt, -runtime (with libcudart_static.a), -cccl and
  nvidia-nvvm of one release add up to a complete nvcc (NVIDIA's own CUDA 13 images are made of
  the same packages). PyPI's 12.x nvcc package (nvidia-cuda-nvcc-cu12) holds no nvcc driver, so
  there is no PyPI recipe for 12.x.
- CUDA 11.8 from Debian 12 (bookworm) non-free: nvidia-cuda-toolkit and friends, unpacked with
  dpkg-deb into the cache (no root, no system change), with g++ 11 from bookworm main, since
  CUDA 11.8 refuses GCC newer than 11. It builds sm_35 to sm_90, so it covers the archs CUDA 13
  dropped (Kepler to Volta).
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

_DEBIAN_CUDA = "11.8.89~11.8.0-5~deb12u1"
_DEBIAN_PACKAGES = (
    f"nvidia-cuda-toolkit={_DEBIAN_CUDA}",
    f"nvidia-cuda-dev={_DEBIAN_CUDA}",
    f"libnvvm4={_DEBIAN_CUDA}",
    "libthrust-dev", "libcub-dev", "libcu++-dev",  # headers torch's headers include (thrust/complex.h)
    "g++-11", "gcc-11", "cpp-11", "libstdc++-11-dev", "libgcc-11-dev", "gcc-11-base",
)  # fmt: skip
_DEBIAN_SOURCES = (
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    "http://deb.debian.org/debian bookworm main contrib non-free\n"
)
# Libraries of nvidia-cuda-dev an extension build never needs (several GB unpacked).
_DEBIAN_PRUNE = ("libcublas", "libcufft", "libcusparse", "libcusolver", "libnpp", "libnvjpeg", "libcurand",
                 "libnvblas", "libcupti", "libnvrtc", "libaccinj", "libcuinj")  # fmt: skip


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
        where = "PyPI's nvidia-* packages" if self.source == "pypi" else "Debian bookworm non-free"
        return f"CUDA {self.release} from {where} ({sm_range(self.sass)}, {self.download})"


RECIPES: tuple[Recipe, ...] = (
    *(
        Recipe(release=f"13.{m}", source="pypi", sass=_CUDA13_SASS, download="about 110 MB")
        for m in range(5, -1, -1)
    ),
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
        hint="pip ships with Python", what=f"pip download of CUDA {recipe.release}", timeout=proc.DOWNLOAD_S,
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


def _debian(_recipe: Recipe, prefix: Path, downloads: Path) -> dict[str, object]:
    for tool in ("apt-get", "dpkg-deb"):
        proc.which(tool, hint="provisioning CUDA 11.8 needs Debian's apt-get and dpkg-deb")
    keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    if not keyring.is_file():
        raise ToolError(f"{keyring} is missing; install debian-archive-keyring")
    apt = downloads / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True)
    (apt / "sources.list").write_text(_DEBIAN_SOURCES)
    # A private apt configuration: nothing of the system's apt state is read or changed.
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}", "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}", "-oDir::State::Status=/dev/null",
        "-oAPT::Sandbox::User=root" if os.geteuid() == 0 else "-oDebug::NoLocking=1",
    ]  # fmt: skip
    proc.run(
        ["apt-get", *options, "update"],
        hint="apt-get",
        what="apt-get update (Debian bookworm)",
        timeout=proc.DOWNLOAD_S,
    )
    proc.run(["apt-get", *options, "download", *_DEBIAN_PACKAGES], hint="apt-get", cwd=downloads,
             what="apt-get download of CUDA 11.8", timeout=proc.DOWNLOAD_S)  # fmt: skip
    files = []
    for deb in sorted(downloads.glob("*.deb")):
        proc.run(
            ["dpkg-deb", "-x", deb, prefix],
            hint="dpkg-deb",
            what=f"dpkg-deb -x {deb.name}",
            timeout=proc.TOOL_S,
        )
        files.append({"file": deb.name, "sha256": fsutil.sha256(deb)})
    usr = prefix / "usr"
    bin_dir = usr / "lib" / "nvidia-cuda-toolkit" / "bin"
    # Debian's g++/gcc wrappers there look for a system g++-11; the provisioned one is named instead.
    for wrapper in ("g++", "gcc"):
        (bin_dir / wrapper).unlink(missing_ok=True)
    for lib in (usr / "lib" / "x86_64-linux-gnu").glob("*"):
        if lib.name.startswith(_DEBIAN_PRUNE):
            lib.unlink()
    # Debian's nvcc reads /etc/nvcc.profile; this one points at the unpacked tree instead, relative
    # to nvcc itself (usr/lib/nvidia-cuda-toolkit/bin), so the folder can move.
    (bin_dir / "nvcc.profile").write_text(DEBIAN_NVCC_PROFILE)
    return {
        "nvcc": str((bin_dir / "nvcc").relative_to(prefix)),
        "host_cxx": str((usr / "bin" / "g++-11").relative_to(prefix)),
        "files": files,
    }


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
    if not re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}", release):
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
