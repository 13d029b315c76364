"""``wheelforge check --json``: each binary's role, torch ABI verdict and stable-ABI facts (shims,
libtorch C++ symbols, limited-API symbols), its floors inferred and declared, what it allows, and
its violations; each wheel's requirements, what it was checked against and what its binaries
allow. It carries what torch-abi-audit's JSON carries, so a CI that gates on one can switch
(docs/stable-abi.md sets the two side by side)."""

from __future__ import annotations

from dataclasses import dataclass, field

from wheelforge.binaries.abicheck import BinaryCheck, TorchAbi, Verdict
from wheelforge.binaries.checkwheels import CheckedWheel, CheckResult
from wheelforge.binaries.rule import TorchSource, Violation
from wheelforge.configuration import abi as abis
from wheelforge.documents.kinds import DocumentKind, doc, version_text
from wheelforge.foundation.document import schema_version

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class FloorDoc:
    inferred: str | None = field(metadata=doc("what the binary needs: 2.10, 3.12; null: nothing"))
    declared: str | None = field(metadata=doc("what the wheel (or a flag) declares"))


@dataclass(frozen=True, kw_only=True)
class CheckedBinaryDoc:
    path: str = field(metadata=doc("a file, or a wheel member written x.whl!pkg/_C.abi3.so"))
    role: str | None = field(
        metadata=doc(
            "what it is to its wheel: extension (a Python module), library (an op library or "
            "one its other binaries load), bundled, program, or wheel (the wheel's own findings)"
        )
    )
    role_reason: str | None = field(metadata=doc("the evidence for the role"))
    verdict: Verdict = field(metadata=doc("ok, warning (only warnings) or error (it fails check)"))
    torch_abi: TorchAbi = field(
        metadata=doc(
            "torch-stable (shims only), torch-unstable (libtorch's C++ API) or no-torch, as "
            "torch-abi-audit names them"
        )
    )
    shims: tuple[str, ...] = field(metadata=doc("the torch C shim functions it uses"))
    stable_shim_count: int = field(metadata=doc("how many (torch-abi-audit's stable_shim_count)"))
    unstable_symbols: tuple[str, ...] = field(
        metadata=doc("the libtorch C++ symbols it needs, demangled")
    )
    unstable_symbol_count: int = field(metadata=doc("how many"))
    newest_shim: str | None = field(metadata=doc("the torch version of the newest shim used"))
    torch_floor: FloorDoc
    allows: str | None = field(
        metadata=doc("the widest torch requirement it is right to declare; null: no torch use")
    )
    python_symbols: tuple[str, ...] = field(metadata=doc("the limited-API symbols it uses"))
    python_floor: FloorDoc
    violations: tuple[Violation, ...] = field(
        metadata=doc("each as binaries/rule.Violation writes itself (the build report's too)")
    )
    abi: str = field(
        default=abis.STABLE.name,
        metadata=doc("whose rules judged it: stable, or unstable (a classic extension's wheel)"),
    )
    rules: tuple[str, ...] = field(default=(), metadata=doc("the ids of the rules applied"))
    load: str | None = field(
        default=None,
        metadata=doc("what loading it said (check --torch-from); null: not loaded"),
    )


@dataclass(frozen=True, kw_only=True)
class RequiresDoc:
    torch: str | None = field(metadata=doc("its Requires-Dist on torch; null: none"))
    torch_pin: str | None = field(
        metadata=doc(
            "the torch it pins, as after torch==: 2.14.0, or 2.14.* for any requirement that "
            "admits one minor only (>=2.14,<2.15, ~=2.14.0); null: it pins none"
        )
    )
    python: str | None = field(metadata=doc("its Requires-Python"))


@dataclass(frozen=True, kw_only=True)
class CheckedAgainstDoc:
    torch: str = field(metadata=doc("the lowest torch its binaries were checked against"))
    source: TorchSource = field(
        metadata=doc(
            "target (--target), requirement (its Requires-Dist), inferred (it states none: what "
            "its binaries' shims need), assumed (it states none and its binaries use no shim: "
            "the first torch with the stable ABI, nothing inferred)",
            key="from",
        )
    )


@dataclass(frozen=True, kw_only=True)
class CheckedWheelDoc:
    path: str
    verdict: Verdict = field(metadata=doc("ok, warning or error, over all its binaries"))
    torch_abi: TorchAbi = field(
        metadata=doc("torch-unstable if any binary is, else torch-stable if any is")
    )
    min_torch: str | None = field(metadata=doc("the newest floor among its binaries"))
    allows: str | None = field(
        metadata=doc("the widest correct torch requirement its binaries allow together")
    )
    torch_cuda: str | None = field(
        default=None,
        metadata=doc(
            "which CUDA builds of torch bring the CUDA runtime its binaries need of torch (with "
            "CUDA 12 (a cu12x build of torch; on PyPI: ...)); null: they need none of torch"
        ),
    )
    requires: RequiresDoc
    abi3_floor: str | None = field(metadata=doc("the floor its cp3X-abi3 tag states"))
    checked_against: CheckedAgainstDoc


@dataclass(frozen=True, kw_only=True)
class CheckDocument:
    """wheelforge check --json."""

    schema_version: int = schema_version(VERSION)
    binaries: tuple[CheckedBinaryDoc, ...]
    wheels: tuple[CheckedWheelDoc, ...] = field(
        default=(), metadata=doc("each wheel checked, with what it declares and allows")
    )


KIND = DocumentKind("check", CheckDocument, VERSION, "wheelforge check --json")


def binary_doc(c: BinaryCheck) -> CheckedBinaryDoc:
    return CheckedBinaryDoc(
        path=c.path,
        role=c.role or None,
        role_reason=c.role_reason or None,
        verdict=c.verdict,
        torch_abi=c.torch_abi,
        shims=c.shims,
        stable_shim_count=len(c.shims),
        unstable_symbols=c.libtorch_symbols,
        unstable_symbol_count=len(c.libtorch_symbols),
        newest_shim=version_text(c.newest_shim),
        torch_floor=FloorDoc(
            inferred=version_text(c.newest_shim), declared=version_text(c.declared_torch)
        ),
        allows=c.allows,
        python_symbols=c.python_symbols,
        python_floor=FloorDoc(
            inferred=version_text(c.python_floor), declared=version_text(c.declared_python)
        ),
        violations=c.violations,
        abi=c.flavour,
        rules=c.rules,
        load=c.load,
    )


def wheel_doc(checked: CheckedWheel) -> CheckedWheelDoc:
    wheel = checked.summary
    return CheckedWheelDoc(
        path=wheel.path,
        verdict=checked.verdict,
        torch_abi=checked.torch_abi,
        min_torch=version_text(checked.min_torch),
        allows=wheel.allows,
        torch_cuda=wheel.torch_cuda,
        requires=RequiresDoc(
            torch=wheel.declared.torch,
            torch_pin=wheel.declared.torch_pin,
            python=wheel.declared.requires_python,
        ),
        abi3_floor=version_text(wheel.tag_python),
        checked_against=CheckedAgainstDoc(
            torch=version_text(wheel.torch) or "", source=wheel.torch_source
        ),
    )


def check_document(result: CheckResult) -> CheckDocument:
    return CheckDocument(
        binaries=tuple(binary_doc(c) for c in result.binaries),
        wheels=tuple(wheel_doc(w) for w in result.wheels),
    )
