"""What every JSON document wheelforge prints or writes shares: one frozen-dataclass model per
document, written by foundation/document.to_document and described by a JSON Schema generated
from the same model (foundation/schemagen.py), shipped as ``wheelforge/data/<name>.schema.json``
and kept current by tests/unit/test_documents.py. Each document starts with ``schema_version``,
bumped when a key changes meaning or goes away (adding keys is compatible).

Regenerate every shipped schema after changing a model: ``python -m
wheelforge.documents.schemas``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from wheelforge.foundation.document import iter_json, to_document
from wheelforge.foundation.schemagen import json_schema

Version2 = tuple[int, int]


def doc(text: str, **more: Any) -> dict[str, Any]:
    """Field metadata for schemagen: the key's description (and more, e.g. a fixed schema)."""
    return {"doc": text, **more}


def version_text(version: Version2 | None) -> str | None:
    """``(2, 10)`` → ``"2.10"``: how documents write a torch or Python version."""
    return f"{version[0]}.{version[1]}" if version else None


@dataclass(frozen=True)
class DocumentKind:
    """One JSON output: its name (its schema file ``<name>.schema.json`` and ``$id``
    ``wheelforge/<name>/<version>``), its model and the version its ``schema_version`` says."""

    name: str
    model: type
    version: int
    title: str

    @property
    def schema_file(self) -> str:
        return f"{self.name}.schema.json"

    def schema(self) -> dict[str, Any]:
        """The JSON Schema, generated from the model."""
        return json_schema(
            self.model, title=self.title, schema_id=f"wheelforge/{self.name}/{self.version}"
        )

    def schema_text(self) -> str:
        return json.dumps(self.schema(), indent=2) + "\n"

    def packaged_schema(self) -> dict[str, Any]:
        """The schema as shipped in the package (wheelforge/data)."""
        data = resources.files("wheelforge").joinpath("data").joinpath(self.schema_file)
        loaded: dict[str, Any] = json.loads(data.read_text(encoding="utf-8"))
        return loaded


def document_text(document: object) -> str:
    """A document as the JSON text wheelforge writes: indented, one trailing newline."""
    return json.dumps(to_document(document), indent=2) + "\n"


def echo(document: object) -> None:
    """Print a document on stdout (``--json``), streamed: the same text as document_text, never
    held whole (a million fatbin entries are 280 MB of it). sys.stdout, not click.echo: the
    same text, and ``inspect --json``'s quick path loads no click (cli/inspect.py)."""
    pieces: list[str] = []
    size = 0
    for piece in iter_json(document):
        pieces.append(piece)
        size += len(piece)
        if size > 1 << 16:
            sys.stdout.write("".join(pieces))
            pieces, size = [], 0
    sys.stdout.write("".join(pieces) + "\n")
    sys.stdout.flush()
