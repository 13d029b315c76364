"""Checking a built wheel before it is published, in one pass over its ELF members: every
requested arch must be present as SASS, and as PTX where ``+PTX`` was asked; a stable-ABI
build must keep the stable-ABI rules (abicheck.py), and an unstable-ABI one the module-init rule
(initexport.py), which the stable-ABI rules include."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.binaries import abicheck, elf, initexport
from wheelforge.binaries.abirules import Violation
from wheelforge.binaries.inspection import BinaryReport, report_of
from wheelforge.configuration.archs import ArchSet
from wheelforge.foundation.errors import VerificationError, first_and_rest
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import shims


@dataclass(frozen=True, kw_only=True)
class ArchCheck:
    binary: str
    missing_sass: tuple[str, ...]
    missing_ptx: tuple[str, ...]
    extra_sass: tuple[str, ...]
    extra_ptx: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing_sass and not self.missing_ptx


def check_binary(binary: BinaryReport, arch_set: ArchSet) -> ArchCheck:
    sass = set(binary.sass_archs)
    ptx = set(binary.ptx_archs)
    return ArchCheck(
        binary=binary.path,
        missing_sass=tuple(a for a in arch_set.sass if a not in sass),
        missing_ptx=tuple(a for a in arch_set.ptx if a not in ptx),
        extra_sass=tuple(sorted(sass - set(arch_set.sass))),
        extra_ptx=tuple(sorted(ptx - set(arch_set.ptx))),
    )


def extension_binaries(binaries: Sequence[BinaryReport], plan: VariantPlan) -> list[BinaryReport]:
    return [b for b in binaries if elf.is_member(b.path, plan.wheel.library_path)]


def verify_binaries(binaries: Sequence[BinaryReport], plan: VariantPlan) -> list[ArchCheck]:
    """Raise VerificationError naming the arch and the .so when an asked-for arch is missing."""
    arch_set = plan.variant.arch_set
    if not any(step.rule == "nvcc" for step in plan.compile.steps):
        return []
    found = extension_binaries(binaries, plan)
    if not found:
        raise VerificationError(
            f"variant {plan.variant.id}: the wheel has no {plan.wheel.library_path}; the packing step lost it"
        )
    checks = [check_binary(b, arch_set) for b in found]
    for check in checks:
        if check.ok:
            continue
        missing = [f"SASS {a}" for a in check.missing_sass] + [
            f"PTX {a}" for a in check.missing_ptx
        ]
        present = (
            ", ".join(
                [*sorted({e.arch for b in found if b.path == check.binary for e in b.entries})]
            )
            or "no CUDA code at all"
        )
        raise VerificationError(
            f"variant {plan.variant.id}: {plan.wheel.library_path} lacks {', '.join(missing)} "
            f"asked for by arch set '{arch_set.name}' ({arch_set}); it carries {present}. "
            "Check extension.nvcc-flags for -gencode/-arch flags that override the arch set"
        )
    return checks


@dataclass(frozen=True, kw_only=True)
class WheelVerification:
    """What verifying a wheel found: its binaries' fatbins, each checked against the arch set
    (kept for rendering), and the stable-ABI checks (empty for an unstable-ABI build)."""

    binaries: tuple[BinaryReport, ...]
    arch_checks: tuple[ArchCheck, ...]
    abi_checks: tuple[abicheck.BinaryCheck, ...]

    def moved(self, old: Path, new: Path) -> WheelVerification:
        """The same findings, named after the wheel at *new* (staging copy → published)."""

        def rename(path: str) -> str:
            return elf.rename_wheel(path, old, new)

        return WheelVerification(
            binaries=tuple(dataclasses.replace(b, path=rename(b.path)) for b in self.binaries),
            arch_checks=tuple(
                dataclasses.replace(c, binary=rename(c.binary)) for c in self.arch_checks
            ),
            abi_checks=tuple(dataclasses.replace(c, path=rename(c.path)) for c in self.abi_checks),
        )


@dataclass(frozen=True, kw_only=True)
class WheelFindings:
    """What one pass over a wheel's ELF members found: their fatbins, the stable-ABI checks (a
    stable-ABI build), and the module-init violations (an unstable-ABI build)."""

    binaries: list[BinaryReport]
    abi_checks: list[abicheck.BinaryCheck]
    init_violations: list[Violation]


def read_wheel(wheel_path: Path, plan: VariantPlan) -> WheelFindings:
    """One pass over the wheel's ELF members, each inflated and parsed once: its fatbin entries,
    and the stable-ABI checks (for a stable-ABI build; an unstable one uses torch's C++ API on
    purpose, and is held to the module-init rule alone)."""
    found = WheelFindings(binaries=[], abi_checks=[], init_violations=[])
    with elf.open_wheel(wheel_path) as wheel:
        rules = None
        if plan.abi.kind.stable_abi_rules:
            guards = shims.header_guards(plan.torch.include_dir)
            rules = abicheck.WheelRules(wheel, torch=plan.abi.target, guards=guards)
        for image in wheel.elf_members():
            found.binaries.append(report_of(image))
            if image.member is None or elf.is_grafted(image.member):
                continue
            if rules is not None:
                found.abi_checks.append(rules.check(image))
            else:
                found.init_violations.extend(initexport.init_violations(image))
    return found


def check_stable_abi(checks: Sequence[abicheck.BinaryCheck], plan: VariantPlan) -> None:
    """A stable-ABI violation stops the variant, naming every violation."""
    violations = [v.message for c in checks for v in c.violations]
    if violations:
        message, details = first_and_rest(violations, prefix=f"variant {plan.variant.id}: ")
        raise VerificationError(message, details=details)


def verify_wheel(wheel_path: Path, plan: VariantPlan) -> WheelVerification:
    """Fatbins against the arch set, then the stable-ABI rules (or, for an unstable-ABI build, the
    module-init rule); any failing stops the variant."""
    found = read_wheel(wheel_path, plan)
    verify_binaries(found.binaries, plan)
    check_stable_abi(found.abi_checks, plan)
    if found.init_violations:
        message = found.init_violations[0].message.replace(str(wheel_path), wheel_path.name)
        raise VerificationError(f"variant {plan.variant.id}: {message}")
    arch_set = plan.variant.arch_set
    return WheelVerification(
        binaries=tuple(found.binaries),
        arch_checks=tuple(check_binary(b, arch_set) for b in found.binaries),
        abi_checks=tuple(found.abi_checks),
    )
