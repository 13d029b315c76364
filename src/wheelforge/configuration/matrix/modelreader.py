"""Reading a YAML mapping by the fields of a model (configuration/matrix/model.py): which keys
exist, which are required, their defaults, and a reader for every field.

A field of a plain shape gets its reader derived from its type: a string, a bool, a Literal of
strings, a list of strings, a nested section (a dataclass). A field whose conversion is special
(a path that must exist, an arch list, a version, a hand-written schema) gets an explicit
reader from the subclass (``readers``). Every field of a section must have one or the other
before a single key is read (``field_readers``), so a key added to the model without a reader
fails every load, not only a matrix that writes it (the habit of scikit-build-core's settings
model, whose readers follow the model's types)."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from packaging.requirements import InvalidRequirement

from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.keys import Scalar, Scalars, Strings
from wheelforge.foundation import fsutil, numbers, schemagen
from wheelforge.foundation.errors import ConfigError

T = TypeVar("T")
# A key's reader: its value node and its name in messages ("package.version") → the value, or
# None after recording a problem.
KeyReader = Callable[[yaml.Node, str], Any]

# The YAML shapes read as one string (numbers as written) and as a list of strings (a single
# string counts as a list of one).
_SCALAR_FORMS: tuple[Any, ...] = (str, Scalar)
_STRINGS_FORMS: tuple[Any, ...] = (tuple[str, ...], Strings, Scalars)


class MissingReader(TypeError):
    """A field of the model that no reader reads: a bug in wheelforge, caught by every test that
    loads a matrix (and named by tests/unit/test_matrix_readers.py)."""

    def __init__(self, model: type, field: dataclasses.Field[Any], hint: Any) -> None:
        super().__init__(
            f"matrix key '{schemagen.field_key(field)}' ({model.__name__}.{field.name}: "
            f"{_type_name(hint)}) has no reader: its type is none the readers derive (a string, "
            "a bool, a Literal of strings, a list of strings, a section) or its schema is "
            "written by hand; give it an explicit reader in configuration/matrix/load.py"
        )


class StaleReader(TypeError):
    """An explicit reader for a field the model does not have (renamed or removed)."""

    def __init__(self, model: type, names: set[str]) -> None:
        super().__init__(
            f"readers for {model.__name__} name no field of it: {', '.join(sorted(names))}"
        )


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


@functools.cache
def _hints(model: type) -> dict[str, Any]:
    return typing.get_type_hints(model)


@dataclass(frozen=True)
class Section:
    """One mapping read by the model: the values read (by attribute) and the key nodes."""

    values: dict[str, Any]
    items: yamlio.MappingItems


class ModelReader:
    """Reads mappings by the fields of a model; subclasses give the explicit readers."""

    def __init__(self, problems: yamlio.Problems, root: Path) -> None:
        self.problems = problems
        self.root = root  # the folder of matrix.yaml: relative paths start here

    def readers(self, model: type) -> Mapping[str, KeyReader]:
        """The explicit readers of *model*'s fields, by attribute: those whose conversion is
        special. Every other field's reader is derived from its type."""
        del model  # the base has none
        return {}

    def field_readers(self, model: type) -> dict[str, KeyReader]:
        """A reader for every key of *model*: explicit, else derived; MissingReader if a field
        has neither, StaleReader if an explicit one names no field."""
        explicit = self.readers(model)
        fields = schemagen.document_fields(model)
        stale = set(explicit) - {f.name for f in fields}
        if stale:
            raise StaleReader(model, stale)
        out: dict[str, KeyReader] = {}
        for f in fields:
            reader = explicit[f.name] if f.name in explicit else self.derived(model, f)
            if reader is None:
                raise MissingReader(model, f, _hints(model)[f.name])
            out[f.name] = reader
        return out

    def derived(self, model: type, field: dataclasses.Field[Any]) -> KeyReader | None:
        """The reader a field's type implies, or None when its conversion is special: a schema
        written by hand (a pattern, an enum, alternatives), or a type with checks of its own."""
        shape = field.metadata.get("schema")
        if isinstance(shape, Mapping):
            return None
        kind = schemagen.without_none(_hints(model)[field.name])
        form = kind if shape is None else schemagen.without_none(shape)
        if kind is str and form in _SCALAR_FORMS:
            return self.scalar
        if kind is bool and form is bool:
            return self.boolean
        if typing.get_origin(kind) is Literal and shape is None:
            values = typing.get_args(kind)
            if all(isinstance(v, str) for v in values):
                return self.choice(values)
            return None
        if kind == tuple[str, ...] and form in _STRINGS_FORMS:
            return self.strings
        if isinstance(kind, type) and dataclasses.is_dataclass(kind) and form is kind:
            return self.nested(kind)
        return None

    def section(
        self, node: yaml.Node, model: type, where: str, prefix: str | None = None
    ) -> Section | None:
        """Read the mapping *node* by the fields of *model*: unknown keys and missing required
        ones are problems, each present key goes through its reader."""
        readers = self.field_readers(model)
        fields = schemagen.document_fields(model)
        items = yamlio.mapping(node, self.problems, where, [schemagen.field_key(f) for f in fields])
        if items is None:
            return None
        for f in fields:
            if schemagen.field_is_required(f) and schemagen.field_key(f) not in items:
                self.problems.add(node, f"{where} needs '{schemagen.field_key(f)}'")
        prefix = f"{where}." if prefix is None else prefix
        values = {}
        for f in fields:
            key = schemagen.field_key(f)
            if key in items:
                values[f.name] = readers[f.name](items[key][1], prefix + key)
        return Section(values, items)

    @staticmethod
    def build(model: type[T], section: Section | None, **extra: Any) -> T | None:
        """*model* from what was read, or None when a required key is missing or bad; keys that
        are absent or bad take the model's defaults (the problem is already recorded)."""
        if section is None:
            return None
        values = {k: v for k, v in section.values.items() if v is not None}
        for f in schemagen.document_fields(model):
            if schemagen.field_is_required(f) and f.name not in values:
                return None
        return model(**values, **extra)

    # -- derived readers ----------------------------------------------------------------------

    def scalar(self, node: yaml.Node, where: str) -> str | None:
        return yamlio.scalar(node, self.problems, where)

    def boolean(self, node: yaml.Node, where: str) -> bool | None:
        return yamlio.boolean(node, self.problems, where)

    def strings(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        return tuple(v for _, v in yamlio.string_list(node, self.problems, where))

    def choice(self, values: tuple[str, ...]) -> Callable[[yaml.Node, str], str | None]:
        """One of *values*: "<where> must be 'a' or 'b', got 'c'"."""
        quoted = [f"'{v}'" for v in values]
        words = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"

        def read(node: yaml.Node, where: str) -> str | None:
            value = self.scalar(node, where)
            if value is not None and value not in values:
                self.problems.add(node, f"{where} must be {words}, got '{value}'")
                return None
            return value

        return read

    def nested(self, model: type[T]) -> Callable[[yaml.Node, str], T | None]:
        """A section of its own (a mapping read by *model*'s fields)."""
        return lambda node, where: self.build(model, self.section(node, model, where))

    def section_list(self, model: type[T]) -> Callable[[yaml.Node, str], tuple[T, ...] | None]:
        """A list of sections (mappings read by *model*'s fields), each named ``where[i]``;
        the good ones, or None when the value is not a list."""

        def read(node: yaml.Node, where: str) -> tuple[T, ...] | None:
            if not isinstance(node, yaml.SequenceNode):
                self.problems.add(node, f"{where} must be a list of mappings")
                return None
            out = []
            for i, item in enumerate(node.value):
                built = self.build(model, self.section(item, model, f"{where}[{i}]"))
                if built is not None:
                    out.append(built)
            return tuple(out)

        return read

    # -- helpers of explicit readers ----------------------------------------------------------

    def checked_scalar(
        self, check: Callable[[str], bool], fix: str
    ) -> Callable[[yaml.Node, str], str | None]:
        """A scalar that must pass *check*; otherwise "<where> '<value>' <fix>"."""

        def read(node: yaml.Node, where: str) -> str | None:
            value = self.scalar(node, where)
            if value is not None and not check(value):
                self.problems.add(node, f"{where} '{value}' {fix}")
                return None
            return value

        return read

    def parsed(self, parse: Callable[[str, str], T]) -> Callable[[yaml.Node, str], T | None]:
        """A scalar converted by *parse* (value, where); its ConfigError is a problem here."""

        def read(node: yaml.Node, where: str) -> T | None:
            value = self.scalar(node, where)
            if value is None:
                return None
            try:
                return parse(value, where)
            except ConfigError as exc:
                self.problems.add(node, exc.message)
                return None

        return read

    def checked_list(
        self, convert: Callable[[yaml.Node, str, str], T | None]
    ) -> Callable[[yaml.Node, str], tuple[T, ...]]:
        """A list of strings, each converted by *convert* (node, value, where) or dropped."""

        def read(node: yaml.Node, where: str) -> tuple[T, ...]:
            out = []
            for item, value in yamlio.string_list(node, self.problems, where):
                converted = convert(item, value, where)
                if converted is not None:
                    out.append(converted)
            return tuple(out)

        return read

    def flag_list(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        """Strings, one per argument: ``cxx-flags: -O3 -g`` would reach the compiler as one
        argument, so a bare string with spaces is an error that says how to write it (a bare
        single flag is a list of one)."""
        if isinstance(node, yaml.ScalarNode) and len(str(node.value).split()) > 1:
            example = ", ".join(str(node.value).split())
            self.problems.add(
                node,
                (
                    f"{where} must be a list of strings, got the string '{node.value}'; write "
                    f"[{example}]"
                ),
            )
            return ()
        return self.strings(node, where)

    def folder(self, node: yaml.Node, value: str, where: str) -> Path | None:
        folder = fsutil.resolved(self.root / value)
        if not folder.is_dir():
            self.problems.add(
                node,
                (
                    f"{where}: '{value}' is not a folder (paths are relative to "
                    f"{self.problems.display})"
                ),
            )
            return None
        return folder

    def escapes(self, node: yaml.Node, path: Path, where: str) -> bool:
        """Whether *path* leads out of the project (a link to elsewhere, ``../x``): then a
        problem naming *where* and the link is recorded, since a wheel would carry it."""
        target = fsutil.escapes(path, self.root)
        if target is not None:
            self.problems.add(node, fsutil.escape_message(where, path, target, self.root))
        return target is not None

    def requirement(self, example: str) -> Callable[[yaml.Node, str, str], str | None]:
        def convert(node: yaml.Node, value: str, where: str) -> str | None:
            try:
                numbers.requirement(value)
            except InvalidRequirement:
                self.problems.add(
                    node, f"{where}: '{value}' is not a requirement; write e.g. '{example}'"
                )
                return None
            return value

        return convert
