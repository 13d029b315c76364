"""Frozen dataclasses as JSON documents: the writer that matches schemagen's schema, so a
document and its schema come from one model (field metadata ``key``, ``internal`` and
``omit_if_none`` are honoured the same way)."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator, Mapping
from json.encoder import encode_basestring_ascii
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


_SCALARS = (str, int, float, bool, type(None))


@functools.cache
def _layout(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(key as JSON, attribute, omitted when None) of each document field of *cls*."""
    return tuple(
        (json.dumps(field_key(f)), f.name, bool(f.metadata.get("omit_if_none")))
        for f in document_fields(cls)
    )


def _scalar(value: Any) -> str:
    """A scalar as json.dumps writes it, without an encoder per call (a million entries of
    ten fields each)."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    return json.dumps(value)


def iter_json(value: Any, indent: int = 2, level: int = 0) -> Iterator[str]:
    """The text of ``json.dumps(to_document(value), indent=indent)``, in pieces, without the
    whole tree of dicts or the whole text held: a million fatbin entries are written one at a
    time (``inspect --json`` took 2.7 GB for them; issue 32). A dataclass or mapping of scalars
    alone is one piece."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    items: list[tuple[str, Any]]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [
            (key, got)
            for key, name, omit in _layout(type(value))
            if not ((got := getattr(value, name)) is None and omit)
        ]
    elif isinstance(value, Mapping):
        items = [(json.dumps(str(k)), v) for k, v in value.items()]
    elif isinstance(value, tuple | list):
        if not value:
            yield "[]"
            return
        yield "["
        for i, item in enumerate(value):
            yield ("," if i else "") + "\n" + inner
            yield from iter_json(item, indent, level + 1)
        yield "\n" + pad + "]"
        return
    else:
        yield json.dumps(to_document(value))
        return
    if not items:
        yield "{}"
        return
    if all(isinstance(v, _SCALARS) for _, v in items):
        yield "{" + ",".join(f"\n{inner}{k}: {_scalar(v)}" for k, v in items) + "\n" + pad + "}"
        return
    yield "{"
    for i, (key, item) in enumerate(items):
        yield ("," if i else "") + "\n" + inner + key + ": "
        yield from iter_json(item, indent, level + 1)
    yield "\n" + pad + "}"
