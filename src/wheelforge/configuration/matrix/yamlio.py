"""Reading YAML with line numbers: typed accessors over PyYAML's node tree that collect every
problem (with its line and a "did you mean") so a config file's errors are reported at once."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from wheelforge.foundation import schemagen
from wheelforge.foundation.diagnostics import Diagnostic
from wheelforge.foundation.errors import ConfigError, first_and_rest

MappingItems = dict[str, tuple[yaml.Node, yaml.Node]]
# libyaml's parser where PyYAML was built with it: the same nodes and line numbers, ~10x faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Errors listed in full; beyond this many, only counted ("and N more").
MAX_LISTED = 50


@dataclass
class Problems:
    """Errors found in one file; raised together as one ConfigError. Only the first
    MAX_LISTED are kept (a generated file with 400k bad keys must not print 400k lines or hold
    them in memory); the rest are counted."""

    path: Path
    display: str
    items: list[tuple[int, str]] = field(default_factory=list)
    dropped: int = 0

    @property
    def full(self) -> bool:
        return len(self.items) >= MAX_LISTED

    def add(self, node: yaml.Node | None, message: str) -> None:
        if self.full:
            self.dropped += 1
            return
        line = node.start_mark.line + 1 if node is not None else 0
        self.items.append((line, message))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        items = sorted(self.items, key=lambda item: item[0])
        lines = [
            f"{self.display}:{line}: {message}" if line else f"{self.display}: {message}"
            for line, message in items
        ]
        first, details = first_and_rest(lines, unlisted=self.dropped)
        where = tuple(
            Diagnostic(file=str(self.path), line=line or None, message=message)
            for line, message in items
        )
        raise ConfigError(first, details=details, diagnostics=where)


def load(path: Path, display: str) -> yaml.Node | None:
    """Parse *path* into a node tree; syntax errors become a ConfigError with the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{display} was not found; pass --matrix PATH or run in a folder that has one"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{display} could not be read: {exc}") from None
    try:
        return yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{display}{line}: invalid YAML: {exc.problem or exc}",
            diagnostics=(
                Diagnostic(
                    file=str(path),
                    line=mark.line + 1 if mark is not None else None,
                    message=f"invalid YAML: {exc.problem or exc}",
                ),
            ),
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{display}: invalid YAML: {exc}") from None


def key_node(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value of *key* in a mapping node (the first, if it appears twice), else None."""
    if isinstance(node, yaml.MappingNode):
        for name, value in node.value:
            if getattr(name, "value", None) == key:
                return value  # type: ignore[no-any-return]
    return None


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag == "tag:yaml.org,2002:null":
        return "empty"
    return f"'{node.value}'"


def mapping(
    node: yaml.Node, problems: Problems, where: str, allowed: Iterable[str]
) -> MappingItems | None:
    """The keys of a mapping node; unknown keys are problems with a suggestion."""
    if not isinstance(node, yaml.MappingNode):
        problems.add(node, f"{where} must be a mapping, got {_kind(node)}")
        return None
    allowed = list(allowed)
    known = set(allowed)  # a set: arch-sets passes its own keys, 300k of them in stress tests
    items: MappingItems = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str):
            problems.add(key_node, f"{where}: keys must be strings")
            continue
        if key in items:
            problems.add(key_node, f"{where}: key '{key}' appears twice")
            continue
        if key not in known:
            close = difflib.get_close_matches(key, allowed, n=1) if not problems.full else []
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(allowed)}"
            problems.add(key_node, f"{where}: unknown key '{key}'; {hint}")
            continue
        items[key] = (key_node, value_node)
    return items


def scalar(node: yaml.Node, problems: Problems, where: str) -> str | None:
    """A string (numbers are taken as written, so ``version: 1.10`` stays '1.10')."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:null":
        problems.add(node, f"{where} must be a string, got {_kind(node)}")
        return None
    return str(node.value)


def boolean(node: yaml.Node, problems: Problems, where: str) -> bool | None:
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:bool":
        return bool(yaml.safe_load(node.value))
    problems.add(node, f"{where} must be true or false, got {_kind(node)}")
    return None


def string_list(node: yaml.Node, problems: Problems, where: str) -> list[tuple[yaml.Node, str]]:
    """A list of strings; a single string counts as a list of one."""
    if isinstance(node, yaml.ScalarNode) and node.tag != "tag:yaml.org,2002:null":
        return [(node, str(node.value))]
    if not isinstance(node, yaml.SequenceNode):
        problems.add(node, f"{where} must be a list of strings, got {_kind(node)}")
        return []
    out = []
    for i, item in enumerate(node.value):
        value = scalar(item, problems, f"{where}[{i}]")
        if value is not None:
            out.append((item, value))
    return out


def iter_items(items: MappingItems) -> Iterator[tuple[str, yaml.Node, yaml.Node]]:
    for key, (key_node, value_node) in items.items():
        yield key, key_node, value_node


T = TypeVar("T")
# A key's reader: its value node and its name in messages ("package.version") → the value, or
# None after recording a problem.
KeyReader = Callable[[yaml.Node, str], Any]


@dataclass(frozen=True)
class Section:
    """One mapping read by the model: the values read (by attribute) and the key nodes."""

    values: dict[str, Any]
    items: MappingItems


class ModelReader:
    """Reads mappings by the fields of a model (their keys, which are required, their
    defaults: foundation/schemagen's metadata); subclasses give each key's value reader."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def section(
        self,
        node: yaml.Node,
        model: type,
        where: str,
        readers: Mapping[str, KeyReader],
        prefix: str | None = None,
    ) -> Section | None:
        """Read the mapping *node* by the fields of *model*: unknown keys and missing required
        ones are problems, each present key goes through its reader."""
        fields = schemagen.document_fields(model)
        items = mapping(node, self.problems, where, [schemagen.field_key(f) for f in fields])
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

    def scalar(self, node: yaml.Node, where: str) -> str | None:
        return scalar(node, self.problems, where)

    def strings(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        return tuple(v for _, v in string_list(node, self.problems, where))

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
            for item, value in string_list(node, self.problems, where):
                converted = convert(item, value, where)
                if converted is not None:
                    out.append(converted)
            return tuple(out)

        return read
