"""A Python extension module exports a defined, global ``PyInit_<leaf>`` named after its file,
or ``import`` fails with "dynamic module does not define module export function"."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import initexport
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    found = binary.init_export
    if found is not None and not found.exported:
        yield Finding(found.symbol, initexport.message(binary.name, found))


RULE = Rule(
    id="module-init",
    doc="module init exported: every extension module (`*.abi3.so`, `*.cpython-*.so`) exports "
    "a defined, global `PyInit_<leaf>` matching its file name; a local or hidden one is named "
    "as such",
    source="the binary's `.dynsym` and `.symtab`",
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"extension"}),
    needs=frozenset({"init-export"}),
    order=50,
    check=check,
)
