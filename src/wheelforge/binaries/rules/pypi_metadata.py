"""A wheel's METADATA is one PyPI takes: packaging's validation, which twine check and PyPI run
(a one-line Summary, a valid Name and Version, a known Metadata-Version, every field parsed),
and PyPI's own rules (trove classifiers, Project-URL labels and URLs), as
configuration/coremetadata.py holds them. A wheel PyPI refuses is refused at upload, after
every other check passed. (A local version label, ``+cu128``, is left alone: PyPI refuses it,
but it is what a variant built for an index of your own carries.)"""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi, coremetadata


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    wheel = context.wheel
    if wheel is None or wheel.metadata is None:  # no METADATA: the layout rule says so
        return
    member = wheel.metadata_member or "METADATA"
    for problem in coremetadata.problems(wheel.metadata):
        yield Finding(
            problem.field,
            f"{context.wheel_name}: {member}: {problem.field}: {problem.message}; PyPI refuses "
            "the upload: fix the field where the wheel's metadata is written",
        )


RULE = Rule(
    id="pypi-metadata",
    doc="the wheel's METADATA is one PyPI takes: packaging's validation (what twine check and "
    "PyPI run: one-line Summary, valid Name and Version, known Metadata-Version), trove "
    "classifiers, Project-URL labels and URLs",
    source="the wheel's METADATA; packaging.metadata, trove-classifiers",
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"wheel"}),
    needs=frozenset({"metadata"}),
    order=80,
    check=check,
)
