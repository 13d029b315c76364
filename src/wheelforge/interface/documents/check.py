"""``wheelforge check --json``: each binary's ABI facts (shims, limited-API symbols), its
floors inferred and declared, and its violations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wheelforge.binaries.abicheck import BinaryCheck, Violation
from wheelforge.interface.documents.kinds import DocumentKind, doc, schema_version, version_text

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class FloorDoc:
    inferred: str | None = field(metadata=doc("what the binary needs: 2.10, 3.12; null: nothing"))
    declared: str | None = field(metadata=doc("what the wheel (or a flag) declares"))


@dataclass(frozen=True, kw_only=True)
class CheckedBinaryDoc:
    path: str = field(metadata=doc("a file, or a wheel member written x.whl!pkg/_C.abi3.so"))
    shims: tuple[str, ...] = field(metadata=doc("the torch C shim functions it uses"))
    newest_shim: str | None = field(metadata=doc("the torch version of the newest shim used"))
    torch_floor: FloorDoc
    python_symbols: tuple[str, ...] = field(metadata=doc("the limited-API symbols it uses"))
    python_floor: FloorDoc
    violations: tuple[Violation, ...] = field(
        metadata=doc("each as binaries/rule.Violation writes itself (the build report's too)")
    )
    abi: str = field(
        default="stable",
        metadata=doc("whose rules judged it: stable, or unstable (a classic extension's wheel)"),
    )
    rules: tuple[str, ...] = field(default=(), metadata=doc("the ids of the rules applied"))
    torch_requirement: str | None = field(
        default=None,
        metadata=doc("the wheel's Requires-Dist on torch as written: torch>=2.10, torch==2.13.*"),
    )


@dataclass(frozen=True, kw_only=True)
class CheckDocument:
    """wheelforge check --json."""

    schema_version: int = schema_version(VERSION)
    binaries: tuple[CheckedBinaryDoc, ...]


KIND = DocumentKind("check", CheckDocument, VERSION, "wheelforge check --json")


def check_document(checks: Sequence[BinaryCheck]) -> CheckDocument:
    return CheckDocument(
        binaries=tuple(
            CheckedBinaryDoc(
                path=c.path,
                shims=c.shims,
                newest_shim=version_text(c.newest_shim),
                torch_floor=FloorDoc(
                    inferred=version_text(c.newest_shim), declared=version_text(c.declared_torch)
                ),
                python_symbols=c.python_symbols,
                python_floor=FloorDoc(
                    inferred=version_text(c.python_floor),
                    declared=version_text(c.declared_python),
                ),
                violations=c.violations,
                abi=c.flavour,
                rules=c.rules,
                torch_requirement=c.torch_requirement,
            )
            for c in checks
        )
    )
