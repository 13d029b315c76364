"""``wheelforge matrix --json``: the variants a matrix expands to; and ``--github``'s GitHub
Actions ``strategy.matrix``, which is GitHub's format (no ``schema_version``: every top-level
key there would become a matrix dimension)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wheelforge.documents.kinds import DocumentKind, doc
from wheelforge.foundation.document import schema_version
from wheelforge.planning.variants import Variant

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class VariantDoc:
    id: str = field(metadata=doc("what `build --only` takes: default-cu130"))
    arch_set: str = field(metadata=doc("the arch set's name"))
    archs: str = field(metadata=doc('as written in matrix.yaml: "8.0 9.0a 12.0+PTX"'))
    cuda: str = field(metadata=doc("the CUDA release: 13.0"))
    provisioned: bool = field(metadata=doc("the toolkit is to be provisioned (none was found)"))
    local_label: str | None = field(
        metadata=doc("the wheel's local version label; null: the only wheel of its folder")
    )
    index: str | None = field(
        default=None,
        metadata=doc(
            "the index folder its wheel goes to inside the output folder (cuda-index): cu124; "
            "null: the output folder itself"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class VariantsDocument:
    """wheelforge matrix --json."""

    schema_version: int = schema_version(VERSION)
    variants: tuple[VariantDoc, ...]


KIND = DocumentKind("variants", VariantsDocument, VERSION, "wheelforge matrix --json")


@dataclass(frozen=True, kw_only=True)
class GithubJob:
    variant: str
    archs: str
    cuda: str
    index: str  # the index folder (cu124), "" for the output folder itself


@dataclass(frozen=True, kw_only=True)
class GithubMatrix:
    """A GitHub Actions ``strategy.matrix``: one job per variant, each running
    ``wheelforge build --only ${{ matrix.variant }}``."""

    include: tuple[GithubJob, ...]


def variants_document(variants: Sequence[Variant]) -> VariantsDocument:
    return VariantsDocument(
        variants=tuple(
            VariantDoc(
                id=v.id,
                arch_set=v.arch_set.name,
                archs=str(v.arch_set),
                cuda=v.choice.release,
                provisioned=v.choice.toolkit is None,
                local_label=v.local_label,
                index=v.index,
            )
            for v in variants
        )
    )


def github_matrix(variants: Sequence[Variant]) -> GithubMatrix:
    return GithubMatrix(
        include=tuple(
            GithubJob(
                variant=v.id, archs=str(v.arch_set), cuda=v.choice.release, index=v.index or ""
            )
            for v in variants
        )
    )
