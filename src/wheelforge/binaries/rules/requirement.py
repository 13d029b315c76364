"""A wheel whose binaries use torch's stable ABI says which torch they need: without a torch
requirement with a lower bound, an installer puts it beside any torch, including those its shims
are missing from. It is checked against the floor its binaries need (abicheck.wheel_context),
and told the requirement to declare."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    target = context.target
    if context.wheel is None or target.torch_source != "inferred":
        return
    uses = [
        b.display
        for b in context.wheel.binaries
        if b.symbols is not None and b.role != "bundled" and floors.used_shims(b.symbols.undefined)
    ]
    if not uses:
        return
    need = f"{target.torch[0]}.{target.torch[1]}"
    said = target.declared.torch
    states = f"requires {said} with no lower bound" if said else "states no torch requirement"
    yield Finding(
        None,
        f"{context.wheel_name} {states}, but its binaries ({', '.join(uses[:3])}"
        f"{', ...' if len(uses) > 3 else ''}) load on torch >= {need} only: declare "
        f"Requires-Dist: torch>={need} (checked against torch {need}, what they need)",
    )


RULE = Rule(
    id="requirement",
    doc="a wheel whose binaries use torch's stable shims declares a torch requirement with a "
    "lower bound; one that does not is checked against the floor its binaries need and told the "
    "requirement to declare",
    source="the wheel's METADATA, the binaries' shims",
    flavours=frozenset({abi.STABLE.name}),
    roles=frozenset({"wheel"}),
    severity="warning",
    order=75,
    check=check,
)
