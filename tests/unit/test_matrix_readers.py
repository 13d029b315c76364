"""Every key of the matrix model has a reader: a field added to configuration/matrix/model.py
(with its schema and docs regenerated) fails here until matrix.yaml can say it, instead of
passing every test and crashing on the first matrix that writes it.

The walk starts at ``Matrix`` and follows every nested section, so a new section is covered
too. Each key is written into a real matrix.yaml and loaded: a good value loads, a value of
the wrong kind is one ConfigError that names the key (never another exception)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.load import MatrixReader, load_matrix
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.matrix.modelreader import MissingReader, ModelReader
from wheelforge.foundation import schemagen
from wheelforge.foundation.document import to_document
from wheelforge.foundation.errors import ConfigError

from .conftest import GOOD_MATRIX

Project = Callable[[str], Path]

# A good YAML value for each key without a default that can be written as it is (required keys,
# keys whose default is null or computed). A key missing here fails
# test_every_key_has_a_yaml_value; nested sections get their smallest good mapping.
EXAMPLES: dict[str, Any] = {
    "torch": ">=2.10",
    "arch-sets": {"default": "8.0 9.0+PTX"},
    "extension.limited-api": "3.9",
    "extensions[].limited-api": "3",
    "package.name": "demo-ops",
    "package.version": "1.2.0",
    "package.license": "MIT",
    "package.urls": {"Homepage": "https://example.org/demo"},
    "package.home-page": "https://example.org/demo",
    "package.download-url": "https://example.org/demo/1.2.0.tar.gz",
    "package.requires-python": ">=3.10",
    "package.optional-dependencies": {"test": ["pytest>=8"]},
    "package.readme": "csrc/ops.h",
    "package.pyproject": False,
    "package.packages": ["demo_ops"],
    "extension.name": "demo_ops._C",
    "extension.sources": ["csrc/*.cpp", "csrc/*.cu"],
    "extension.include-dirs": ["csrc"],
    "extension.library-dirs": ["csrc"],
    "extension.sources[].files": "csrc/*.cu",
    "extension.sources[].archs": "9.0a",
    "extension.archs": "8.0 9.0a",
    "extension.torch-target": "2.10",
    "extension.size-budget": "20MiB",
    "extensions[].name": "demo_ops._C",
    "extensions[].sources": ["csrc/*.cpp", "csrc/*.cu"],
    "extensions[].include-dirs": ["csrc"],
    "extensions[].library-dirs": ["csrc"],
    "extensions[].size-budget": "20MiB",
    "extensions[].sources[].files": "csrc/*.cu",
    "extensions[].sources[].archs": "9.0a",
    "extensions[].archs": "8.0 9.0a",
    "extensions[].torch-target": "2.11",
    "header-libraries[].name": "cutlass",
    "header-libraries[].path": "csrc",
    "header-libraries[].include": ["."],
    "header-libraries[].pypi": "nvidia-cutlass==4.2.0.0",
    "header-libraries[].version": "4.2.0",
    "generate[].name": "kernels",
    "generate[].run": ["{python}", "{project}/gen.py", "{out}"],
    "generate[].inputs": ["csrc/*.cpp"],
    "generate[].outputs": ["k.cu"],
    "tests.path": "demo_ops",
    "tests.torch": ["2.13.0"],
    "wheel-variants.null": "default",
    "memory-limit": "24GiB",
}
# Keys a section's smallest good mapping needs though the model cannot say so: a header library
# comes from one place (path or pypi), and its default include folder ('include') must exist.
NEEDED = {"header-libraries[].path", "header-libraries[].include"}
# Keys that stand in for another: writing one of them drops the other from GOOD_MATRIX (a matrix
# writes 'extension' or 'extensions', never both), and a header library written with pypi has
# no path.
REPLACES = {"extensions": "extension", "header-libraries[].pypi": "header-libraries[].path"}


@dataclasses.dataclass(frozen=True)
class Section:
    model: type
    path: tuple[str | int, ...]  # where its mapping is in matrix.yaml; 0: the first list item

    @property
    def name(self) -> str:
        return ".".join(p if isinstance(p, str) else "[]" for p in self.path).replace(".[]", "[]")


def _dataclasses_in(tp: Any) -> Iterator[tuple[type, bool]]:
    """The dataclasses a type form holds, each with whether it sits in a list."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        yield tp, False
        return
    for arg in typing.get_args(tp):
        if arg is Ellipsis:
            continue
        for found, listed in _dataclasses_in(arg):
            yield found, listed or typing.get_origin(tp) is tuple


def sections() -> list[Section]:
    """Matrix and every section nested in it, with the path of its mapping."""
    out, todo = [], [Section(Matrix, ())]
    while todo:
        section = todo.pop(0)
        out.append(section)
        hints = typing.get_type_hints(section.model)
        for f in schemagen.document_fields(section.model):
            # The key's form in YAML, as the schema has it: a hand-written schema holds no
            # section; TorchSpec or ArchSet are values read from strings, not mappings.
            shape = f.metadata.get("schema", hints[f.name])
            for model, listed in _dataclasses_in(None if isinstance(shape, dict) else shape):
                key = schemagen.field_key(f)
                todo.append(Section(model, (*section.path, key, *((0,) if listed else ()))))
    return out


