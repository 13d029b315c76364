"""Frozen dataclasses as JSON documents: the writer that matches schemagen's schema, and the
reader back (from_document), so a document, its schema and its reading come from one model
(field metadata ``key``, ``internal`` and ``omit_if_none`` are honoured the same way)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import PurePath
from typing import Any, Literal, TypeVar, Union

from wheelforge.foundation.schemagen import document_fields, field_key

T = TypeVar("T")


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


class DocumentError(ValueError):
    """A document that is not of its model's shape: where (``extensions[0].name``) and why."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where or 'the document'}: {why}")
        self.where = where
        self.why = why


def schema_version(version: int) -> Any:
    """The ``schema_version`` field of a document model: always written, always *version*
    (a document of another version is not this model's: from_document refuses it)."""
    return dataclasses.field(
        default=version,
        metadata={
            "doc": "bumped when a key changes meaning or goes away",
            "schema": {"const": version},
            "required": True,
            "from_document": functools.partial(_const, version),
        },
    )


def _const(version: int, value: object) -> int:
    if value != version or isinstance(value, bool):
        raise TypeError(f"schema_version {version}, not {value!r}")
    return version


def from_document(cls: type[T], data: object) -> T:
    """The frozen dataclass *cls* read back from the JSON data to_document wrote for it: every
    key checked against the field's type (the same types schemagen describes; a field whose
    metadata ``from_document`` names a function is read by it), unknown keys refused, absent
    ones taking the field's default (None for ``omit_if_none``). DocumentError names the first
    key that does not fit."""
    read: T = _read(cls, data, "")
    return read


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _where(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _read(tp: Any, value: object, where: str) -> Any:
    if tp is Any or tp is object:
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise DocumentError(where, f"null expected, got {_shown(value)}")
        return None
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return _dataclass(tp, value, where)
        if tp is bool or tp is str:
            if not isinstance(value, tp):
                raise DocumentError(where, f"{_NAMES[tp]} expected, got {_shown(value)}")
            return value
        if tp is int or tp is float:
            kinds = int if tp is int else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise DocumentError(where, f"{_NAMES[tp]} expected, got {_shown(value)}")
            return tp(value)
        if issubclass(tp, PurePath):
            if not isinstance(value, str):
                raise DocumentError(where, f"a path expected, got {_shown(value)}")
            return tp(value)
        if issubclass(tp, enum.Enum):
            try:
                return tp(value)
            except ValueError:
                raise DocumentError(
                    where, f"one of {[m.value for m in tp]}, not {_shown(value)}"
                ) from None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        if value not in args or isinstance(value, bool) != isinstance(args[0], bool):
            raise DocumentError(where, f"one of {list(args)}, not {_shown(value)}")
        return value
    if origin in (Union, types.UnionType):
        problems = []
        for member in args:
            try:
                return _read(member, value, where)
            except DocumentError as exc:
                problems.append(exc)
        raise (
            min(problems, key=lambda e: len(e.where))
            if len(problems) == 1
            else DocumentError(where, f"{_shown(value)} is none of its forms")
        )
    if (
        origin is tuple
        or origin is list
        or (isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str)
    ):
        if not isinstance(value, list):
            raise DocumentError(where, f"a list expected, got {_shown(value)}")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise DocumentError(where, f"{len(args)} items expected, got {len(value)}")
            return tuple(
                _read(a, v, _where(where, i))
                for i, (a, v) in enumerate(zip(args, value, strict=True))
            )
        item = args[0] if args else Any
        items = [_read(item, v, _where(where, i)) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if isinstance(origin, type) and issubclass(origin, Mapping):
        if not isinstance(value, dict):
            raise DocumentError(where, f"an object expected, got {_shown(value)}")
        item = args[1] if args else Any
        return {k: _read(item, v, _where(where, k)) for k, v in value.items()}
    raise TypeError(f"from_document cannot read {tp!r}")


_NAMES = {str: "a string", bool: "true or false", int: "an integer", float: "a number"}


def _dataclass(cls: type, value: object, where: str) -> Any:
    if not isinstance(value, dict):
        raise DocumentError(where, f"an object expected, got {_shown(value)}")
    hints = _hints(cls)
    fields = document_fields(cls)
    known = {field_key(f) for f in fields}
    if unknown := [k for k in value if k not in known]:
        raise DocumentError(_where(where, unknown[0]), "not a key of this document")
    given: dict[str, Any] = {}
    for f in fields:
        key = field_key(f)
        if key not in value:
            if f.metadata.get("omit_if_none"):
                given[f.name] = None
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DocumentError(_where(where, key), "missing")
            continue
        reader = f.metadata.get("from_document")
        if reader is None:
            given[f.name] = _read(hints[f.name], value[key], _where(where, key))
            continue
        try:
            given[f.name] = reader(value[key])
        except (TypeError, ValueError) as exc:
            raise DocumentError(_where(where, key), str(exc)) from None
    return cls(**given)


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
