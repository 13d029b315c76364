"""Header libraries in a captured build's include folders: an include folder that lies in a git
submodule of the checkout the project is in (``.gitmodules``), or in a vendored tree wheelforge
knows by a file (CUTLASS: ``include/cutlass/cutlass.h``), becomes a header library (matrix.yaml's
``header-libraries``: its folder and include folders, its commit in the SBOM) instead of plain
include folders.

A library's folder is written relative to the project folder, ``../csrc/cutlass`` when it lies
above it (FlashAttention-3's ``hopper/`` includes the repository's ``csrc/cutlass``): a build
reads it there and its commit is read from the checkout; an sdist cannot carry it (``wheelforge
sdist`` says so). The commit the superproject's gitlink pins is read too (git, when installed)
and said; a vendored tree with no checkout of its own gets its ``version`` written (the gitlink's
commit, else CUTLASS's version.h), since nothing else would name it."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedHeaderLibrary,
)
from wheelforge.configuration.matrix.keys import HEADER_LIBRARY_RE
from wheelforge.foundation import gitfiles, readers

# Header libraries known by a file under their folder, whatever the folder is called.
KNOWN = {"cutlass": "include/cutlass/cutlass.h"}
# How far above an include folder its library's folder may lie (cutlass/tools/util/include).
_UP = 3
_VERSION_RE = re.compile(r"#define\s+CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)")


def _known(folder: Path) -> str | None:
    return next((name for name, marker in KNOWN.items() if (folder / marker).is_file()), None)


def _name(path: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", Path(path).name.lower()).strip("-.") or "headers"
    return name if HEADER_LIBRARY_RE.match(name) else f"lib-{name}"


def cutlass_version(folder: Path) -> str | None:
    """CUTLASS's version from its include/cutlass/version.h (``3.9.2``)."""
    try:
        text = readers.read_text(
            folder / "include/cutlass/version.h", cap=readers.HEADER_CAP, errors="replace"
        )
    except (OSError, readers.FileRefused):
        return None
    parts = dict(_VERSION_RE.findall(text))
    if not {"MAJOR", "MINOR", "PATCH"} <= parts.keys():
        return None
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


class _Finder:
    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.normpath(root.resolve()))
        self.top = gitfiles.superproject(self.root)
        self.submodules = gitfiles.submodules(self.top) if self.top else {}

    def library_of(self, include: Path) -> tuple[Path, str, str] | None:
        """The library folder *include* lies in, its name and how it was found."""
        if self.top is not None and include.is_relative_to(self.top):
            rel = include.relative_to(self.top).as_posix()
            for path in self.submodules:
                folder = self.top / path
                if (rel == path or rel.startswith(path + "/")) and not self.root.is_relative_to(
                    folder
                ):
                    return folder, _known(folder) or _name(path), "a git submodule"
        for folder in [include, *include.parents][: _UP + 1]:
            if self.root.is_relative_to(folder):
                break  # the project itself (or a folder holding it) is no library of it
            name = _known(folder)
            if name is not None:
                return folder, name, f"a vendored {name} tree"
        return None

    def library(
        self, folder: Path, name: str, how: str, include: list[str]
    ) -> CapturedHeaderLibrary:
        path = Path(os.path.relpath(folder, self.root)).as_posix()
        commit = gitfiles.git_commit(folder)
        pinned = None
        if self.top is not None and folder.is_relative_to(self.top) and folder != self.top:
            pinned = gitfiles.gitlink(self.top, folder.relative_to(self.top).as_posix())
        version = None
        if commit is None:  # no checkout of its own: nothing else names what it is
            version = pinned or (cutlass_version(folder) if name == "cutlass" else None)
        return CapturedHeaderLibrary(
            name=name,
            path=path,
            include=tuple(include),
            version=version,
            pinned=pinned,
            commit=commit,
            found=f"include_dirs ({how})",
        )


def _own_includes(
    root: Path, ext: CapturedExtension, libraries: dict[Path, list[str]]
) -> tuple[str, ...]:
    kept = []
    for folder in ext.include_dirs:
        full = Path(os.path.normpath(root / folder))
        if not any(full == lib or full.is_relative_to(lib) for lib in libraries):
            kept.append(folder)
    return tuple(kept)


def with_header_libraries(build: CapturedBuild) -> tuple[CapturedBuild, list[str]]:
    """*build* with the header libraries its include folders lie in (those folders taken out of
    its extensions' include-dirs), and what to say about them."""
    finder = _Finder(build.root)
    root = finder.root
    libraries: dict[Path, list[str]] = {}
    named: dict[Path, tuple[str, str]] = {}
    for ext in build.extensions:
        for folder in ext.include_dirs:
            full = Path(os.path.normpath(root / folder))
            found = finder.library_of(full)
            if found is None:
                continue
            lib, name, how = found
            sub = Path(os.path.relpath(full, lib)).as_posix()
            libraries.setdefault(lib, [])
            if sub not in libraries[lib]:
                libraries[lib].append(sub)
            named[lib] = (name, how)
    if not libraries:
        return build, []
    found_libs = [finder.library(lib, *named[lib], include) for lib, include in libraries.items()]
    names = {lib.name for lib in found_libs}
    notes = [_note(lib) for lib in found_libs]
    given = [lib for lib in build.header_libraries if lib.name not in names]
    notes += [
        f"header-libraries: {lib.name} comes from {next(f.path for f in found_libs if f.name == lib.name)}, "
        f"not {lib.pypi or lib.path} ({lib.found})"
        for lib in build.header_libraries
        if lib.name in names
    ]
    extensions = tuple(
        dataclasses.replace(e, include_dirs=_own_includes(root, e, libraries))
        for e in build.extensions
    )
    taken = {f for e in build.extensions for f in e.include_dirs} - {
        f for e in extensions for f in e.include_dirs
    }
    done = tuple(  # a folder above the project is said once, as its library's
        d for d in build.done if not any(f"'{f}' lies outside" in d for f in taken)
    )
    return (
        dataclasses.replace(
            build, extensions=extensions, header_libraries=(*found_libs, *given), done=done
        ),
        notes,
    )


def _note(lib: CapturedHeaderLibrary) -> str:
    where = f"{lib.path}" + (
        ", above the project folder: a build reads it there, an sdist cannot carry it"
        if (lib.path or "").startswith("../")
        else ""
    )
    if lib.commit:
        what = f"checked out at {lib.commit[:12]}" + (
            f" (the superproject pins {lib.pinned[:12]})"
            if lib.pinned and lib.pinned != lib.commit
            else ""
        )
    elif lib.version:
        what = f"no checkout of its own: version {lib.version} written"
    else:
        what = "no checkout of its own and no version found: give header-libraries[].version"
    return (
        f"header-libraries: {lib.name} from its include folders ({', '.join(lib.include)}) in {where}; "
        f"{lib.found.removeprefix('include_dirs (').removesuffix(')')}, {what}"
    )
