"""The registry of ABI rules: every module under binaries/rules/ that defines ``RULE``. The rule
list, the ids a violation may carry, what the walk reads for each role, and the rules table of
docs/testing.md all come from it, so a rule is added by adding its module.

Regenerate the docs table after adding or changing a rule::

    python -m wheelforge.binaries.registry

tests/unit/test_rule_registry.py fails when the table drifts.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from wheelforge.binaries import rules as rules_package
from wheelforge.binaries.facts import BINARY_ROLES, Fact, OwnReader, Reading, Role
from wheelforge.binaries.rule import Rule
from wheelforge.configuration import abi
from wheelforge.foundation import readers, writers


@cache
def _discovered() -> tuple[Rule, ...]:
    found: list[Rule] = []
    for module in sorted(pkgutil.iter_modules(rules_package.__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"{rules_package.__name__}.{module.name}")
        rule = getattr(loaded, "RULE", None)
        if not isinstance(rule, Rule):
            raise TypeError(f"{loaded.__name__} defines no RULE = Rule(...)")
        found.append(rule)
    ids = [r.id for r in found]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two rules share an id: {sorted(i for i in ids if ids.count(i) > 1)}")
    return tuple(sorted(found, key=lambda r: (r.order, r.id)))


def all_rules() -> tuple[Rule, ...]:
    """Every registered rule, in their order."""
    return _discovered()


def rule_ids() -> tuple[str, ...]:
    return tuple(r.id for r in all_rules())


def applicable(flavour: abi.AbiName) -> tuple[Rule, ...]:
    """The rules that apply to wheels of *flavour*, in their order."""
    return tuple(r for r in all_rules() if flavour in r.flavours)


def for_role(rules: Sequence[Rule], role: Role) -> tuple[Rule, ...]:
    return tuple(r for r in rules if role in r.roles)


def reading(rules: Sequence[Rule], *, metadata: bool = False) -> Reading:
    """What the walk must read for *rules*: each judged role's files with the facts its rules
    need, and METADATA when the torch floor is to come from it. Members an installer would
    misplace are left to the layout rule."""
    facts: dict[Role, frozenset[Fact]] = {}
    own: dict[Role, tuple[OwnReader, ...]] = {}
    for role in BINARY_ROLES:
        judged = for_role(rules, role)
        if judged:
            facts[role] = frozenset().union(*(r.needs for r in judged))
            own[role] = tuple((r.id, r.read) for r in judged if r.read)
    # A rule on an own role: each file's role is inferred from its symbols (roles.py).
    infer = any(r in facts for r in ("extension", "library", "program"))
    record = any("record" in r.wheel_needs for r in rules)
    # A wheel-level rule reads METADATA (the torch pin of an unstable-ABI wheel).
    wanted = metadata or any("metadata" in r.needs for r in for_role(rules, "wheel"))
    return Reading(
        facts=facts, metadata=wanted, unsafe_members=False, own=own, roles=infer, record=record
    )


# -- the docs table ------------------------------------------------------------------------------

DOCS = Path(__file__).parents[3] / "docs" / "testing.md"
_MARKERS = re.compile(r"(<!-- rules (?:.*?)-->\n)(?P<body>.*?)(<!-- /rules -->)", re.DOTALL)
_ROLE_WORDS = {
    "extension": "extension modules",
    "library": "libraries",
    "bundled": "bundled libraries",
    "program": "programs",
    "wheel": "the wheel",
}


def _applies(rule: Rule) -> str:
    roles = ", ".join(_ROLE_WORDS[r] for r in _ROLE_WORDS if r in rule.roles)
    flavours = " and ".join(f for f in abi.NAMES if f in rule.flavours)
    return f"{roles}; {flavours} ABI"


def docs_table() -> str:
    """The markdown table of every rule."""
    rows = [
        "| rule | what it looks at | applies to | severity | source of truth |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in all_rules():
        rows.append(f"| `{r.id}` | {r.doc} | {_applies(r)} | {r.severity} | {r.source} |")
    return "\n".join(rows) + "\n"


def render_docs(text: str) -> str:
    """*text* (docs/testing.md) with the marked rules table regenerated."""
    return _MARKERS.sub(lambda m: m[1] + docs_table() + m[3], text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wheelforge.binaries.registry")
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    text = readers.read_text(args.docs, cap=readers.CONFIG_CAP)
    writers.write_atomic(args.docs, render_docs(text))
    print(f"wrote the rules table of {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
