"""A toolkit chosen for an arch set (one found on the machine, or a recipe still to provision),
and the provisioning policy: when a chosen recipe is installed, and when that is refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.configuration.archs import Arch
from wheelforge.foundation import log
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.toolchain import provision
from wheelforge.toolchain.provision import Recipe
from wheelforge.toolchain.toolkits import Toolkit, load_provisioned, mark_used


@dataclass(frozen=True, kw_only=True)
class ToolkitChoice:
    """A toolkit for a variant: one found on the machine, or a recipe still to provision."""

    toolkit: Toolkit | None
    recipe: Recipe | None

    @property
    def release(self) -> str:
        if self.toolkit is not None:
            return self.toolkit.release
        assert self.recipe is not None
        return self.recipe.release

    @property
    def short(self) -> str:
        return "cu" + self.release.replace(".", "")

    def describe(self) -> str:
        if self.toolkit is not None:
            return self.toolkit.describe()
        assert self.recipe is not None
        return f"{self.recipe.describe()}, to be provisioned"


def ensure_toolkit(
    choice: ToolkitChoice,
    *,
    who: str,
    archs: Sequence[Arch],
    found: Sequence[Toolkit],
    cache: Path,
    offline: bool,
) -> ToolkitChoice:
    """*choice* with a toolkit on disk: a recipe is provisioned now, unless *offline* (then the
    refusal names the archs no toolkit found builds). *who* names the variant in messages. A
    provisioned toolkit chosen is marked used (not one merely discovered: `cache prune` goes by it)."""
    recipe = choice.recipe
    if choice.toolkit is not None:
        mark_used(choice.toolkit, cache)
        return choice
    if recipe is None:
        return choice
    if offline:
        unbuilt = [a for a in archs if not any(t.supports(a) for t in found)]
        why = (
            f" for {', '.join(f'{a} ({a.sass})' for a in unbuilt)}, which none of them builds"
            if unbuilt
            else ""
        )
        raise EnvironmentProblem(
            f"{who} needs CUDA {recipe.release}, which is not installed (found: "
            f"{'; '.join(t.describe() for t in found) or 'none'}){why}; run 'wheelforge toolkit install "
            f"{recipe.release}' ({recipe.describe()}) or build without --offline"
        )
    unbuilt = [a for a in archs if not any(t.supports(a) for t in found)]
    log.info(
        f"{who} needs CUDA {recipe.release} for {', '.join(str(a) for a in unbuilt or archs)}, "
        f"which no toolkit found builds (found: {'; '.join(t.describe() for t in found) or 'none'}): "
        f"provisioning {recipe.describe()} into the cache; --offline refuses this instead"
    )
    folder = provision.install(recipe, cache)
    provisioned = load_provisioned(folder, cache=cache)
    mark_used(provisioned, cache)
    return ToolkitChoice(toolkit=provisioned, recipe=None)
