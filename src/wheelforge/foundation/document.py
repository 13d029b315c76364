"""Frozen dataclasses as JSON documents: the writer that matches schemagen's schema, so a
document and its schema come from one model (field metadata ``key``, ``internal`` and
``omit_if_none`` are honoured the same way)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from wheelforge.foundation.schemagen import document_fields, field_key


def to_document(value: Any) -> Any:
    """*value* as JSON data: dataclasses by their document fields (a field marked
    ``omit_if_none`` is left out while it is None), tuples as lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field_key(f): to_document(getattr(value, f.name))
            for f in document_fields(type(value))
            if not (f.metadata.get("omit_if_none") and getattr(value, f.name) is None)
        }
    if isinstance(value, tuple | list):
        return [to_document(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_document(v) for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{value!r} has no JSON form")
