"""A wheel installs inside its folder: no member an installer would write outside it (an
absolute path or ``..``), and a ``NAME-VERSION.dist-info/METADATA``, without which no installer
accepts it."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import bounded
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    if context.wheel is None:
        return
    names, wheel = list(context.wheel.names), context.wheel_name
    for name in bounded.unsafe_member_names(names):
        yield Finding(
            None,
            f"{wheel} has the member {name!r}, which an installer would write outside its "
            "folder (an absolute path or '..'); rebuild the wheel with relative member names",
        )
    if not any(n.endswith(".dist-info/METADATA") and n.count("/") == 1 for n in names):
        yield Finding(
            None,
            f"{wheel} has no NAME-VERSION.dist-info/METADATA, so no installer accepts it; "
            "build it with a wheel builder",
        )


RULE = Rule(
    id="layout",
    doc="the wheel installs inside its folder: no member named with an absolute path or `..`, "
    "and a `NAME-VERSION.dist-info/METADATA`",
    source="the wheel's member names",
    flavours=frozenset({"stable", "unstable"}),
    roles=frozenset({"wheel"}),
    order=70,
    check=check,
)
