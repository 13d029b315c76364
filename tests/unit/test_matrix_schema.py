"""matrix.yaml's JSON Schema and docs/matrix.md's key tables are generated from the model in
configuration/matrix/model.py; these tests fail when either drifts from it, and check that the
matrices this project ships and tests with are valid against the schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml

from wheelforge.configuration.matrix import schema
from wheelforge.configuration.matrix.load import load_matrix

from .conftest import GOOD_MATRIX

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "run `python -m wheelforge.configuration.matrix.schema` and commit the result"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema.shipped_schema_text()))


def test_shipped_schema_is_current() -> None:
    assert schema.shipped_schema_text() == schema.schema_text(), REGENERATE


def test_shipped_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(schema.shipped_schema_text()))


def test_docs_key_tables_are_current() -> None:
    text = (REPO / "docs" / "matrix.md").read_text(encoding="utf-8")
    assert schema.render_docs(text) == text, REGENERATE
    for name in schema.SECTIONS:
        assert f"<!-- keys:{name} " in text, f"docs/matrix.md lost the {name} key table"


def test_docs_drift_is_caught() -> None:
    text = (REPO / "docs" / "matrix.md").read_text(encoding="utf-8")
    stale = text.replace("| `module-init` | no | bool |", "| `module-init` | no | string |")
    assert stale != text
    assert schema.render_docs(stale) == text


def test_every_model_key_is_in_the_schema_and_the_docs() -> None:
    text = (REPO / "docs" / "matrix.md").read_text(encoding="utf-8")
    out = schema.matrix_schema()
    for name, cls in schema.SECTIONS.items():
        props = out["properties"] if name == "top" else out["$defs"][cls.__name__]["properties"]
        for field in schema.schemagen.document_fields(cls):
            key = schema.schemagen.field_key(field)
            assert key in props
            assert props[key]["description"]
            assert f"| `{key}` |" in text


MATRICES = {
    "good": GOOD_MATRIX,
    "arch-set-forms": GOOD_MATRIX.replace(
        'default: "8.0 9.0+PTX"', 'default: ["8.0", "9.0a"]\n  big: "Blackwell"'
    ),
    "single-arch-list": GOOD_MATRIX.replace(
        'arch-sets:\n  default: "8.0 9.0+PTX"', 'arch-sets: "Hopper"'
    ),
    "numbers-as-written": GOOD_MATRIX.replace("version: 1.2.0", "version: 1.10").replace(
        '">=2.10"', "2.10"
    ),
    "everything": GOOD_MATRIX.replace(
        "sources: [csrc/*.cpp, csrc/*.cu]",
        "sources:\n    - csrc/*.cpp\n    - {files: csrc/*.cu, archs: '9.0a'}\n"
        "  cxx-flags: [-Wall]\n  nvcc-flags: --use_fast_math\n  module-init: false",
    ).replace("summary: demo", "summary: demo\n  dependencies: [numpy>=1.26]\n  license: MIT")
    + "abi: stable\npython-abi: cp311\ncuda: ['12.9', 13.0]\n"
    + "tests:\n  path: demo_ops\n  requires: [pytest]\n  torch: ['2.13.0']\n"
    + "  command: ['{python}', '-m', 'pytest', '{path}']\n",
}


def test_the_repositorys_matrix_is_valid(validator: jsonschema.Draft202012Validator) -> None:
    document = yaml.safe_load((REPO / "matrix.yaml").read_text(encoding="utf-8"))
    assert list(validator.iter_errors(document)) == []


@pytest.mark.parametrize("name", sorted(MATRICES))
def test_test_matrices_are_valid_and_load(
    name: str, validator: jsonschema.Draft202012Validator, project: Callable[[str], Path]
) -> None:
    text = MATRICES[name]
    assert [e.message for e in validator.iter_errors(yaml.safe_load(text))] == []
    load_matrix(project(text))  # the reader agrees


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("arch-sets:", "arch-set:", "'arch-set' was unexpected"),
        ("include-dirs: [csrc]", "include-dir: [csrc]", "'include-dir' was unexpected"),
        ("summary: demo", "summary: [a, b]", "is not of type 'string'"),
        ("name: demo_ops._C", "name: demo-ops._C", "does not match"),
        ('default: "8.0 9.0+PTX"', 'Default: "8.0"', "does not match"),
        ("arch-sets:", "abi: unknown\narch-sets:", "'unknown' is not one of"),
    ],
)
def test_the_schema_rejects_what_the_reader_rejects(
    old: str, new: str, fragment: str, validator: jsonschema.Draft202012Validator
) -> None:
    text = GOOD_MATRIX.replace(old, new, 1)
    assert text != GOOD_MATRIX
    messages = [e.message for e in validator.iter_errors(yaml.safe_load(text))]
    messages += [c.message for e in validator.iter_errors(yaml.safe_load(text)) for c in e.context]
    assert any(fragment in m for m in messages), messages
