"""Every Python C API symbol a binary uses is in the limited API of its wheel's abi3 tag."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from wheelforge.binaries import floors
from wheelforge.binaries.elf import split_member
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext, Violation, WheelSummary
from wheelforge.configuration import abi
from wheelforge.toolchain.shims import Version2


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
                kind=KIND,
            )
        elif member.added > PyVersion(*floor):
            added = (member.added.major, member.added.minor)
            yield above_tag(path, name, added, context)


KIND = "python-non-limited"


def summary(container: str, found: Sequence[Violation], wheel: WheelSummary | None) -> str:
    """Every Python symbol outside the limited API in one wheel (or file), in one line."""
    binaries = Counter(split_member(v.binary)[1] or v.binary for v in found)
    where = ", ".join(f"{b} {n}" for b, n in binaries.most_common(3))
    if len(binaries) > 3:
        where += f", {len(binaries) - 3} more"
    examples = ", ".join(dict.fromkeys(v.symbol or "" for v in found[:3]))
    tag = (
        f"cp{wheel.tag_python[0]}{wheel.tag_python[1]}-abi3"
        if wheel and wheel.tag_python
        else "abi3"
    )
    return (
        f"{container}: {len(binaries)} binar{'ies use' if len(binaries) > 1 else 'y uses'} "
        f"{len(found)} Python symbols outside the limited API ({where}), e.g. {examples}, so "
        f"the {tag} tag is wrong; build with -DPy_LIMITED_API and avoid them; every symbol: "
        "wheelforge check --json"
    )


def above_tag(path: str, what: str, added: Version2, context: RuleContext) -> Finding:
    """*what* (a symbol, or "its Python symbols") needs the limited API of Python *added*, newer
    than the abi3 tag: an error, unless the wheel's Requires-Python keeps it off every Python
    older than that (a warning naming both: it loads wherever it installs, the tag overstates)."""
    target = context.target
    assert target.python is not None
    tag, need = f"cp{target.python[0]}{target.python[1]}", f"{added[0]}.{added[1]}"
    fix = f"raise python-abi to cp{added[0]}{added[1]}"
    symbol = what if not what.startswith("its ") else None
    uses = f"uses {what}, in the limited API only since" if symbol else "needs the limited API of"
    requires = target.declared.requires_python
    if target.requires_python is not None and target.requires_python >= added:
        return Finding(
            symbol,
            f"{path} {uses} Python {need}, above the wheel's {tag}-abi3 tag; its Requires-Python "
            f"({requires}) keeps it off older Pythons, so it loads wherever it installs; {fix} so "
            "the tag says so",
            severity="warning",
        )
    admits = f" and Requires-Python ({requires}) admits older ones" if requires else ""
    return Finding(
        symbol,
        f"{path} {uses} Python {need}, but the wheel is tagged {tag}-abi3{admits}, where it fails "
        f"to load; {fix}",
    )


RULE = Rule(
    id="python-api",
    doc="limited Python API: every `Py*` symbol, against the wheel's `cp3X-abi3` tag; one newer "
    "than the tag but within the wheel's `Requires-Python` is a warning naming both",
    source="`abi3info` (CPython's own limited-API manifest, with the version that added each "
    "symbol)",
    # A classic wheel tagged abi3 (vLLM 0.10.1.1's cp38-abi3, pinned to one torch) claims the
    # limited API too; one tagged for one CPython has no abi3 floor, so the rule says nothing.
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=40,
    check=check,
    summary=summary,
)
