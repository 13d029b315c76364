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
from collections.abc import Callable, Iterator, Mapping, Sequence
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

    def __init__(self, why: str, parts: tuple[str | int, ...] = ()) -> None:
        self.parts = parts
        self.why = why
        super().__init__(f"{self.where or 'the document'}: {why}")

    @property
    def where(self) -> str:
        out = ""
        for part in self.parts:
            out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
        return out

    def inside(self, part: str | int) -> DocumentError:
        """The same error, one level further out (the path is formed only on failure)."""
        return DocumentError(self.why, (part, *self.parts))


def schema_version(version: int) -> Any:
    """The ``schema_version`` field of a document model: always written, always *version*
    (a document of another version is not this model's: from_document refuses it; one without
    the key reads as *version*: the build info of wheels made before it had one)."""
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
    read: T = _reader(typing.cast(Any, cls))(data)
    return read


Reader = Callable[[Any], Any]


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse(expected: str, value: object) -> DocumentError:
    return DocumentError(f"{expected} expected, got {_shown(value)}")


def _identity(value: Any) -> Any:
    return value


def _read_str(value: Any) -> str:
    if type(value) is not str:
        raise _refuse("a string", value)
    return value


def _read_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _refuse("true or false", value)
    return value


def _read_int(value: Any) -> int:
    if type(value) is not int:  # a bool is no count
        raise _refuse("an integer", value)
    return value


def _read_float(value: Any) -> float:
    if type(value) is not float and type(value) is not int:
        raise _refuse("a number", value)
    return float(value)


def _read_none(value: Any) -> None:
    if value is not None:
        raise _refuse("null", value)


_SIMPLE: dict[Any, Reader] = {
    str: _read_str,
    bool: _read_bool,
    int: _read_int,
    float: _read_float,
    None: _read_none,
    type(None): _read_none,
    Any: _identity,
    object: _identity,
}


@functools.cache
def _reader(tp: Any) -> Reader:
    """The reader of one type form, made once per type (a probe entry watches thousands of
    files: each is read by the same closure)."""
    if tp in _SIMPLE:
        return _SIMPLE[tp]
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return _DataclassReader(tp)
        if issubclass(tp, PurePath):
            return lambda value: tp(_read_str(value))
        if issubclass(tp, enum.Enum):
            return functools.partial(_read_enum, tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return functools.partial(_read_literal, args)
    if origin in (Union, types.UnionType):
        return _union(args)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return functools.partial(_read_fixed, tuple(_reader(a) for a in args))
    if (
        origin is tuple
        or origin is list
        or (isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str)
    ):
        item = _reader(args[0] if args else Any)
        return functools.partial(_read_items, item, tuple if origin is tuple else list)
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return functools.partial(_read_mapping, _reader(args[1] if args else Any))
    raise TypeError(f"from_document cannot read {tp!r}")


def _read_enum(tp: type[enum.Enum], value: Any) -> enum.Enum:
    try:
        return tp(value)
    except ValueError:
        raise _refuse(f"one of {[m.value for m in tp]}", value) from None


def _read_literal(allowed: tuple[Any, ...], value: Any) -> Any:
    # True == 1: a Literal of strings or numbers takes no bool, and one of bools no number.
    if value not in allowed or type(value) not in {type(a) for a in allowed}:
        raise _refuse(f"one of {list(allowed)}", value)
    return value


def _union(args: tuple[Any, ...]) -> Reader:
    members = [a for a in args if a is not type(None)]
    optional = len(members) < len(args)
    if len(members) == 1:  # X | None: X's own error names what X expects
        only = _reader(members[0])
        return (lambda value: None if value is None else only(value)) if optional else only
    readers = [_reader(a) for a in members]

    def read(value: Any) -> Any:
        if value is None and optional:
            return None
        for member in readers:
            try:
                return member(value)
            except DocumentError:
                continue
        raise DocumentError(f"{_shown(value)} is none of its forms")

    return read


def _read_items(item: Reader, kind: type, value: Any) -> Any:
    if type(value) is not list:
        raise _refuse("a list", value)
    if item is _read_str and all(type(v) is str for v in value):
        return kind(value)
    out = []
    for i, v in enumerate(value):
        try:
            out.append(item(v))
        except DocumentError as exc:
            raise exc.inside(i) from None
    return kind(out)


def _read_fixed(items: tuple[Reader, ...], value: Any) -> tuple[Any, ...]:
    if type(value) is not list or len(value) != len(items):
        raise _refuse(f"a list of {len(items)}", value)
    if all(r is _read_int for r in items) and all(type(v) is int for v in value):
        return tuple(value)
    out = []
    for i, (read, v) in enumerate(zip(items, value, strict=True)):
        try:
            out.append(read(v))
        except DocumentError as exc:
            raise exc.inside(i) from None
    return tuple(out)


def _read_mapping(item: Reader, value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _refuse("an object", value)
    out = {}
    for k, v in value.items():
        try:
            out[k] = item(v)
        except DocumentError as exc:
            raise exc.inside(k) from None
    return out


class _DataclassReader:
    """A dataclass's reader: its fields' readers resolved on first use (a model that refers to
    itself is read by the same reader)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields: list[tuple[str, str, Reader | None, bool, bool]] | None = None

    def _resolve(self) -> list[tuple[str, str, Reader | None, bool, bool]]:
        hints = typing.get_type_hints(self.cls)
        out = []
        for f in document_fields(self.cls):
            custom = f.metadata.get("from_document")
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            read = None if custom is not None else _reader(hints[f.name])
            out.append((field_key(f), f.name, read, bool(f.metadata.get("omit_if_none")), required))
        return out

    def __call__(self, value: Any) -> Any:
        if type(value) is not dict:
            raise _refuse("an object", value)
        fields = self.fields
        if fields is None:
            fields = self.fields = self._resolve()
        given: dict[str, Any] = {}
        for key, name, read, omit, required in fields:
            if key not in value:
                if omit:
                    given[name] = None
                elif required:
                    raise DocumentError("missing", (key,))
                continue
            try:
                if read is None:
                    given[name] = self._custom(name, value[key])
                else:
                    given[name] = read(value[key])
            except DocumentError as exc:
                raise exc.inside(key) from None
        if len(value) > sum(1 for key, *_ in fields if key in value):
            known = {key for key, *_ in fields}
            unknown = next(k for k in value if k not in known)
            raise DocumentError("not a key of this document", (unknown,))
        return self.cls(**given)

    def _custom(self, name: str, value: Any) -> Any:
        read = next(f for f in dataclasses.fields(self.cls) if f.name == name).metadata[
            "from_document"
        ]
        try:
            return read(value)
        except (TypeError, ValueError) as exc:
            raise DocumentError(str(exc)) from None
