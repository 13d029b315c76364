"""Variants: the matrix expanded into what is built, one per (arch set × CUDA toolkit) for the
stable ABI (torch versions don't multiply variants: one binary serves them all).

Choosing the toolkit of an arch set happens here, before anything is compiled: a toolkit named
in the matrix (``cuda: ["13.0"]``) must build every arch of the set; ``auto`` takes the newest
toolkit found that does, else the newest one wheelforge can provision. Every refusal names the
arch, the toolkits found and a toolkit that would work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from wheelforge.configuration import abi
from wheelforge.configuration.archs import Arch, ArchSet
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import fsutil
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.toolchain.choice import ToolkitChoice
from wheelforge.toolchain.provision import RECIPES, recipe_for
from wheelforge.toolchain.toolkit import Toolkit


@dataclass(frozen=True, kw_only=True)
class Variant:
    id: str  # stable and readable: "<arch set>-cu<major><minor>", e.g. "default-cu130"
    arch_set: ArchSet
    choice: ToolkitChoice
    local_label: str | None  # the wheel's local version label when the matrix has several variants
    torch: str | None = None  # unstable ABI only: the torch version this variant builds against
    # PEP 825 variant label (wheel-variants only): the id in the label alphabet, [0-9a-z_.]
    variant_label: str | None = None

    @property
    def toolkit(self) -> Toolkit:
        if self.choice.toolkit is None:
            raise ConfigError(f"variant {self.id}: its toolkit is not provisioned yet")
        return self.choice.toolkit


def _who_builds(arch: Arch, found: Sequence[Toolkit]) -> str:
    """A toolkit that builds *arch*: one found, else a recipe, else a hint."""
    for t in found:
        if t.supports(arch):
            return f"CUDA {t.version} at {t.root} builds it"
    for r in RECIPES:
        if r.supports(arch):
            return f"CUDA {r.release} builds it: run 'wheelforge toolkit install {r.release}' ({r.describe()})"
    return "no CUDA toolkit wheelforge knows builds it; check the arch"


def _found_list(found: Sequence[Toolkit]) -> str:
    return "; ".join(t.describe() for t in found) or "none"


def choose(entry: str, arch_set: ArchSet, found: Sequence[Toolkit]) -> ToolkitChoice:
    """The toolkit for *arch_set* under a matrix ``cuda`` entry ("auto" or "X.Y")."""
    archs = arch_set.archs
    if entry != "auto":
        matching = [t for t in found if t.release == entry]
        if matching:
            toolkit = matching[0]
            bad = [a for a in archs if not toolkit.supports(a)]
            if bad:
                raise ConfigError(
                    f"arch set '{arch_set.name}': CUDA {toolkit.version} at {toolkit.root} can't build "
                    f"{bad[0]} ({bad[0].sass}); it builds {toolkit.describe_range()}; {_who_builds(bad[0], found)}"
                )
            return ToolkitChoice(toolkit=toolkit, recipe=None)
        recipe = recipe_for(entry)
        if recipe is None:
            raise EnvironmentProblem(
                f"cuda: CUDA {entry} was not found (found: {_found_list(found)}), and wheelforge has no recipe "
                f"to provision it; install it and set CUDA_HOME, or name one of {', '.join(r.release for r in RECIPES)}"
            )
        bad = [a for a in archs if not recipe.supports(a)]
        if bad:
            raise ConfigError(
                f"arch set '{arch_set.name}': CUDA {entry} can't build {bad[0]} ({bad[0].sass}); {_who_builds(bad[0], found)}"
            )
        return ToolkitChoice(toolkit=None, recipe=recipe)
    for toolkit in found:  # newest first
        if all(toolkit.supports(a) for a in archs):
            return ToolkitChoice(toolkit=toolkit, recipe=None)
    for recipe in RECIPES:  # newest first
        if all(recipe.supports(a) for a in archs):
            return ToolkitChoice(toolkit=None, recipe=recipe)
    buildable = [
        a for a in archs if any(t.supports(a) for t in found) or any(r.supports(a) for r in RECIPES)
    ]
    unbuildable = [a for a in archs if a not in buildable]
    if unbuildable:
        a = unbuildable[0]
        raise EnvironmentProblem(
            f"arch set '{arch_set.name}': no toolkit builds {a} ({a.sass}) (found: {_found_list(found)}); {_who_builds(a, found)}"
        )
    lo = min(archs, key=Arch.sort_key)
    hi = max(archs, key=Arch.sort_key)
    raise ConfigError(
        f"arch set '{arch_set.name}' mixes archs no single toolkit builds ({lo}: {_who_builds(lo, found)}; "
        f"{hi}: {_who_builds(hi, found)}); split it into two arch sets in matrix.yaml"
    )


def expand(matrix: Matrix, found: Sequence[Toolkit]) -> tuple[Variant, ...]:
    """All variants of the matrix, in matrix order, without provisioning anything."""
    with fsutil.gc_paused():
        return _expand(matrix, found)


def _expand(matrix: Matrix, found: Sequence[Toolkit]) -> tuple[Variant, ...]:
    # The unstable ABI ties a binary to one torch: one more dimension, torch version.
    torches = abi.of(matrix.abi).torches(matrix.torch)
    combos: dict[str, tuple[ArchSet, ToolkitChoice, str | None]] = {}
    # Arch sets repeat arch lists; the choice depends on the list only (a refusal, which names
    # the set, is raised at the first set that has the list).
    chosen: dict[tuple[str, tuple[Arch, ...]], tuple[ToolkitChoice, str]] = {}
    for arch_set in matrix.arch_sets:
        for entry in matrix.cuda:
            key = (entry, arch_set.archs)
            if key not in chosen:
                choice = choose(entry, arch_set, found)
                chosen[key] = (choice, choice.short)
            choice, short = chosen[key]
            for torch in torches:
                suffix = "-torch" + "".join(torch.split(".")[:2]) if torch else ""
                combos.setdefault(f"{arch_set.name}-{short}{suffix}", (arch_set, choice, torch))
    # Variant wheels of one release share its version: the variant label tells them apart.
    labelled = matrix.variant_wheels
    several = len(combos) > 1 and not labelled
    return tuple(
        Variant(
            id=vid,
            arch_set=arch_set,
            choice=choice,
            local_label=vid.replace("-", ".").replace("_", ".") if several else None,
            torch=torch,
            variant_label=vid.replace("-", "_") if labelled else None,
        )
        for vid, (arch_set, choice, torch) in combos.items()
    )


def select(variants: Sequence[Variant], only: Sequence[str]) -> list[Variant]:
    """The variants named by --only (all of them when none is named)."""
    if not only:
        return list(variants)
    ids = [v.id for v in variants]
    unknown = [o for o in only if o not in ids]
    if unknown:
        raise ConfigError(
            f"--only {unknown[0]}: no such variant; the matrix has {', '.join(ids)} ('wheelforge matrix' lists them)"
        )
    return [v for v in variants if v.id in only]


def null_variant(variants: Sequence[Variant], matrix: Matrix) -> Variant | None:
    """The variant whose build is also published as the PEP 825 null variant, if the matrix
    names one (an arch set with one variant, or a variant id). None also when it is not among
    *variants*: the reader checked the name, and --only or an arch override may leave it out."""
    wanted = matrix.wheel_variants.null if matrix.wheel_variants else None
    if wanted is None or not matrix.variant_wheels:
        return None
    exact = [v for v in variants if v.id == wanted]
    by_set = [v for v in variants if v.arch_set.name == wanted]
    chosen = exact or by_set
    if len(chosen) > 1:
        raise ConfigError(
            f"{matrix.path}: wheel-variants.null: '{wanted}' matches several variants "
            f"({', '.join(v.id for v in chosen)}); name one of them"
        )
    return chosen[0] if chosen else None


def with_toolkit(variant: Variant, toolkit: Toolkit) -> Variant:
    return with_choice(variant, ToolkitChoice(toolkit=toolkit, recipe=None))


def with_choice(variant: Variant, choice: ToolkitChoice) -> Variant:
    return dataclasses.replace(variant, choice=choice)
