"""An unstable-ABI wheel pins the torch release it was built against (``torch==X.Y.*``): its
binaries use torch's full C++ API, whose layout changes between releases, so under another
torch they fail to load or crash. The fix names that torch where the wheel says it
(floors.pin_advice), never a made-up one."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    wheel = context.wheel
    if wheel is None or wheel.metadata is None:  # no METADATA: the layout rule says so
        return
    if wheel.is_torch:  # torch's own wheel: its binaries are the torch they were built with
        return
    said = context.target.declared
    if said.torch_pin is None:
        what = f"declares {said.torch}" if said.torch else "declares no torch requirement"
        yield Finding(
            None,
            f"{context.wheel_name} is an unstable-ABI wheel (its binaries use libtorch's C++ "
            f"API, so they load on one torch only), but it {what}; {floors.pin_advice(said)}",
        )


RULE = Rule(
    id="torch-pin",
    doc="an unstable-ABI wheel pins the torch release it was built against in its METADATA: any "
    "requirement that admits one torch minor only (`==2.14.*`, `>=2.14,<2.15`, `~=2.14.0`, "
    "`==2.14.1`; torch's own wheel needs none); the fix names that torch where the wheel's "
    "requirement says it",
    source="the wheel's METADATA",
    flavours=frozenset({abi.UNSTABLE.name}),
    roles=frozenset({"wheel"}),
    needs=frozenset({"metadata"}),
    order=75,
    check=check,
)
