"""Reading back what wheelforge stored for itself (probe results, environment markers,
toolkit.json, stamps, the job-cost history, ...): each entry is a frozen dataclass model written
by foundation/document.py (to_document) and read back through the model's own reader
(document.from_document), and one that is unreadable, not JSON or of another shape is discarded
with a one-line note, so the next step asks again instead of every later run failing on it
(``{"watch": []}`` in a probe entry crashed every build that looked it up).

fits checks JSON that is not wheelforge's document but another program's answer (a torch
child's, whose answer the probe cache keeps as it came). A shape is written like the value: a type (``str``, ``int``; ``bool`` is not an ``int`` here),
a tuple of alternatives (``(str, None)``), a one-item list for a list of such items
(``[int]``), a dict of keys and their shapes (a key ending in ``?`` may be absent), or
``{str: shape}`` for a mapping of any names to values of one shape, or a function that says
whether a value is good (``numbers.is_version``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from wheelforge.foundation import log, readers, removal
from wheelforge.foundation.document import DocumentError, from_document

T = TypeVar("T")

Shape = Any  # type | None | tuple[Shape, ...] | list[Shape] | dict[str, Shape]


def fits(value: object, shape: Shape) -> bool:
    """Whether *value* has *shape* (see the module's docstring)."""
    if shape is None:
        return value is None
    if isinstance(shape, tuple):
        return any(fits(value, s) for s in shape)
    if isinstance(shape, list):
        return isinstance(value, list) and all(fits(v, shape[0]) for v in value)
    if isinstance(shape, dict) and list(shape) == [str]:
        return isinstance(value, dict) and all(
            isinstance(k, str) and fits(v, shape[str]) for k, v in value.items()
        )
    if isinstance(shape, dict):
        return isinstance(value, dict) and all(_key_fits(value, key, s) for key, s in shape.items())
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(shape, type):
        return isinstance(value, shape)
    return bool(shape(value))


def _key_fits(value: Mapping[str, object], key: str, shape: Shape) -> bool:
    name = key.removesuffix("?")
    if name not in value:
        return key.endswith("?")
    return fits(value[name], shape)


def load(path: Path, model: type[T], *, what: str, within: Path) -> T | None:
    """The document stored at *path* as its *model* (document.from_document); None when there
    is none, and None after removing it (confined to *within*) with a note when it is
    unreadable or malformed."""
    try:
        text = readers.read_text(path, cap=readers.STATE_CAP)
    except FileNotFoundError:
        return None
    except readers.FileRefused as exc:
        discard(path, what, within, exc.problem)
        return None
    try:
        value = json.loads(text)
    except ValueError:  # JSONDecodeError
        discard(path, what, within, "not JSON (a write cut short?)")
        return None
    except RecursionError:
        discard(path, what, within, "JSON nested too deeply")
        return None
    try:
        return from_document(model, value)
    except DocumentError as exc:
        discard(path, what, within, f"not of the shape wheelforge writes: {exc}")
    return None


def discard(path: Path, what: str, within: Path, why: str) -> None:
    """None (for an entry found malformed after its reading too), after the note and the removal (a note is all a cache that cannot be cleaned owes)."""
    log.warning(f"{what} {path} is malformed ({why}); removed it, it is made again")
    with contextlib.suppress(OSError, removal.RemovalRefused):
        removal.remove(path, within=within)
