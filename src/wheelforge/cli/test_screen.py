"""`wheelforge test`'s results: the torch × variant table (the JSON document is
documents/test_schema.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from wheelforge.packaging.testwheels import Outcome


def test_table(outcomes: Sequence[Outcome]) -> Table:
    """Torch version × variant → passed / failed / skipped."""
    variants = list(dict.fromkeys(o.variant for o in outcomes))
    table = Table(title="wheelforge test", title_justify="left")
    table.add_column("torch")
    table.add_column("GPU")
    for v in variants:
        table.add_column(v)
    styles = {"passed": "green", "failed": "red", "error": "red", "unavailable": "yellow"}
    for env in dict.fromkeys(o.env for o in outcomes):
        row = [o for o in outcomes if o.env == env]
        torch = row[0].torch or env.removeprefix("torch ")
        label = torch if env.startswith("torch ") and row[0].torch else f"{torch}\n({env})"
        cells = []
        for v in variants:
            o = next((o for o in row if o.variant == v), None)
            if o is None:
                cells.append("-")
            elif o.status == "unavailable":
                cells.append("[yellow]unavailable[/yellow]")
            else:
                style = styles[o.status]
                counts = f"{o.passed} passed, {o.failed} failed, {o.skipped} skipped"
                if o.errors:
                    counts += f", {o.errors} errors"
                cells.append(f"[{style}]{o.status}[/{style}]\n{counts}")
        table.add_row(label, "yes" if row[0].cuda else "no", *cells)
    return table
