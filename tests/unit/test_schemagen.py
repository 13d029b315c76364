"""The dataclass → JSON Schema generator, on small models of its own."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import jsonschema
import pytest

from wheelforge.foundation import schemagen


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, kw_only=True)
class Inner:
    """A nested part."""

    size: int = field(metadata={"doc": "how big"})
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: str = field(metadata={"doc": "the name"})
    ratio: float = 0.5
    enabled: bool = True
    note: str | None = None
    mode: Literal["fast", "slow"] = "fast"
    pair: tuple[int, str] = field(default=(1, "a"))
    inner: Inner
    maybe_inner: Inner | None = None
    extra: Mapping[str, int] = field(default_factory=dict)
    colour: Colour = Colour.RED
    where: Path = field(default=Path("out"), metadata={"key": "where-to"})
    derived: int = field(default=0, metadata={"internal": True})
    spelled: tuple[str, ...] = field(
        default=(), metadata={"schema": {"type": "string"}, "default": "a b"}
    )
    shaped: tuple[Inner, ...] = field(
        default=(), metadata={"schema": str | tuple[str | Inner, ...]}
    )


@pytest.fixture(scope="module")
def schema() -> dict:
    return schemagen.json_schema(Outer, title="outer", schema_id="https://example.org/o.json")


def test_schema_is_valid_draft_2020_12(schema: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == schemagen.DRAFT
    assert schema["$id"] == "https://example.org/o.json"
    assert schema["title"] == "outer"


def test_scalars_literals_and_optionals(schema: dict) -> None:
    props = schema["properties"]
    assert props["name"] == {"description": "the name", "type": "string"}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["enabled"] == {"type": "boolean", "default": True}
    assert props["note"] == {"type": ["string", "null"], "default": None}
    assert props["mode"] == {"enum": ["fast", "slow"], "default": "fast"}
    assert props["colour"] == {"enum": ["red", "blue"], "default": "red"}


def test_tuples_mappings_and_paths(schema: dict) -> None:
    props = schema["properties"]
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["pair"]["items"] is False
    assert props["pair"]["default"] == [1, "a"]
    assert props["extra"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "default": {},
    }
    assert props["where-to"] == {"type": "string", "default": "out"}


def test_nested_dataclasses_go_to_defs(schema: dict) -> None:
    props = schema["properties"]
    assert props["inner"] == {"$ref": "#/$defs/Inner"}
    assert props["maybe_inner"]["anyOf"] == [{"$ref": "#/$defs/Inner"}, {"type": "null"}]
    inner = schema["$defs"]["Inner"]
    assert inner["description"] == "A nested part."
    assert inner["required"] == ["size"]
    assert inner["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "default": [],
    }


def test_keys_required_internal_and_overrides(schema: dict) -> None:
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "inner"]
    assert "derived" not in schema["properties"]
    assert "where" not in schema["properties"]
    assert schema["properties"]["spelled"] == {"type": "string", "default": "a b"}
    assert schema["properties"]["shaped"]["anyOf"] == [
        {"type": "string"},
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Inner"}]}},
    ]


def test_documents_validate_against_it(schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    good = {"name": "x", "inner": {"size": 3, "tags": ["a"]}, "pair": [2, "b"], "note": None}
    assert list(validator.iter_errors(good)) == []
    bad = {"name": 1, "inner": {"size": "3"}, "mode": "medium", "typo": True, "pair": [1]}
    messages = sorted(e.message for e in validator.iter_errors(bad))
    assert len(messages) == 5, messages
    assert any("'typo' was unexpected" in m for m in messages)
    assert any("'medium' is not one of" in m for m in messages)


class Opaque:
    pass


@dataclass(frozen=True)
class Holder:
    thing: Opaque


def test_type_overrides_and_unknown_types() -> None:
    with pytest.raises(schemagen.SchemaError, match="no JSON Schema"):
        schemagen.json_schema(Holder)
    out = schemagen.json_schema(Holder, overrides={Opaque: {"type": "string", "pattern": "^o"}})
    assert out["properties"]["thing"] == {"type": "string", "pattern": "^o"}
    with pytest.raises(schemagen.SchemaError, match="not a dataclass"):
        schemagen.json_schema(Opaque)


def test_type_schema_of_a_type_form() -> None:
    assert schemagen.type_schema(str | float) == {"type": ["string", "number"]}
    assert schemagen.type_schema(tuple[int, ...]) == {"type": "array", "items": {"type": "integer"}}
    with pytest.raises(schemagen.SchemaError, match="holds dataclasses"):
        schemagen.type_schema(Inner)


def test_field_helpers_read_the_metadata() -> None:
    fields = {f.name: f for f in schemagen.document_fields(Outer)}
    assert "derived" not in fields
    assert schemagen.field_key(fields["where"]) == "where-to"
    assert schemagen.field_doc(fields["name"]) == "the name"
    assert schemagen.field_is_required(fields["name"])
    assert not schemagen.field_is_required(fields["spelled"])
    assert schemagen.field_default(fields["spelled"]) == "a b"
