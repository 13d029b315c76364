"""No build script init can read: the extension guessed from the sources, the one folder whose
files register ops (``STABLE_TORCH_LIBRARY``, ``PYBIND11_MODULE``)."""

from __future__ import annotations

import re
from pathlib import Path

from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
)
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.foundation import readers

_LIBRARY_RE = re.compile(r"STABLE_TORCH_LIBRARY\s*\(\s*(\w+)")
_SKIP_DIRS = {"build", "dist", "tests", "test", "docs", "examples", "benchmarks", "third_party"}
# The sources init looks for: SOURCE_SUFFIXES but .c (plain C files are not scanned).
_SUFFIXES = tuple(s for s in SOURCE_SUFFIXES if s != ".c")


def _found_sources(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in _SUFFIXES
        and p.is_file()
        and not _SKIP_DIRS & set(p.relative_to(root).parts[:-1])
    )


def guess_extension(root: Path) -> CapturedBuild | None:
    """The sources of the one folder that registers ops, or None when none does."""
    sources = _found_sources(root)
    text = {p: readers.read_text(p, cap=readers.CONFIG_CAP, errors="replace") for p in sources}
    registering = [
        p for p in sources if _LIBRARY_RE.search(text[p]) or "PYBIND11_MODULE" in text[p]
    ]
    if not registering:
        return None
    folder = registering[0].parent
    leaf = m[1] if (m := _LIBRARY_RE.search(text[registering[0]])) else "_C"
    module = ".".join((*folder.relative_to(root).parts, leaf))
    rel = folder.relative_to(root).as_posix()
    extension = CapturedExtension(
        name=module,
        kind="guessed",
        where=str(registering[0].relative_to(root)),
        sources=tuple(
            CapturedSource(path=p.relative_to(root).as_posix())
            for p in sources
            if p.parent == folder
        ),
        include_dirs=(rel,),
    )
    hand = (
        f"no CUDAExtension/CppExtension in a setup.py: extension.name '{module}' is guessed from "
        f"{registering[0].relative_to(root)} (its library name and folder); put the module where "
        "your package imports or loads it from",
    )
    tests = next((n for n in ("tests", "test") if (root / n).is_dir()), None)
    return CapturedBuild(
        root=root, front_door="sources", extensions=(extension,), tests=tests, hand=hand
    )
