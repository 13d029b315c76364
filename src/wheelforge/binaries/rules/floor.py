"""The declared floors are not below the inferred ones: a wheel that says ``torch>=2.9`` but
imports a shim of 2.10 installs where it cannot load; the same for the abi3 tag and the Python
symbols."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.binaries.rules.python_api import above_tag
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    undefined = binary.need_symbols().undefined
    target = context.target
    torch = floors.torch_needed(floors.used_shims(undefined), target)
    python = floors.python_floor(floors.python_symbols(undefined))
    path = binary.name
    if torch is not None and torch > target.torch:
        need, have = f"{torch[0]}.{torch[1]}", f"{target.torch[0]}.{target.torch[1]}"
        yield Finding(
            None,
            f"{path} declares torch>={have}, but the shim functions it imports need torch {need} "
            f"(the inferred floor): it fails to load on torch {have}; require torch>={need}, or "
            f"build for {have} so the headers hide the newer shims",
        )
    if python is not None and target.python is not None and python > target.python:
        yield above_tag(path, "its Python symbols", python, context)


RULE = Rule(
    id="floor",
    doc="declared floors not below the inferred ones: the lowest torch the binary loads on (the "
    "newest release among those that introduced its shims) and the lowest Python (the newest "
    "limited-API version among its `Py*` symbols), against the wheel's `torch>=X.Y` and "
    "`cp3X-abi3`",
    source="the rows of `shim-version` and `python-api`",
    flavours=frozenset({abi.STABLE.name}),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=10,
    check=check,
)
