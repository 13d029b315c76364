"""Rendering of PEP 825 variant wheels (experimental): a build's variant line and the table
``wheelforge inspect`` prints for variant wheels. Reads result data; decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from wheelforge.packaging.wheel_variants import VariantCheck

if TYPE_CHECKING:  # `inspect` loads nothing of the build
    from wheelforge.running.build.results import VariantResult


def variant_summary(v: VariantResult) -> str:
    """The label and the properties read from the binaries (and the null variant, if any)."""
    null = f"; null variant {v.null_wheel.name}" if v.null_wheel else ""
    props = ", ".join(v.variant_properties)
    return f"variant {v.variant_label} (experimental, PEP 825 draft): {props}{null}"


def variant_checks_table(checks: Sequence[VariantCheck]) -> Table:
    """Variant wheels: what variant.json declares, what the binaries carry, what disagrees."""
    table = Table(title="PEP 825 variant wheels (experimental)", title_justify="left")
    for column in ("wheel", "label", "variant.json", "binaries carry", "status"):
        table.add_column(column)
    for c in checks:
        status = (
            "[green]ok[/green]" if not c.problems else "[red]" + "\n".join(c.problems) + "[/red]"
        )
        name = c.wheel.rsplit("/", 1)[-1]
        declared = "\n".join(c.properties) or "(none: null variant)"
        table.add_row(name, c.label, declared, "\n".join(c.derived_sm_arch) or "-", status)
    return table
