"""Lazy re-exports for a package's ``__init__`` (PEP 562): the library face names its entry
points without importing them, so ``import wheelforge`` and the quick no-op stay cheap and a
package's ``__init__`` adds no import cycle."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def exports(package: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` giving each of *names* ("module" or "module:attribute", the
    attribute defaulting to the name) from its module, imported on first use."""

    def __getattr__(name: str) -> object:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        return getattr(importlib.import_module(module), attribute or name)

    return __getattr__
