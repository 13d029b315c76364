"""Checks of the folders a build writes, before anything is compiled: each is created and
written to, so a folder that can't be (EACCES, a read-only or full file system, a path under
/proc) fails in one line naming it, not after the compile with a traceback. Output and build
folders inside a package folder that is packed into the wheel are refused: the next wheel
would carry the previous one, or the build's objects."""

from __future__ import annotations

import contextlib
import errno
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import fsutil, locks, readers, writers
from wheelforge.foundation.document import from_document
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# What the probe writes: enough to fail on a full file system rather than on its last block.
PROBE_BYTES = 1 << 20


def describe_os_error(exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        why += " (the file system is full; free space or choose another folder)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why += " (choose a folder you can write to)"
    return why


def probe_folder(path: Path, flag: str) -> None:
    """Create *path* and write a probe file into it; any failure names *flag* and the path."""
    with contextlib.suppress(OSError):  # what is there, links followed: a folder, or refused
        mode = path.stat().st_mode
        if not stat.S_ISDIR(mode):
            kind = readers.kind_of(mode) or "a file"
            raise EnvironmentProblem(f"{flag} {path} is {kind}, not a folder; name a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        writers.probe(path, PROBE_BYTES)
    except OSError as exc:
        where = Path(exc.filename) if exc.filename else path
        raise EnvironmentProblem(
            f"{flag} {path}: cannot write there: {where}: {describe_os_error(exc)}"
        ) from None


def refuse_packed(matrix: Matrix, folders: dict[str, Path]) -> None:
    """Refuse output and build folders inside a package folder that goes into the wheel."""
    for flag, folder in folders.items():
        for package in matrix.package.packages:
            if fsutil.resolved(folder).is_relative_to(fsutil.resolved(package)):
                raise ConfigError(
                    f"{flag} {folder} lies inside the package folder {package}, which is packed "
                    "into the wheel, so the next wheel would carry this folder's files; choose a "
                    "folder outside it"
                )


# Which folders may not lie in which: (inner, outer). The output folder holds wheels only (a
# build folder's files in it would be uploaded with them; a build folder's cleaning or a cache
# prune would reach the wheels); the cache is wheelforge's own, never a build's output.
_APART = (
    ("--out", "--build-dir"),
    ("--build-dir", "--out"),
    ("--out", "--cache-dir"),
    ("--cache-dir", "--out"),
    ("--build-dir", "--cache-dir"),
)


def refuse_nested(folders: dict[str, Path]) -> None:
    """Refuse an output, build or cache folder that is another of them or lies inside one,
    and an output or build folder inside another build's folder (one holding its lock)."""
    real = {flag: fsutil.resolved(folder) for flag, folder in folders.items()}
    for inner, outer in _APART:
        if inner in real and outer in real and real[inner].is_relative_to(real[outer]):
            same = "is" if real[inner] == real[outer] else "lies inside"
            raise ConfigError(
                f"{inner} {folders[inner]} {same} {outer} {folders[outer]}; give each its own "
                "folder, neither inside the other"
            )
    for flag in ("--out", "--build-dir"):
        if flag not in real:
            continue
        other = next((p for p in real[flag].parents if (p / locks.LOCK_NAME).is_file()), None)
        if other is not None and other != real.get("--build-dir"):
            raise ConfigError(
                f"{flag} {folders[flag]} lies inside {other}, another build's folder (it holds "
                f"{locks.LOCK_NAME}); choose a folder outside it"
            )


def preflight(matrix: Matrix, folders: dict[str, Path]) -> None:
    """*folders*: flag (``--out``) → folder. Refuse nested and packed ones, then probe each."""
    refuse_nested(folders)
    refuse_packed(matrix, folders)
    for flag, folder in folders.items():
        probe_folder(folder, flag)


@contextlib.contextmanager
def tidy(folders: dict[str, Path]) -> Iterator[None]:
    """Of *folders*, those the block creates (preflight, or a build) and leaves empty are removed
    when it ends, however it ends: a refused or failed build leaves no empty ``--out`` behind."""
    made = [top for top in map(fsutil.missing_top, folders.values()) if top is not None]
    try:
        yield
    finally:
        for top in made:
            fsutil.remove_if_empty(top)


# What a compile includes from an include or source folder, by suffix.
_C_FAMILY = frozenset(
    [
        ".h",
        ".hh",
        ".hpp",
        ".hxx",
        ".h++",
        ".cuh",
        ".inl",
        ".inc",
        ".ipp",
        ".tcc",
        ".tpp",
        ".c",
        ".cc",
        ".cpp",
        ".cxx",
        ".c++",
        ".cu",
    ]
)


def _read_folders(matrix: Matrix) -> list[tuple[Path, str]]:
    """The folders whose files the build reads, each with what it is: package folders (packed
    whole), include folders, the folders of the sources (their headers), header libraries."""
    found = [(p, "the package folder") for p in matrix.package.packages]
    for ext in matrix.extensions:
        found += [(d, "an include folder") for d in ext.include_dirs]
        for spec in ext.sources:
            folder = (matrix.root / spec.pattern).parent
            if not any(ch in str(folder) for ch in "*?[{"):
                found.append((folder, "a source folder"))
    found += [(h.path, "a header library") for h in matrix.header_libraries if h.path]
    return found


def _read_files(matrix: Matrix) -> list[Path]:
    """The files the build reads by name: the matrix, pyproject.toml, its readme and license
    files, the sources, modules, license files and the generate steps' inputs."""
    root = matrix.root
    files = [matrix.path, *matrix.package.modules, *matrix.package.license_files]
    pyproject = root / (matrix.package.pyproject or "pyproject.toml")
    files.append(pyproject)
    with contextlib.suppress(OSError, readers.FileRefused, ValueError):  # the reader's to name
        project = tomllib.loads(readers.read_text(pyproject, cap=readers.CONFIG_CAP)).get("project")
        readme = project.get("readme") if isinstance(project, dict) else None
        license_ = project.get("license") if isinstance(project, dict) else None
        for named in (
            readme,
            readme.get("file") if isinstance(readme, dict) else None,
            license_.get("file") if isinstance(license_, dict) else None,
        ):
            if isinstance(named, str):
                files.append(pyproject.parent / named)
    patterns = [s.pattern for e in matrix.extensions for s in e.sources]
    patterns += [i for step in matrix.generate for i in step.inputs]
    for pattern in patterns:
        with contextlib.suppress(ValueError, OSError):  # a generated output's glob, {step}/x
            files += [p for p in root.glob(pattern) if p.is_file()]
    return files


def _recorded(build_root: Path) -> list[Path]:
    """What the last builds in *build_root* read, as their freshness stamps recorded it (the
    headers of torch, the toolkit and the system among them)."""
    from wheelforge.build.freshness import UP_TO_DATE_STAMP, FreshnessStamp

    found: list[Path] = []
    for stamp in sorted(build_root.glob(f"*/{UP_TO_DATE_STAMP}")):
        with contextlib.suppress(OSError, ValueError, RecursionError, readers.FileRefused):
            text = readers.read_text(stamp, cap=readers.STATE_CAP)
            found += map(Path, from_document(FreshnessStamp, json.loads(text)).read or ())
    return found


def refuse_read(matrix: Matrix, build_root: Path, path: Path, flag: str) -> None:
    """A file *flag* writes (``--report``) may not be one the build reads: refused before
    anything runs, every spelling and link of it (``--report csrc/kernel.cu`` replaced the
    source with the report). A path inside a package folder, existing or not, is refused too:
    the next wheel would carry it."""
    real = fsutil.resolved(path)
    try:
        mine = path.stat()
    except OSError:
        mine = None
    for file in [*_read_files(matrix), *(_recorded(build_root) if mine is not None else ())]:
        with contextlib.suppress(OSError):
            theirs = file.stat()
            same = mine is not None and (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
            if same or real == fsutil.resolved(file):
                raise writers.ReadByTheBuild(
                    f"{flag} {path}: that is {file}, which the build reads; the report would "
                    "replace it: name another file (build-report.json)"
                )
    for folder, what in _read_folders(matrix):
        if not real.is_relative_to(fsutil.resolved(folder)):
            continue
        # Packed whole, existing or not; elsewhere a source or header the compiles may include
        # (an old report beside sources in the project's root is no input).
        if what == "the package folder" or (mine is not None and real.suffix in _C_FAMILY):
            raise writers.ReadByTheBuild(
                f"{flag} {path} lies in {what} {folder}, whose files the build reads; the "
                "report would replace or join them: name a file outside it (build-report.json)"
            )
