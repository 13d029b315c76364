"""``wheelforge matrix``'s table: the variants a matrix expands to (its --json and --github
documents: documents/variants_schema.py). Reads result data; decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from wheelforge.configuration.matrix.model import Matrix
    from wheelforge.planning.variants import Variant


def variants_table(
    variants: Sequence[Variant],
    matrix: Matrix,
    out_dir: Path | None = None,
    *,
    versions: Sequence[str],
) -> Table:
    """Fits 80 columns: the toolkit is named by version (``wheelforge toolkit list`` says where
    it is), and the arch list wraps between archs, never inside one. With an index folder per
    CUDA release (cuda-index), the folder each wheel goes to, below the output folder.
    *versions*: each variant's wheel version (planning/plan.wheel_version)."""
    table = Table(title=f"variants of {matrix.path}", title_justify="left")
    folders = any(v.index for v in variants)
    columns = ("id", "arch set", "archs", "CUDA", "wheel version", *(("index",) if folders else ()))
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column in ("id", "CUDA"))
    for v, plain in zip(variants, versions, strict=True):
        version = f"{plain} (variant {v.variant_label})" if v.variant_label else plain
        cuda = (
            str(v.choice.toolkit.version)
            if v.choice.toolkit
            else f"{v.choice.release} (to provision)"
        )
        index = (f"{v.index}/",) if folders else ()
        table.add_row(v.id, v.arch_set.name, str(v.arch_set), cuda, version, *index)
    if folders:
        first = next(v.index for v in variants if v.index)
        where = f"file://{out_dir / first}" if out_dir else f"<output folder>/{first}"
        table.caption = (
            f"each index folder is a package index: pip install --index-url {where} "
            f"{matrix.package.name}"
        )
        table.caption_justify = "left"
    return table
