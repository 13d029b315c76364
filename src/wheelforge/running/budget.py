"""The message of a wheel over its size budget: its largest fatbin entries and what each lever
would save (binaries/sizecheck.py measures them)."""

from __future__ import annotations

from pathlib import Path

from wheelforge.binaries import elf
from wheelforge.binaries.sizecheck import LEVERS_SHOWN, TOP_CONTRIBUTORS, SizeCheck
from wheelforge.configuration.bytesizes import format_size
from wheelforge.foundation.errors import SizeBudgetError
from wheelforge.planning.plan import VariantPlan


def over_budget(
    plan: VariantPlan, wheel_path: Path, size: SizeCheck, *, published: bool
) -> SizeBudgetError:
    """Names the largest fatbin entries and what each lever would save."""
    top = size.contributions[:TOP_CONTRIBUTORS]
    lines = ["largest contributors (in the wheel / stored in the binary / uncompressed):"]
    lines += [
        f"  {elf.member_path(c.binary)} {c.kind.upper()} {c.arch}: "
        f"{format_size(c.in_wheel) if c.in_wheel is not None else '-'} / "
        f"{format_size(c.stored)} / {format_size(c.uncompressed)} ({c.compression})"
        for c in top
    ]
    measured = [c.in_wheel for c in size.contributions if c.in_wheel is not None]
    if measured:
        lines.append(
            f"  all SASS and PTX: {format_size(sum(measured))} of the wheel's "
            f"{format_size(size.wheel_size)}; the rest is host code and Python files"
        )
    lines.append("levers (what each saves):")
    lines += [
        f"  {lv.change}: {lv.saving}" + (f" ({lv.note})" if lv.note else "")
        for lv in size.levers[:LEVERS_SHOWN]
    ]
    biggest = (
        ", ".join(f"{c.arch} {format_size(c.in_wheel or c.stored)}" for c in top[:3]) or "no fatbin"
    )
    return SizeBudgetError(
        f"variant {plan.variant.id}: {wheel_path.name} is {format_size(size.wheel_size)}, over "
        f"its size budget of {format_size(size.budget)}; "
        + ("it was published by an earlier build; " if published else "nothing was published; ")
        + "largest: "
        f"{biggest} (size-budget in matrix.yaml or --size-budget raises the budget)",
        details="\n".join(lines),
    )
