"""Checking a built wheel before it is published, in the one walk over it (reader.py): every
requested arch must be present as SASS, and as PTX where ``+PTX`` was asked; and the wheel must
keep the registered rules of its ABI flavour (registry.py), the rules on the wheel as a whole
included, as ``wheelforge check`` applies them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge.binaries import abicheck, elf, reader, registry, symbols
from wheelforge.binaries.facts import FATBINS, BinaryContents, WheelFacts
from wheelforge.configuration import abi as abis
from wheelforge.configuration.archs import Arch, ArchSet, ArchSpec
from wheelforge.foundation.errors import VerificationError
from wheelforge.toolchain import shims

if TYPE_CHECKING:  # `inspect` and `check` load no planning
    from wheelforge.planning.plan import LinkPlan, VariantPlan


@dataclass(frozen=True, kw_only=True)
class ArchCheck:
    binary: str
    missing_sass: tuple[str, ...]
    missing_ptx: tuple[str, ...]
    extra_sass: tuple[str, ...]
    extra_ptx: tuple[str, ...]
    # Whether the arch set applies: to the extension module when the plan compiles device code
    # (.cu sources); not to a C++-only extension, nor to the wheel's other binaries.
    applies: bool = True

    @property
    def ok(self) -> bool:
        return not self.missing_sass and not self.missing_ptx


def check_binary(binary: BinaryContents, arch_set: ArchSet | None) -> ArchCheck:
    """*binary*'s fatbin entries against *arch_set*; None: no arch is expected of it (what it
    carries is listed as extra)."""
    sass = set(binary.sass_archs)
    ptx = set(binary.ptx_archs) | set(binary.linked_ptx)  # -rdc: PTX beside the linked image
    asked_sass = arch_set.sass if arch_set else ()
    asked_ptx = arch_set.ptx if arch_set else ()
    return ArchCheck(
        binary=binary.path,
        missing_sass=tuple(a for a in asked_sass if a not in sass),
        missing_ptx=tuple(a for a in asked_ptx if a not in ptx),
        extra_sass=tuple(sorted(sass - set(asked_sass))),
        extra_ptx=tuple(sorted(ptx - set(asked_ptx))),
        applies=arch_set is not None,
    )


def link_archs(plan: VariantPlan, link: LinkPlan) -> ArchSet | None:
    """The archs *link*'s shared object owes: those its nvcc steps compiled for (the arch set,
    or a source's or extension's limit of it), in the arch set's order; None when no nvcc step
    went into it (a C++-only shared object owes none)."""
    # one nvcc -c per .cu, or the fatbin of nvcc's steps (planning/devshare.py)
    cuda = ("nvcc", "fatbin")
    steps = [s for s in plan.compile.steps if s.rule in cuda and s.object in set(link.objects)]
    if not steps:
        return None
    arch_set = plan.variant.arch_set
    if all(step.arch_set is None for step in steps):
        return arch_set
    owed: dict[Arch, bool] = {}
    for step in steps:
        for spec in (step.arch_set or arch_set).specs:
            owed[spec.arch] = owed.get(spec.arch, False) or spec.ptx
    ordered = sorted(owed, key=Arch.sort_key)
    return ArchSet(arch_set.name, tuple(ArchSpec(a, owed[a]) for a in ordered))


def extension_binaries(binaries: Sequence[BinaryContents], link: LinkPlan) -> list[BinaryContents]:
    """What the walk read of *link*'s shared object."""
    return [b for b in binaries if elf.is_member(b.path, link.wheel_path)]


def owed_archs(binary: BinaryContents, plan: VariantPlan) -> ArchSet | None:
    """The archs *binary* must carry: the arch set, for a shared object of the plan that an
    nvcc compile went into; None for a C++-only one and for the wheel's other binaries."""
    for link in plan.links:
        if elf.is_member(binary.path, link.wheel_path):
            return link_archs(plan, link)
    return None


def verify_binaries(binaries: Sequence[BinaryContents], plan: VariantPlan) -> list[ArchCheck]:
    """Raise VerificationError naming the arch and the .so when an asked-for arch is missing
    from a shared object that nvcc compiled a source of."""
    checks = []
    for link in plan.links:
        arch_set = link_archs(plan, link)
        if arch_set is None:
            continue
        found = extension_binaries(binaries, link)
        if not found:
            raise VerificationError(
                f"variant {plan.variant.id}: the wheel has no {link.wheel_path}; "
                "the packing step lost it"
            )
        for check in (check_binary(b, arch_set) for b in found):
            checks.append(check)
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
                f"variant {plan.variant.id}: {link.wheel_path} lacks {', '.join(missing)} "
                f"asked for by arch set '{arch_set.name}' ({arch_set}); it carries {present}. "
                "Check the extension's nvcc-flags for -gencode/-arch flags that override the arch set"
            )
    return checks


@dataclass(frozen=True, kw_only=True)
class WheelVerification:
    """What verifying a wheel found: its binaries' fatbins, each checked against the arch set
    (kept for rendering), and the stable-ABI checks (empty for an unstable-ABI build)."""

    binaries: tuple[BinaryContents, ...]
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


def read_wheel(
    wheel_path: Path, plan: VariantPlan
) -> tuple[WheelFacts, list[abicheck.BinaryCheck]]:
    """The one walk over the built wheel (every ELF member's fatbins, and what the rules of the
    plan's ABI flavour need), and those rules' verdict on it."""
    rules = registry.applicable(plan.abi.name)
    wheel = reader.read_wheel(wheel_path, FATBINS | registry.reading(rules))
    guards = shims.header_guards(plan.torch.include_dir)
    versions = shims.versions_file(plan.torch.include_dir.parent)
    target = plan.abi.target
    exports = symbols.LibraryExports(plan.torch.library_dirs)
    context = abicheck.wheel_context(
        wheel, torch=target, guards=guards, versions=versions, torch_exports=exports
    )
    # Each shared object against the torch it was compiled for (its torch-target), the wheel as
    # a whole against its floor (the highest of them).
    own = {link.wheel_path: link.torch_target for link in plan.links if link.torch_target}
    return wheel, abicheck.judge_wheel(wheel, context, rules, plan.abi.name, targets=own)


def verify_wheel(wheel_path: Path, plan: VariantPlan) -> WheelVerification:
    """Fatbins against the arch set, then the rules of the plan's ABI flavour (for the unstable
    ABI, which uses torch's C++ API on purpose: the module-init and layout rules); any failing
    stops the variant."""
    wheel, checks = read_wheel(wheel_path, plan)
    binaries = wheel.contents()
    verify_binaries(binaries, plan)
    # Named by the wheel's file name: the staging folder is gone when the error is read.
    abicheck.require_clean(checks, prefix=f"variant {plan.variant.id}: ", wheel=wheel_path)
    symbols_read = {b.name for b in wheel.binaries if b.symbols is not None}
    return WheelVerification(
        binaries=binaries,
        # The arch set is owed by the plan's shared objects that nvcc compiled into.
        arch_checks=tuple(check_binary(b, owed_archs(b, plan)) for b in binaries),
        # The stable-ABI checks: of the binaries whose symbols the rules read (none for the
        # unstable ABI, whose report says "not-checked").
        abi_checks=tuple(
            c for c in checks if c.path in symbols_read and abis.of(c.flavour).torch_target
        ),
    )
