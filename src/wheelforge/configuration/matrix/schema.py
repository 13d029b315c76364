"""matrix.yaml's JSON Schema and docs/matrix.md's key tables, both generated from the model in
configuration/matrix/model.py (the habit of scikit-build-core's settings/json_schema.py).

Regenerate both after changing a key::

    python -m wheelforge.configuration.matrix.schema

tests/unit/test_matrix_schema.py fails when the shipped schema or the docs tables drift.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import typing
from importlib import resources
from pathlib import Path
from typing import Any

from wheelforge.configuration.matrix import keys, model
from wheelforge.foundation import readers, schemagen, writers

SCHEMA_FILE = "matrix.schema.json"
TITLE = "wheelforge matrix.yaml"
# The key tables in docs/matrix.md, by the name in their markers.
SECTIONS: dict[str, type] = {
    "top": model.Matrix,
    "package": model.PackageConfig,
    "extension": model.ExtensionConfig,
    "sources": model.SourceSpec,
    "headers": model.HeaderLibraryConfig,
    "generate": model.GenerateStep,
    "tests": model.TestsConfig,
    "variants": model.WheelVariantsConfig,
}
_MARKERS = re.compile(
    r"(<!-- keys:(?P<name>[a-z]+) .*?-->\n)(?P<body>.*?)(<!-- /keys:(?P=name) -->)", re.DOTALL
)


def matrix_schema() -> dict[str, Any]:
    out = schemagen.json_schema(model.Matrix, title=TITLE)
    out["$defs"]["ArchList"] = {
        "description": "arch list, TORCH_CUDA_ARCH_LIST's grammar: '7.5 8.0 9.0a 12.0+PTX', a list of entries, or torch's names (Hopper)",
        **schemagen.type_schema(keys.ARCH_LIST),
    }
    out["$defs"] = dict(sorted(out["$defs"].items()))
    return out


def schema_text() -> str:
    return json.dumps(matrix_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_text() -> str:
    """The schema in the installed package (what editors and the drift test read)."""
    return resources.files("wheelforge").joinpath("data").joinpath(SCHEMA_FILE).read_text("utf-8")


# How docs/matrix.md says a list by its items' type (a field's ``words`` says anything else).
_LIST_WORDS: dict[Any, str] = {Path: "list of folders", str: "list of strings"}


def _words(field: dataclasses.Field[Any], hint: Any) -> str:
    if "words" in field.metadata:
        return str(field.metadata["words"])
    if typing.get_origin(hint) is typing.Literal:
        return " or ".join(f"`{v}`" for v in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        item, *more = typing.get_args(hint)
        if more == [Ellipsis] and item in _LIST_WORDS:
            return _LIST_WORDS[item]
    return {bool: "bool"}.get(hint, "string")


def _default(field: dataclasses.Field[Any]) -> str:
    if "default_words" in field.metadata:
        return str(field.metadata["default_words"])
    value = schemagen.field_default(field)
    if value is dataclasses.MISSING or value is None or value == "":
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`"
    return f"`{json.dumps(schemagen._jsonable(value))}`"


def key_table(cls: type) -> str:
    """The markdown table of one mapping's keys."""
    hints = typing.get_type_hints(cls)
    rows = ["| key | required | type | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for field in schemagen.document_fields(cls):
        required = "yes" if schemagen.field_is_required(field) else "no"
        rows.append(
            f"| `{schemagen.field_key(field)}` | {required} | {_words(field, hints[field.name])}"
            f" | {_default(field)} | {schemagen.field_doc(field)} |"
        )
    return "\n".join(rows) + "\n"


def render_docs(text: str) -> str:
    """*text* (docs/matrix.md) with every marked key table regenerated."""

    def table(match: re.Match[str]) -> str:
        return match[1] + key_table(SECTIONS[match["name"]]) + match[4]

    return _MARKERS.sub(table, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wheelforge.configuration.matrix.schema")
    parser.add_argument("--docs", type=Path, default=Path(__file__).parents[4] / "docs/matrix.md")
    args = parser.parse_args(argv)
    target = Path(__file__).parents[2] / "data" / SCHEMA_FILE
    writers.write_atomic(target, schema_text())
    print(f"wrote {target}")
    if args.docs.is_file():
        text = readers.read_text(args.docs, cap=readers.CONFIG_CAP)
        writers.write_atomic(args.docs, render_docs(text))
        print(f"wrote the key tables of {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
