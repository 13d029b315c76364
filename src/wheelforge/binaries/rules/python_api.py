"""Every Python C API symbol a binary uses is in the limited API of its wheel's abi3 tag."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    floor = context.target.python
    if floor is None:
        return
    # Imported here: abi3info's tables take ~0.1 s to load, and a no-op build reads no binary.
    import abi3info
    from abi3info.models import PyVersion, Symbol

    path, tag = binary.name, f"cp{floor[0]}{floor[1]}"
    for name in floors.python_symbols(binary.need_symbols().undefined):
        member = abi3info.FUNCTIONS.get(Symbol(name)) or abi3info.DATAS.get(Symbol(name))
        if member is None:
            yield Finding(
                name,
                f"{path} uses {name}, which is not in Python's limited API, so the {tag}-abi3 "
                "tag is wrong; build with -DPy_LIMITED_API and avoid that function",
            )
        elif member.added > PyVersion(*floor):
            added = member.added
            yield Finding(
                name,
                f"{path} uses {name}, in the limited API only since Python {added}, but the "
                f"wheel is tagged {tag}-abi3; raise python-abi to cp{added.major}{added.minor}",
            )


RULE = Rule(
    id="python-api",
    doc="limited Python API: every `Py*` symbol, against the wheel's `cp3X-abi3` tag",
    source="`abi3info` (CPython's own limited-API manifest, with the version that added each "
    "symbol)",
    flavours=frozenset({"stable"}),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=40,
    check=check,
)
