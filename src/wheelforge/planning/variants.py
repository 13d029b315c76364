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
from pathlib import Path

from wheelforge.configuration import abi
from wheelforge.configuration.archs import Arch, ArchSet
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import fsutil, numbers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.toolchain.choice import ToolkitChoice
from wheelforge.toolchain.provision import RECIPES, recipe_for, unprovisionable
from wheelforge.toolchain.toolkits import Toolkit


@dataclass(frozen=True, kw_only=True)
class Variant:
    id: str  # stable and readable: "<arch set>-cu<major><minor>", e.g. "default-cu130"
    arch_set: ArchSet
    choice: ToolkitChoice
    local_label: str | None  # the wheel's local version label when the matrix has several variants
    torch: str | None = None  # unstable ABI only: the torch version this variant builds against
    # unstable ABI, --torch-from / `torch: installed`: the interpreter whose own torch (of
    # version *torch*) it compiles against, no environment made; None: an environment's
    torch_from: Path | None = None
    # PEP 825 variant label (wheel-variants only): the id in the label alphabet, [0-9a-z_.]
    variant_label: str | None = None
    # The index folder its wheel goes to inside the output folder (cuda-index: folders): "cu124"
    index: str | None = None

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
            why = unprovisionable(entry)  # a PyPI recipe whose packages PyPI lacks
            raise EnvironmentProblem(
                f"cuda: CUDA {entry} was not found (found: {_found_list(found)}), and wheelforge has no recipe "
                f"to provision it{f' ({why})' if why else ''}; install it and set CUDA_HOME, or name one of "
                f"{', '.join(r.release for r in RECIPES)}"
            )
        bad = [a for a in archs if not recipe.supports(a)]
        if bad:
            raise ConfigError(
                f"arch set '{arch_set.name}': CUDA {entry} can't build {bad[0]} "
                f"({bad[0].sass}); {_who_builds(bad[0], found)}"
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
            f"arch set '{arch_set.name}': no toolkit builds {a} ({a.sass}) (found: "
            f"{_found_list(found)}); {_who_builds(a, found)}"
        )
    lo = min(archs, key=Arch.sort_key)
    hi = max(archs, key=Arch.sort_key)
    raise ConfigError(
        f"arch set '{arch_set.name}' mixes archs no single toolkit builds ({lo}: {_who_builds(lo, found)}; "
        f"{hi}: {_who_builds(hi, found)}); split it into two arch sets in matrix.yaml"
    )


def _builds(entry: str, arch_set: ArchSet, found: Sequence[Toolkit]) -> bool:
    """Whether the release *entry* ("X.Y": the one found, else its recipe) builds every arch
    of *arch_set*; an entry wheelforge can neither find nor provision counts as building it, so
    that choose() refuses it in its own words."""
    matching = [t for t in found if t.release == entry]
    if matching:
        return all(matching[0].supports(a) for a in arch_set.archs)
    recipe = recipe_for(entry)
    return recipe is None or all(recipe.supports(a) for a in arch_set.archs)


def _entries_for(entries: Sequence[str], arch_set: ArchSet, found: Sequence[Toolkit]) -> list[str]:
    """The matrix's ``cuda`` entries *arch_set* is built with: each listed release, where a
    release that can't build it (sm_70 under 13.0) is replaced by the newest listed release
    that can (12.4), so an arch set is built once per release that builds it. With no listed
    release able to, the entries stay: choose() refuses the first, naming one that would."""
    listed = [e for e in entries if e != "auto"]
    able = sorted(
        (e for e in listed if _builds(e, arch_set, found)), key=_release_key, reverse=True
    )
    if not able:
        return list(entries)
    return list(dict.fromkeys(e if e == "auto" or e in able else able[0] for e in entries))


def _release_key(entry: str) -> tuple[int, ...]:
    # ASCII digits, bounded (numbers.whole): "²".isdigit() is true and int() of it fails.
    found = (numbers.whole(p, high=numbers.MAX_MINOR) for p in entry.split("."))
    return tuple(n for n in found if n is not None)


@fsutil.gc_paused()  # a large matrix's variants are a long-lived tree of objects
def expand(
    matrix: Matrix, found: Sequence[Toolkit], installed: tuple[str, Path] | None = None
) -> tuple[Variant, ...]:
    """All variants of the matrix, in matrix order, without provisioning anything."""
    # The unstable ABI ties a binary to one torch: one more dimension, torch version.
    flavour = abi.of(matrix.abi)
    # *installed*: the one torch (version, interpreter) of --torch-from / `torch: installed`
    torches = (installed[0],) if installed and flavour.per_torch else flavour.torches(matrix.torch)
    torch_from = installed[1] if installed and flavour.per_torch else None
    combos: dict[str, tuple[ArchSet, ToolkitChoice, str | None]] = {}
    # Arch sets repeat arch lists; the choice depends on the list only (a refusal, which names
    # the set, is raised at the first set that has the list).
    chosen: dict[tuple[str, tuple[Arch, ...]], tuple[ToolkitChoice, str]] = {}
    for arch_set in matrix.arch_sets:
        for entry in _entries_for(matrix.cuda, arch_set, found):
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
    folders = not labelled and _index_folders(matrix, [c for _, c, _ in combos.values()])
    # Within one output folder (or index folder), a local label tells the wheels apart.
    shared: dict[str | None, int] = {}
    for _, choice, _ in combos.values():
        folder = choice.short if folders else None
        shared[folder] = shared.get(folder, 0) + 1
    variants = []
    for vid, (arch_set, choice, torch) in combos.items():
        index = choice.short if folders else None
        several = shared[index] > 1 and not labelled
        variants.append(
            Variant(
                id=vid,
                arch_set=arch_set,
                choice=choice,
                local_label=_label(vid, index) if several else None,
                torch=torch,
                torch_from=torch_from,
                variant_label=vid.replace("-", "_") if labelled else None,
                index=index,
            )
        )
    return tuple(variants)


def _index_folders(matrix: Matrix, choices: Sequence[ToolkitChoice]) -> bool:
    """Whether each CUDA release's wheels go to an index folder of their own (cu124/, cu130/):
    ``cuda-index: folders``, or ``auto`` with toolkits of several CUDA majors (a binary of one
    major can't serve the other's torch, so both are published, side by side, as torch is)."""
    if matrix.cuda_index != "auto":
        return matrix.cuda_index == "folders"
    return len({c.release.split(".")[0] for c in choices}) > 1


def _label(vid: str, folder: str | None) -> str:
    """The local version label of variant *vid*: its id in PEP 440's alphabet, less the CUDA
    release when the release has its own index folder (*folder*)."""
    words = vid.split("-")
    if folder is not None:
        words = [w for w in words if w != folder]
    return ".".join(words).replace("_", ".")


def select(
    variants: Sequence[Variant], only: Sequence[str], *, flag: str = "--only"
) -> list[Variant]:
    """The variants named by *flag* (--only; -C only for the PEP 517 backend), all of them when
    none is named."""
    if not only:
        return list(variants)
    ids = [v.id for v in variants]
    unknown = [o for o in only if o not in ids]
    if unknown:
        raise ConfigError(
            f"{flag} {unknown[0]}: no such variant; the matrix has {', '.join(ids)} "
            "('wheelforge matrix' lists them)"
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
    return dataclasses.replace(variant, choice=ToolkitChoice(toolkit=toolkit, recipe=None))
