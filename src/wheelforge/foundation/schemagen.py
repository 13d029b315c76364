"""JSON Schema (draft 2020-12) from frozen dataclasses: one model, one schema.

Generic: it knows typing, not wheelforge. Each dataclass field may carry, in
``field(metadata=...)``:

- ``doc``: one line, becomes the property's ``description``;
- ``key``: the name in the document when it differs from the attribute
  (``requires-python`` for ``requires_python``);
- ``schema``: the field's form in the document when it is not its Python type (an arch set
  written ``"8.0 9.0+PTX"``): a type form (``str | tuple[str, ...]``), or a schema ``dict``
  taken as it is;
- ``default``: the default to document when the dataclass has none (or a different one, e.g.
  the document's spelling of it);
- ``required``: override whether the key is required (by default: no dataclass default);
- ``internal``: ``True`` leaves the field out of the schema (derived values, not document keys);
- ``omit_if_none``: ``True`` for a key that a document leaves out rather than writing null
  (foundation/document.py): not required, and its schema does not allow null.

The same metadata is what a reader can be driven by, so keys, docs and schema come from one
place (the habit of scikit-build-core's ``settings/json_schema.py``).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, Literal, Union

DRAFT = "https://json-schema.org/draft/2020-12/schema"

_SIMPLE: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class SchemaError(TypeError):
    """A type the generator cannot express; name it in the field's metadata ``schema``."""


def field_key(field: dataclasses.Field[Any]) -> str:
    """The field's name in the document."""
    return str(field.metadata.get("key", field.name))


def field_doc(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata.get("doc", ""))


def field_is_required(field: dataclasses.Field[Any]) -> bool:
    if field.metadata.get("omit_if_none"):
        return False
    if "required" in field.metadata:
        return bool(field.metadata["required"])
    return (
        field.default is dataclasses.MISSING
        and field.default_factory is dataclasses.MISSING
        and "default" not in field.metadata
    )


def field_default(field: dataclasses.Field[Any]) -> Any:
    """The documented default, or ``dataclasses.MISSING``."""
    if "default" in field.metadata:
        return field.metadata["default"]
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def document_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of a dataclass that are keys of the document, in order."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal", False)]


class _Generator:
    def __init__(self, overrides: Mapping[type, Mapping[str, Any]]) -> None:
        self.overrides = overrides
        self.defs: dict[str, dict[str, Any]] = {}

    def of_dataclass(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in document_fields(cls):
            key = field_key(field)
            shape = field.metadata.get("schema")
            if isinstance(shape, Mapping):
                prop = dict(shape)
            elif shape is not None:
                prop = self.of_type(shape)
            elif field.metadata.get("omit_if_none"):
                prop = self.of_type(without_none(hints[field.name]))
            else:
                prop = self.of_type(hints[field.name])
            if doc := field_doc(field):
                prop = {"description": doc, **prop}
            default = field_default(field)
            if default is not dataclasses.MISSING:
                prop["default"] = _jsonable(default)
            properties[key] = prop
            if field_is_required(field):
                required.append(key)
        out: dict[str, Any] = {"type": "object"}
        if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):
            out["description"] = " ".join(cls.__doc__.split())
        out["additionalProperties"] = False
        out["properties"] = properties
        if required:
            out["required"] = required
        return out

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder: a recursive model refers to itself
            self.defs[name] = self.of_dataclass(cls)
        return {"$ref": f"#/$defs/{name}"}

    def of_type(self, tp: Any) -> dict[str, Any]:
        if tp in self.overrides:
            return dict(self.overrides[tp])
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if tp is Any:
            return {}
        if isinstance(tp, type):
            if dataclasses.is_dataclass(tp):
                return self.ref(tp)
            if issubclass(tp, enum.Enum):
                return {"enum": [_jsonable(m.value) for m in tp]}
            if issubclass(tp, PurePath):
                return {"type": "string"}
            for base, name in _SIMPLE.items():
                if tp is base:
                    return {"type": name}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is Literal:
            values = [_jsonable(a) for a in args]
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin in (Union, types.UnionType):
            return self.union(args)
        if origin is tuple:
            return self.tuple(args)
        if isinstance(origin, type) and issubclass(origin, Mapping):
            key_type, value_type = args or (str, Any)
            if key_type is not str:
                raise SchemaError(f"JSON object keys are strings, not {key_type!r}")
            return {"type": "object", "additionalProperties": self.of_type(value_type)}
        if isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str:
            return {"type": "array", "items": self.of_type(args[0] if args else Any)}
        raise SchemaError(f"no JSON Schema for {tp!r}")

    def union(self, args: tuple[Any, ...]) -> dict[str, Any]:
        members = [self.of_type(a) for a in args]
        # {"type": ["string", "null"]} reads better than anyOf: bare types merge into one member.
        bare: list[str] = []
        out: list[dict[str, Any]] = []
        merged: dict[str, Any] = {}  # where the first bare type stood
        for m in members:
            if set(m) == {"type"} and isinstance(m["type"], str):
                if not bare:
                    out.append(merged)
                bare.append(m["type"])
            else:
                out.append(m)
        if bare:
            merged["type"] = bare[0] if len(bare) == 1 else bare
        return out[0] if len(out) == 1 else {"anyOf": out}

    def tuple(self, args: tuple[Any, ...]) -> dict[str, Any]:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": self.of_type(args[0])}
        return {
            "type": "array",
            "prefixItems": [self.of_type(a) for a in args],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }


def without_none(tp: Any) -> Any:
    """``X | None`` → ``X`` (``X | Y | None`` → ``X | Y``); any other type form unchanged."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) not in (Union, types.UnionType) or type(None) not in args:
        return tp
    rest = [a for a in args if a is not type(None)]
    return functools.reduce(operator.or_, rest[1:], rest[0])


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise SchemaError(f"default {value!r} is not JSON; give metadata 'default' its JSON form")


def type_schema(
    tp: Any, overrides: Mapping[type, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The schema of one type form (no dataclasses: they need the ``$defs`` of a document)."""
    gen = _Generator(overrides or {})
    out = gen.of_type(tp)
    if gen.defs:
        raise SchemaError(f"{tp!r} holds dataclasses; use json_schema()")
    return out


def json_schema(
    cls: type,
    *,
    title: str | None = None,
    schema_id: str | None = None,
    overrides: Mapping[type, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON Schema of a document shaped like dataclass ``cls``.

    Nested dataclasses land in ``$defs`` (by class name) and are referenced; ``overrides`` maps
    types the generator does not know (or should render differently) to their schema.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise SchemaError(f"{cls!r} is not a dataclass")
    gen = _Generator(overrides or {})
    body = gen.of_dataclass(cls)
    head: dict[str, Any] = {"$schema": DRAFT}
    if schema_id:
        head["$id"] = schema_id
    if title:
        head["title"] = title
    out = {**head, **body}
    if gen.defs:
        out["$defs"] = dict(sorted(gen.defs.items()))
    return out
