"""Reading YAML with line numbers: typed accessors over PyYAML's node tree that collect every
problem (with its line and a "did you mean") so a config file's errors are reported at once."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from wheelforge.foundation import readers
from wheelforge.foundation.diagnostics import Diagnostic
from wheelforge.foundation.errors import ConfigError

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
        """One error: its line; several: each its own line in the file's line order, and a
        last line that counts them (log.error prints every one as ``error: ...``)."""
        if not self.items:
            return
        items = sorted(self.items, key=lambda item: item[0])  # stable: one line's in order
        lines = tuple(
            f"{self.display}:{line}: {message}" if line else f"{self.display}: {message}"
            for line, message in items
        )
        where = tuple(
            Diagnostic(file=str(self.path), line=line or None, message=message)
            for line, message in items
        )
        if len(lines) == 1 and not self.dropped:
            raise ConfigError(lines[0], diagnostics=where)
        total = len(lines) + self.dropped
        message = (
            f"{self.display}: {total} problems, the first {len(lines)} above; fix these first"
            if self.dropped
            else f"{self.display}: {total} problems, above in line order"
        )
        raise ConfigError(message, details="\n".join(lines), diagnostics=where, problems=lines)


def load(path: Path, display: str) -> yaml.Node | None:
    """Parse *path* into a node tree; syntax errors become a ConfigError with the line."""
    try:
        text = readers.read_text(path, cap=readers.CONFIG_CAP, display=display)
    except FileNotFoundError:
        raise ConfigError(
            f"{display} was not found; pass --matrix PATH or run in a folder that has one"
        ) from None
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
