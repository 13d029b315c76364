"""An unstable-ABI wheel pins the torch release it was built against (``torch==2.13.*``): its
binaries use torch's full C++ API, whose layout changes between releases, so under another
torch they fail to load or crash."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    wheel = context.wheel
    if wheel is None or wheel.metadata is None:  # no METADATA: the layout rule says so
        return
    said = context.target.declared
    if said.torch_pin is None:
        what = f"declares {said.torch}" if said.torch else "declares no torch requirement"
        yield Finding(
            None,
            f"{context.wheel_name} is an unstable-ABI wheel (torch's full C++ API, one CPython), but it "
            f"{what}; pin the torch release it was built against, e.g. Requires-Dist: torch==2.13.*",
        )


RULE = Rule(
    id="torch-pin",
    doc="an unstable-ABI wheel pins the torch release it was built against (`torch==2.13.*`) in "
    "its METADATA",
    source="the wheel's METADATA",
    flavours=frozenset({abi.UNSTABLE.name}),
    roles=frozenset({"wheel"}),
    needs=frozenset({"metadata"}),
    order=75,
    check=check,
)
