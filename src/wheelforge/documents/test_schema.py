"""``wheelforge test --json``: every run of the payload's tests, one per torch and variant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wheelforge.documents.kinds import DocumentKind, doc
from wheelforge.foundation.document import schema_version
from wheelforge.packaging.testwheels import Outcome

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class TorchTestsDocument:
    """wheelforge test --json."""

    schema_version: int = schema_version(VERSION)
    runs: tuple[Outcome, ...] = field(
        metadata=doc("each run as its Outcome; detail: why it did not pass, else null")
    )


KIND = DocumentKind("test", TorchTestsDocument, VERSION, "wheelforge test --json")


def torch_tests_document(outcomes: Sequence[Outcome]) -> TorchTestsDocument:
    return TorchTestsDocument(runs=tuple(outcomes))
