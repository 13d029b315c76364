"""Which files a wheel and an sdist carry, chosen once: one walk of the project's folders under
one set of rules (VCS, tool and bytecode files left out, wheelforge's own build and output
folders beside the matrix left out, a symlink followed only while it stays inside the project),
giving the wheel's members as data (member name, kind, the file it is packed from) for the plan,
and the sdist's file list from the same walk.

A build walks once, when it is planned (project_files, into PlanInputs); each variant's plan
adds its shared objects (the build's expected outputs) and the .dist-info files the packer
writes (wheel_members, into WheelPlan.members). The packer writes what the plan lists and reads
no folder (packaging/wheel.py)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Literal

from wheelforge.configuration.matrix.keys import GENERATED_RE
from wheelforge.configuration.matrix.model import Matrix, PackageConfig
from wheelforge.foundation import fsutil
from wheelforge.foundation.errors import ConfigError

# What a member is to the wheel: a Python module (.py, .pyi) or package data of a package
# folder (or a top-level module), a license file, a shared object the build links, or a
# .dist-info file the packer writes.
Kind = Literal["module", "package-data", "license", "binary", "metadata"]

# Never walked into: version control, bytecode caches, virtual environments, setuptools' and
# pip's metadata folders (*.egg-info: below).
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv"})
_SKIP_SUFFIXES = frozenset({".pyc", ".pyo"})
# Beside the matrix: wheelforge's default build folder and output folder, never sources.
OUTPUT_DIRS = ("build", "dist")
# What setuptools ships of a package without package data: its modules (and stubs).
_MODULE_SUFFIXES = (".py", ".pyi")
# Build products an sdist never carries (it carries what builds them).
_BUILT_SUFFIXES = (".so", ".o")
# Beside pyproject.toml, taken into an sdist when present: what a source release carries.
_PROJECT_FILES = (
    "README.md",
    "README.rst",
    "README.txt",
    "README",
    "LICENSE",
    "LICENSE.txt",
    "NOTICE",
)

# The .dist-info files of every wheelforge wheel: PEP 427's, written by the packer (RECORD by
# wheel's WheelFile), and the build's provenance (packaging/provenance.py) under these names.
SBOM_NAME = "sboms/wheelforge.cdx.json"  # PEP 770: any file name under .dist-info/sboms/
BUILD_INFO_NAME = "wheelforge-build.json"
PROVENANCE_NAMES = (SBOM_NAME, BUILD_INFO_NAME)
_DIST_INFO_NAMES = ("METADATA", "WHEEL", "RECORD", *PROVENANCE_NAMES)


@dataclass(frozen=True, kw_only=True)
class Member:
    """One file of the wheel: where it goes, what it is, and what it is packed from (None: a
    .dist-info file the packer writes)."""

    path: str  # the member name, e.g. pkg/_C.abi3.so
    kind: Kind
    source: Path | None = None


@dataclass(frozen=True, kw_only=True)
class ProjectFiles:
    """The project's files of a build's wheels, found when the build is planned: the package
    folders' modules and data and the top-level modules (at their place in the wheel), and the
    license files (named as under .dist-info/licenses/)."""

    members: tuple[Member, ...]
    licenses: tuple[tuple[str, Path], ...]


def walk(folder: Path, *, skipped: Collection[Path] = ()) -> Iterator[Path]:
    """The files under *folder* that a wheel or an sdist may carry, in a fixed order: the
    folders of _SKIP_DIRS, *.egg-info and those of *skipped* not entered, bytecode left out. A
    symlink to a file is yielded (followed() decides on it); a linked folder is not entered."""
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIP_DIRS and not d.endswith(".egg-info") and Path(root, d) not in skipped
        )
        for name in sorted(names):
            path = Path(root, name)
            if path.suffix not in _SKIP_SUFFIXES and path.is_file():
                yield path


def followed(path: Path, root: Path, *, what: str) -> Path:
    """A file found in the project, as a wheel or an sdist carries it: a symlink is followed
    when it leads to a file inside the project *root*; one that leads outside is refused,
    naming *what* (the key or member) and the link, as ``notes.txt -> /etc/shadow`` would put
    that file into the wheel (the sdist and the wheel once disagreed: one skipped every
    symlink, the other packed any)."""
    target = fsutil.escapes(path, root)
    if target is not None:
        raise ConfigError(fsutil.escape_message(what, path, target, root))
    return path


def _utf8(arcname: str, path: Path) -> str:
    """*arcname*, when it can be a member name: zip and RECORD write names as UTF-8, and a file
    name of other bytes (os.walk's surrogate escapes) cannot be written (a traceback, before)."""
    try:
        arcname.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", errors="backslashreplace")
        raise ConfigError(
            f"{shown}: the file's name is not UTF-8 (the bytes written \\xNN), and a wheel's "
            "member names are; rename it, or leave it out with package.exclude"
        ) from None
    return arcname


def outputs(matrix: Matrix) -> set[Path]:
    """wheelforge's own folders beside the matrix (OUTPUT_DIRS), which no walk enters."""
    return {matrix.root / d for d in OUTPUT_DIRS}


def _matches(rel: str, glob: str) -> bool:
    """Whether the package file *rel* matches *glob*, ``**/`` standing for no folder too, as
    in setuptools' package-data (glob.glob recursive): ``**/*.json`` takes ``configs.json``."""
    return fnmatch(rel, glob) or (glob.startswith("**/") and fnmatch(rel, glob[3:]))


def package_members(
    folder: Path,
    *,
    data: Sequence[str],
    exclude: Sequence[str],
    project: Path,
    stale: Sequence[str] = (),
    skipped: Collection[Path] = (),
) -> Iterator[Member]:
    """The files of a package folder that go into the wheel, as setuptools would pick them:
    Python modules, plus files matching *data* (globs relative to the folder), minus *exclude*.
    Sources (.cpp, .cu), build leftovers and the like stay out, and so does a shared object
    whose name starts with one of *stale* (an in-place build's copy of an extension the build
    links: it must not shadow the built one); a symlink: see followed()."""
    base = folder.parent
    what = f"package.packages '{folder.name}'"
    for path in walk(folder, skipped=skipped):
        if path.name.endswith(".so") and path.name.startswith(tuple(stale)):
            continue
        rel = path.relative_to(folder).as_posix()
        module = path.suffix in _MODULE_SUFFIXES
        if (module or any(_matches(rel, g) for g in data)) and not any(
            _matches(rel, g) for g in exclude
        ):
            yield Member(
                path=_utf8(path.relative_to(base).as_posix(), path),
                kind="module" if module else "package-data",
                source=followed(path, project, what=what),
            )


def project_files(matrix: Matrix) -> ProjectFiles:
    """The one walk of a build: what of the project its wheels carry (package.packages with
    package-data and exclude, package.modules, the license files)."""
    pkg = matrix.package
    root = matrix.root
    stale = [ext.leaf + "." for ext in matrix.extensions]
    members: list[Member] = []
    for folder in pkg.packages:
        members += package_members(
            folder,
            data=pkg.package_data,
            exclude=pkg.exclude,
            project=root,
            stale=stale,
            skipped=outputs(matrix),
        )
    members += [
        Member(
            path=module.name,
            kind="module",
            source=followed(module, root, what="package.modules"),
        )
        for module in pkg.modules
    ]
    # PEP 639: License-File entries name files under .dist-info/licenses/.
    licenses = [
        (
            Path(f.relative_to(root) if f.is_relative_to(root) else f.name).as_posix(),
            followed(f, root, what="license file"),
        )
        for f in pkg.license_files
    ]
    return ProjectFiles(members=tuple(members), licenses=tuple(licenses))


def dist_info(package: PackageConfig, version: str) -> str:
    """The wheel's .dist-info folder (PEP 427: the normalized name and the version)."""
    return f"{package.wheel_name}-{version}.dist-info"


def wheel_members(
    files: ProjectFiles, *, dist_info: str, binaries: Iterable[tuple[str, Path]]
) -> tuple[Member, ...]:
    """Every member of one wheel, sorted by name: the project's *files*, its *binaries* (where
    each goes, the file the build links), the .dist-info files. Two members of one name (a
    package file where a shared object goes) are refused."""
    members = [
        *files.members,
        *(
            Member(path=f"{dist_info}/licenses/{n}", kind="license", source=p)
            for n, p in files.licenses
        ),
        *(Member(path=name, kind="binary", source=library) for name, library in binaries),
        *(Member(path=f"{dist_info}/{name}", kind="metadata") for name in _DIST_INFO_NAMES),
    ]
    seen: dict[str, Member] = {}
    for member in members:
        first = seen.setdefault(member.path, member)
        if first is not member:
            raise ConfigError(
                f"{first.source or first.kind} and {member.source or member.kind} would both be "
                f"the wheel's {member.path}; leave one out (package.exclude) or rename it"
            )
    return tuple(sorted(members, key=lambda m: m.path))


def sdist_files(matrix: Matrix, root: Path) -> list[tuple[str, Path]]:
    """(name in the sdist, file) for everything a wheel build from the sdist needs, sorted:
    pyproject.toml, the matrix, the README and LICENSE files beside them, the extension sources
    and generate inputs, the include and header-library folders, the package folders (whole, but
    for build products) and what the wheel takes of the project (project_files: the sdist's
    wheel carries the same), the tests. Every file must lie under *root*, the folder of
    pyproject.toml."""
    root = root.resolve()
    wanted: set[Path] = {root / "pyproject.toml", matrix.path}
    wanted |= {root / n for n in _PROJECT_FILES if (root / n).is_file()}
    for ext in matrix.extensions:
        for spec in ext.sources:  # a generate step's outputs are made by the build
            if not GENERATED_RE.match(spec.pattern):
                wanted |= {p.resolve() for p in matrix.root.glob(spec.pattern) if p.is_file()}
    for step in matrix.generate:
        for pattern in step.inputs:
            if not GENERATED_RE.match(pattern):
                wanted |= {p.resolve() for p in matrix.root.glob(pattern) if p.is_file()}
    wheel = project_files(matrix)
    wanted |= {m.source for m in wheel.members if m.source is not None}
    wanted |= {path for _, path in wheel.licenses}
    folders = [d for ext in matrix.extensions for d in ext.include_dirs if d.is_absolute()]
    _refuse_outside_libraries(matrix, root)
    folders += [
        lib.path / d for lib in matrix.header_libraries if lib.path is not None for d in lib.include
    ]
    folders += matrix.package.packages
    if matrix.tests is not None:
        folders.append(matrix.tests.path)
    for folder in folders:
        wanted |= {
            p for p in walk(folder, skipped=outputs(matrix)) if p.suffix not in _BUILT_SUFFIXES
        }
    files: dict[str, Path] = {}
    for path in sorted(wanted):
        try:
            # Named where it is found (a link by its own name), the folders on the way resolved.
            where = fsutil.resolved(path.parent) / path.name
            name = where.relative_to(root).as_posix()
        except ValueError:
            raise ConfigError(
                f"{path} lies outside {root}, the folder of pyproject.toml, so an sdist cannot "
                f"carry it; move it (and {matrix.path.name}'s path to it) under {root}"
            ) from None
        files.setdefault(name, followed(path, root, what=f"sdist member {name}"))
    return sorted(files.items())


def _refuse_outside_libraries(matrix: Matrix, root: Path) -> None:
    """A header library above the sdist's folder (FlashAttention-3's ``hopper/`` includes the
    repository's ``../csrc/cutlass``): a build reads it there, an sdist cannot carry it."""
    for i, lib in enumerate(matrix.header_libraries):
        if lib.path is not None and not lib.path.resolve().is_relative_to(root):
            raise ConfigError(
                f"header-libraries[{i}] ({lib.name}): {lib.path} lies outside {root}, the folder of "
                "pyproject.toml, so an sdist cannot carry it; build wheels from the checkout, or put "
                "pyproject.toml and matrix.yaml at the repository's top (where the library lies "
                "inside), or take the headers from PyPI (header-libraries[].pypi)"
            )
