"""The paths a project's build names (sources, include and library folders), as matrix.yaml
writes them: relative to the project whether setup.py gave them absolute (``Path(this_dir) /
"csrc"``, ``-I{this_dir}/csrc``), relative to its own folder or under the project's real path;
relative to the project's git checkout when they lie above it in that checkout; left out when
wheelforge passes the folder itself (the toolkit's, torch's, Python's); else absolute, and said.
So a copy of the project (or of its checkout) in another folder builds."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from wheelforge.foundation import gitfiles

# Folders wheelforge passes itself, known by a file in them: the toolkit's, torch's, Python's.
_PROVIDED = (
    ("cuda_runtime.h", "the CUDA toolkit's include folder"),
    ("libcudart.so", "the CUDA toolkit's library folder"),
    ("torch/extension.h", "torch's include folder"),
    ("torch/headeronly/macros/Macros.h", "torch's include folder"),
    ("torch/csrc/api/include/torch/all.h", "torch's include folder"),
    ("torch/all.h", "torch's C++ API include folder"),
    ("libtorch.so", "torch's library folder"),
    ("Python.h", "Python's include folder"),
)


def rel_to(root: Path, value: str) -> tuple[str | None, bool]:
    """*value* relative to *root* (posix), and whether it stays inside it."""
    path = Path(os.path.normpath(root / value))
    real = Path(os.path.realpath(root))  # the child names folders under setup.py's real path
    if not path.is_relative_to(root) and path.is_relative_to(real):
        root = real
    if not path.is_relative_to(root):
        return str(path), False
    return path.relative_to(root).as_posix() or ".", True


class ProjectPaths:
    """Paths relative to *root*, with what to say about them added to *hand*, *done* and
    *missing* (sources that match no file) of the reading that owns those lists."""

    def __init__(self, root: Path, *, hand: list[str], done: list[str], missing: list[str]) -> None:
        self.root, self.hand, self.done, self.missing = root, hand, done, missing
        self.top = gitfiles.superproject(Path(os.path.realpath(root)))  # the checkout it is in

    def paths(self, values: Iterable[str], what: str, *, must_exist: bool) -> list[str]:
        out: list[str] = []
        for value in values:
            rel, inside = rel_to(self.root, value)
            if not inside and rel is not None and Path(rel).exists():
                self.outside(Path(rel), what, out)
                continue
            if not inside:
                self.hand.append(
                    f"{what}: '{value}' is outside the project folder and does not exist; copy "
                    "it in or install it and name it here"
                )
                continue
            assert rel is not None
            if must_exist and not (self.root / rel).exists():
                self.missing.append(rel)
            out.append(rel)
        return out

    def outside(self, folder: Path, what: str, out: list[str]) -> None:
        """A folder outside the project: left out when wheelforge passes it itself (the
        toolkit's, torch's, Python's); relative when it lies in the project's git checkout (a
        copy of the checkout builds); else absolute, and said."""
        owner = next((who for marker, who in _PROVIDED if (folder / marker).is_file()), None)
        if owner is not None:
            self.done.append(
                f"{what}: left out '{folder}', {owner}: wheelforge passes the one of the toolkit "
                "and torch it builds with"
            )
            return
        if self.top is not None and folder.is_relative_to(self.top):
            outside = Path(os.path.relpath(folder, self.root)).as_posix()
            self.done.append(
                f"{what}: '{outside}' lies outside the project folder: a build reads it "
                "there, an sdist cannot carry it"
            )
            out.append(outside)
            return
        self.hand.append(
            f"{what}: '{folder}' lies outside the project and its checkout: written as this "
            "absolute path, which every machine that builds it needs; copy it into the project "
            "or give it as a header library"
        )
        out.append(folder.as_posix())
