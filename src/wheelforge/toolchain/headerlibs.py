"""The matrix's header libraries (CUTLASS/CuTe, ...), found: their include folders, where they
came from (a folder of the project, a git checkout or submodule, a PyPI wheel), their version
or commit, and a digest of their content.

- A folder: the commit of its git checkout is read from its ``.git`` (a submodule's ``.git``
  file names its git folder in the superproject's ``.git/modules``), with no git process and
  no network; the URL from the superproject's ``.gitmodules``. When git is installed, the
  commit the superproject pins (its gitlink) is asked too, and a checkout at another commit is
  said in a warning: what was compiled is the checkout.
- A PyPI package pinned with ``==``: its wheel is downloaded once (pip, no dependencies) and
  unpacked into ``<cache>/header-libraries/<name>-<version>/``; offline, only the cache serves.

The content digest (every file of the include folders: its path and sha256) is what a build
follows: another commit, or an edited header, gives another digest, and so another stamp that
every compile depends on (planning/planner.header_stamp). It is cached by the files' sizes and
modification times, so a build with nothing changed reads no header."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelforge.configuration.matrix.model import HeaderLibraryConfig
from wheelforge.foundation import fsutil, locks, log, proc, removal, writers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.foundation.gitfiles import git_commit, git_dir, gitlink, submodules
from wheelforge.toolchain import probecache

FOLDER = "header-libraries"  # <cache>/header-libraries/<name>-<version>/
_COMPLETE = ".wheelforge-complete"  # written last: an unpacked wheel is whole


@dataclass(frozen=True, kw_only=True)
class HeaderLibrary:
    """A header library as a build uses it and the SBOM names it."""

    name: str
    root: Path  # its folder (the checkout, or the unpacked wheel)
    include_dirs: tuple[Path, ...]  # -I for every compile
    origin: str  # "folder", "git" (a checkout or a submodule) or "pypi"
    version: str | None  # as matrix.yaml gives it, else the commit or the pinned version
    commit: str | None = None  # the git checkout's commit
    pinned: str | None = None  # the commit the superproject's gitlink pins, when it differs
    url: str | None = None  # where it comes from: the submodule's URL, the PyPI project
    requirement: str | None = None  # the PyPI requirement
    digest: str | None = None  # sha256 of its include folders' content; None: not read yet

    @property
    def purl(self) -> str | None:
        """A package URL for the SBOM: pypi, github (a GitHub checkout) or generic."""
        if self.origin == "pypi" and self.requirement:
            req = Requirement(self.requirement)
            return f"pkg:pypi/{canonicalize_name(req.name)}@{self.version}"
        if self.commit and self.url and "github.com" in self.url:
            owner_repo = self.url.split("github.com", 1)[1].strip(":/").removesuffix(".git")
            return f"pkg:github/{owner_repo.lower()}@{self.commit}"
        if self.commit:
            return f"pkg:generic/{self.name}@{self.commit}"
        return None


def resolve(
    configs: Sequence[HeaderLibraryConfig],
    *,
    root: Path,
    cache: Path,
    download: bool,
    offline: bool,
) -> tuple[HeaderLibrary, ...]:
    """Each library found; a PyPI one not in *cache* is downloaded when *download* (a dry run
    does not: its folder is named, as it will be, with no digest)."""
    out = []
    for i, config in enumerate(configs):
        where = f"header-libraries[{i}] ({config.name})"
        if config.pypi is not None:
            folder = _pypi_folder(config.pypi, cache)
            if not (folder / _COMPLETE).is_file():
                if not download:
                    if offline:
                        raise EnvironmentProblem(
                            f"{where}: {config.pypi} is not in the cache ({folder}) and --offline "
                            "forbids downloading it; run once without --offline"
                        )
                    out.append(_pypi_library(config, folder, digest=False))
                    continue
                _download(config.pypi, folder, where)
            out.append(_pypi_library(config, folder, digest=True, cache=cache, where=where))
            continue
        assert config.path is not None  # the reader requires one of path and pypi
        out.append(_folder_library(config, root, cache, where))
    return tuple(out)


def _include_dirs(config: HeaderLibraryConfig, base: Path, where: str) -> tuple[Path, ...]:
    dirs = tuple((base / d).resolve() for d in config.include)
    missing = [d for d, full in zip(config.include, dirs, strict=True) if not full.is_dir()]
    if missing:
        have = ", ".join(sorted(p.name for p in base.iterdir() if p.is_dir())[:8]) or "nothing"
        raise ConfigError(
            f"{where}: include folder '{missing[0]}' is not in {base} (it holds: {have}); "
            "name the folders the sources include from"
        )
    return dirs


def _folder_library(
    config: HeaderLibraryConfig, root: Path, cache: Path, where: str
) -> HeaderLibrary:
    assert config.path is not None
    folder = config.path.resolve()
    includes = _include_dirs(config, folder, where)
    commit = git_commit(folder)
    url = pinned = None
    if commit is not None:
        url, pinned = _superproject_facts(folder, root, commit, where)
    return HeaderLibrary(
        name=config.name,
        root=folder,
        include_dirs=includes,
        origin="git" if commit else "folder",
        version=config.version or commit,
        commit=commit,
        pinned=pinned,
        url=url,
        digest=content_digest(includes, cache=cache),
    )


def _superproject_facts(
    folder: Path, root: Path, commit: str, where: str
) -> tuple[str | None, str | None]:
    """The submodule's URL (.gitmodules of the checkout it lies in) and, when git is
    installed, the commit that checkout pins for it, if it is not *commit*."""
    top = next((p for p in folder.parents if git_dir(p) is not None), None)
    if top is None or not (root == top or root.is_relative_to(top) or top.is_relative_to(root)):
        return None, None
    rel = folder.relative_to(top).as_posix()
    url = submodules(top).get(rel)
    linked = gitlink(top, rel)
    pinned = linked if linked != commit else None
    if pinned is not None:
        log.warning(
            f"{where}: {rel} is checked out at {commit[:12]}, but the superproject pins "
            f"{pinned[:12]}; the build compiles the checkout (git submodule update {rel} "
            "checks out the pinned one)"
        )
    return url, pinned


# -- content -----------------------------------------------------------------------------------


def _files(folders: Sequence[Path]) -> list[Path]:
    found: set[Path] = set()
    for folder in folders:
        for top, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            found.update(Path(top, n) for n in names)
    return sorted(found)


# The largest file an include folder may hold (CUTLASS's largest header is ~1 MiB; a 100 GB
# file there was hashed for minutes before any compile).
FILE_CAP = 256 << 20


def content_digest(folders: Sequence[Path], *, cache: Path | None) -> str:
    """sha256 of every file under *folders*: its path relative to its folder and its own
    sha256. Cached by every file's size and mtime (probecache): a build whose library is
    unchanged stats its files and reads none."""
    files = _files(folders)
    stats = hashlib.sha256()
    for path in files:
        stat = probecache.stat_of(path)
        if stat is not None and stat[0] > FILE_CAP:
            raise ConfigError(
                f"{path} is {stat[0] >> 20:,} MiB, in the include folder of a header library "
                f"(wheelforge hashes every file there, each at most {FILE_CAP >> 20} MiB); "
                "move it out of the include folder"
            )
        stats.update(f"{path}\0{stat}\n".encode())
    key = {"stats": stats.hexdigest()}

    def probe() -> tuple[dict[str, object], list[Path]]:
        digest = hashlib.sha256()
        for path in files:
            base = next(f for f in folders if path.is_relative_to(f))
            digest.update(f"{path.relative_to(base).as_posix()}\0{fsutil.sha256(path)}\n".encode())
        return {"digest": digest.hexdigest()}, []

    value = probecache.cached(cache, "header-library", key, probe)
    return str(value["digest"])


# -- PyPI --------------------------------------------------------------------------------------


def _pypi_folder(requirement: str, cache: Path) -> Path:
    req = Requirement(requirement)
    [spec] = list(req.specifier)
    return cache / FOLDER / f"{canonicalize_name(req.name)}-{spec.version}"


def _pypi_library(
    config: HeaderLibraryConfig,
    folder: Path,
    *,
    digest: bool,
    cache: Path | None = None,
    where: str = "",
) -> HeaderLibrary:
    assert config.pypi is not None
    req = Requirement(config.pypi)
    [spec] = list(req.specifier)
    includes = (
        _include_dirs(config, folder, where)
        if digest
        else tuple(folder / d for d in config.include)
    )
    return HeaderLibrary(
        name=config.name,
        root=folder,
        include_dirs=includes,
        origin="pypi",
        version=config.version or spec.version,
        url=f"https://pypi.org/project/{canonicalize_name(req.name)}/{spec.version}/",
        requirement=config.pypi,
        digest=content_digest(includes, cache=cache) if digest else None,
    )


def _download(requirement: str, folder: Path, where: str) -> None:
    """The requirement's wheel, downloaded by pip (no dependencies) and unpacked into
    *folder*, marked complete last; under the folder's lock, so two builds download it once."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with locks.hold(folder.with_name(folder.name + ".lock"), what=f"the download of {requirement}"):
        if (folder / _COMPLETE).is_file():
            return
        log.info(f"{where}: downloading {requirement} (its headers) into {folder}")
        with tempfile.TemporaryDirectory(prefix=".download-", dir=folder.parent) as tmp:
            pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            proc.run(
                [*pip, "--disable-pip-version-check", "--quiet", "-d", tmp, requirement],
                hint="pip ships with Python",
                what=f"pip download of {requirement}",
                timeout=proc.DOWNLOAD_S,
            )
            wheels = sorted(Path(tmp).glob("*.whl"))
            if not wheels:
                raise EnvironmentProblem(f"{where}: pip found no wheel of {requirement}")
            staged = Path(tmp) / "unpacked"
            with zipfile.ZipFile(wheels[0]) as zf:
                for info in zf.infolist():
                    name = Path(info.filename)
                    if name.is_absolute() or ".." in name.parts:
                        raise EnvironmentProblem(
                            f"{where}: {wheels[0].name} has the member {info.filename!r}, "
                            "outside its folder; not unpacked"
                        )
                    zf.extract(info, staged)
            writers.write_atomic(
                staged / _COMPLETE, f"{wheels[0].name} {fsutil.sha256(wheels[0])}\n"
            )
            if folder.exists():
                removal.remove(folder, within=folder.parent)
            staged.rename(folder)
