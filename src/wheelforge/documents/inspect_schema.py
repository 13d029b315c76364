"""``wheelforge inspect --json``: the fatbin entries of every ELF file found, and for PEP 825
variant wheels (experimental) their variant properties checked against the binaries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.loadson import LoadsOn
from wheelforge.documents.kinds import DocumentKind, doc
from wheelforge.foundation.document import schema_version
from wheelforge.packaging.wheel_variants import VariantCheck

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class BinaryDoc:
    """An ELF file and its fatbin entries (the build report's binaries are written the same)."""

    path: str = field(metadata=doc("a file, or a wheel member written x.whl!pkg/_C.abi3.so"))
    size: int = field(metadata=doc("bytes (a wheel member: uncompressed)"))
    fatbins: tuple[FatbinEntry, ...]
    loads_on: LoadsOn | None = field(
        default=None,
        metadata=doc(
            "per GPU generation: SASS, PTX JIT or no kernel image; the PTX ISA and the driver "
            "its JIT needs; null: no CUDA code"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class InspectDocument:
    """wheelforge inspect --json."""

    schema_version: int = schema_version(VERSION)
    files: tuple[BinaryDoc, ...]
    variants: tuple[VariantCheck, ...] | None = field(
        default=None,
        metadata=doc(
            "PEP 825 variant wheels (experimental): variant.json against the binaries; "
            "present only when a variant wheel was inspected",
            omit_if_none=True,
        ),
    )


KIND = DocumentKind("inspect", InspectDocument, VERSION, "wheelforge inspect --json")


def binary_doc(binary: BinaryContents) -> BinaryDoc:
    return BinaryDoc(
        path=binary.path, size=binary.size, fatbins=binary.entries, loads_on=binary.loads_on
    )


def inspect_document(
    reports: Sequence[BinaryContents], checks: Sequence[VariantCheck] = ()
) -> InspectDocument:
    return InspectDocument(
        files=tuple(binary_doc(r) for r in reports), variants=tuple(checks) or None
    )