SECTIONS = sections()
KEYS = [(section, f) for section in SECTIONS for f in schemagen.document_fields(section.model)]


def _dotted(section: Section, f: dataclasses.Field[Any]) -> str:
    key = schemagen.field_key(f)
    return f"{section.name}.{key}" if section.path else key


def _by_path(path: tuple[str | int, ...]) -> Section | None:
    return next((s for s in SECTIONS if s.path == path), None)


def value_of(section: Section, f: dataclasses.Field[Any]) -> Any:
    """A good YAML value for the key: its example, a section's smallest good mapping, or its
    default as written."""
    dotted = _dotted(section, f)
    if dotted in EXAMPLES:
        return EXAMPLES[dotted]
    key = schemagen.field_key(f)
    nested = _by_path((*section.path, key)) or _by_path((*section.path, key, 0))
    if nested is not None:
        mapping = smallest(nested)
        return [mapping] if nested.path[-1] == 0 else mapping
    default = schemagen.field_default(f)
    if default is dataclasses.MISSING or default is None:
        pytest.fail(f"no YAML value for matrix key '{dotted}': add one to EXAMPLES")
    return to_document(default)


def smallest(section: Section) -> dict[str, Any]:
    """The section's keys that are required, have no default or are NEEDED, each with a good
    value."""
    return {
        schemagen.field_key(f): value_of(section, f)
        for f in schemagen.document_fields(section.model)
        if schemagen.field_is_required(f)
        or schemagen.field_default(f) is dataclasses.MISSING
        or _dotted(section, f) in NEEDED
    }


def matrix_with(section: Section, key: str, value: Any) -> str:
    """GOOD_MATRIX with *key* of *section* set to *value* (the sections on the way made)."""
    document = yaml.safe_load(GOOD_MATRIX)
    node: Any = document
    for i, step in enumerate(section.path):
        if isinstance(step, int):  # the list item, made with its list
            node = node[step]
            continue
        below = section.path[i + 1] if i + 1 < len(section.path) else None
        if isinstance(below, int):
            item = _by_path(section.path[: i + 2])
            assert item is not None
            node[step] = [smallest(item)]
        elif step not in node:
            here = _by_path(section.path[: i + 1])
            assert here is not None
            node[step] = smallest(here)
        node = node[step]
    node[key] = value
    dotted = f"{section.name}.{key}" if section.path else key
    replaced = REPLACES.get(dotted) or REPLACES.get(str(section.path[0]) if section.path else "")
    if replaced is not None:
        *parents, last = replaced.replace("[]", "").split(".")
        (node if parents else document).pop(last, None)
    return yaml.safe_dump(document, sort_keys=False)


def _id(item: tuple[Section, dataclasses.Field[Any]]) -> str:
    return _dotted(*item)


def test_the_walk_finds_every_section() -> None:
    names = {s.model.__name__ for s in SECTIONS}
    assert names == {
        "Matrix",
        "PackageConfig",
        "ExtensionConfig",
        "SourceSpec",
        "TestsConfig",
        "WheelVariantsConfig",
        "HeaderLibraryConfig",
        "GenerateStep",
    }


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.model.__name__)
def test_every_matrix_field_has_a_reader(section: Section, tmp_path: Path) -> None:
    reader = MatrixReader(tmp_path / "matrix.yaml", "matrix.yaml")
    readers = reader.field_readers(section.model)  # MissingReader names the field
    assert set(readers) == {f.name for f in schemagen.document_fields(section.model)}


@pytest.mark.parametrize("item", KEYS, ids=_id)
def test_every_key_reads_a_good_yaml_value(
    item: tuple[Section, dataclasses.Field[Any]], project: Project
) -> None:
    section, f = item
    text = matrix_with(section, schemagen.field_key(f), value_of(section, f))
    load_matrix(project(text))


@pytest.mark.parametrize("item", KEYS, ids=_id)
def test_a_bad_value_is_one_config_error_naming_the_key(
    item: tuple[Section, dataclasses.Field[Any]], project: Project
) -> None:
    section, f = item
    key = schemagen.field_key(f)
    text = matrix_with(section, key, {"not": {"a": "value"}})
    with pytest.raises(ConfigError) as raised:
        load_matrix(project(text))
    assert key in f"{raised.value.message}\n{raised.value.details}"


def test_a_field_without_a_reader_is_named(tmp_path: Path) -> None:
    """The failure a new key without a reader gives, on a model planted here."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Planted:
        jobs: int = dataclasses.field(default=4, metadata={"doc": "jobs", "key": "max-jobs"})
        name: str = dataclasses.field(default="", metadata={"doc": "a plain string"})

    reader = ModelReader(yamlio.Problems(tmp_path / "m.yaml", "m.yaml"), tmp_path)
    message = r"matrix key 'max-jobs' \(Planted.jobs: int\) has no reader"
    with pytest.raises(MissingReader, match=message):
        reader.field_readers(Planted)
    node = yaml.compose("name: x\n")
    with pytest.raises(MissingReader):  # before a single key is read
        reader.section(node, Planted, "planted")
