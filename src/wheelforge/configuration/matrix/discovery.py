"""Which folders are the project's Python packages when matrix.yaml does not say: found the way
setuptools' automatic discovery finds them (flat or src layout, namespace packages too)."""

from __future__ import annotations

from pathlib import Path

from wheelforge.foundation import fsutil

# Folders setuptools' automatic discovery never takes for packages (FlatLayoutPackageFinder).
_NOT_PACKAGES = frozenset(
    [
        "tests",
        "test",
        "docs",
        "doc",
        "examples",
        "example",
        "scripts",
        "tools",
        "benchmarks",
        "bench",
        "build",
        "dist",
    ]
)


def is_package(folder: Path) -> bool:
    """A regular package (``__init__.py``), or a namespace package (PEP 420) that holds one."""
    return (folder / "__init__.py").is_file() or (
        folder.is_dir() and any(True for _ in folder.glob("*/**/__init__.py"))
    )


def discover_packages(root: Path, *extensions: str) -> tuple[Path, ...]:
    """``package.packages`` when not given: the extension modules' own top-level packages, else
    every top-level package folder of *root* (or *root*/src)."""
    layouts = [root, root / "src"]
    own: list[Path] = []
    for extension in extensions:
        top = extension.split(".", 1)[0]
        found = [
            fsutil.resolved(d / top) for d in layouts if "." in extension and is_package(d / top)
        ]
        if found and found[0] not in own:
            own.append(found[0])
    if own:
        return tuple(own)
    for layout in layouts:
        found = [
            fsutil.resolved(init.parent)
            for init in sorted(layout.glob("*/__init__.py"))
            if init.parent.name not in _NOT_PACKAGES and init.parent.name.isidentifier()
        ]
        if found:
            return tuple(found)
    return ()
