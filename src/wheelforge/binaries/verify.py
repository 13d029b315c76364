"""Checking built binaries against the arch set that was asked for: every requested arch must be
present as SASS, and as PTX where ``+PTX`` was asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wheelforge.binaries.inspection import BinaryReport
from wheelforge.configuration.archs import ArchSet
from wheelforge.foundation.errors import VerificationError
from wheelforge.planning.plan import VariantPlan


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
    suffix = "!" + plan.wheel_library_path
    return [b for b in binaries if b.path.endswith(suffix)]


def verify_binaries(binaries: Sequence[BinaryReport], plan: VariantPlan) -> list[ArchCheck]:
    """Raise VerificationError naming the arch and the .so when an asked-for arch is missing."""
    arch_set = plan.variant.arch_set
    if not any(step.rule == "nvcc" for step in plan.compile_steps):
        return []
    found = extension_binaries(binaries, plan)
    if not found:
        raise VerificationError(
            f"variant {plan.variant.id}: the wheel has no {plan.wheel_library_path}; the packing step lost it"
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
            f"variant {plan.variant.id}: {plan.wheel_library_path} lacks {', '.join(missing)} "
            f"asked for by arch set '{arch_set.name}' ({arch_set}); it carries {present}. "
            "Check extension.nvcc-flags for -gencode/-arch flags that override the arch set"
        )
    return checks
