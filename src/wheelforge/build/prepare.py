"""Before anything is planned or compiled: settings → the variants to build, each with its
toolkit on disk (the refusals and the output folders' preflight first); while the plans
compile, shared locks on the cached toolkits and environments they use."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from wheelforge.build.preflight import preflight
from wheelforge.configuration import abi
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import locks
from wheelforge.planning import buildtorch, variants
from wheelforge.planning.plan import VariantPlan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain import envs, provision, torchprobe
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.choice import ensure_toolkit


def folders(settings: BuildSettings) -> dict[str, Path]:
    """The folders a build writes, by the flag that sets each."""
    return {
        "--out": settings.out_dir,
        "--build-dir": settings.build_root,
        "--cache-dir": settings.cache_dir,
    }


def resolve_variants(settings: BuildSettings, *, probe: bool = False) -> list[Variant]:
    """The variants to build, each with its toolkit (provisioned now where needed). Everything
    that can be refused without a compiler is refused here, before anything is downloaded or
    compiled; with *probe*, the folders the build writes are then probed (preflight.py), still
    before any download."""
    found = toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    chosen = selected(settings, found)

    def ready(v: Variant) -> Variant:
        choice = ensure_toolkit(
            v.choice,
            who=f"variant {v.id}",
            archs=v.arch_set.archs,
            found=found,
            cache=settings.cache_dir,
            offline=settings.offline,
        )
        return dataclasses.replace(v, choice=choice)

    if probe:
        if settings.offline:  # its refusals come first: nothing is written for a refused build
            chosen = [ready(v) for v in chosen]
        preflight(settings.matrix, folders(settings))
    return [ready(v) for v in chosen]


def selected(settings: BuildSettings, found: Sequence[toolkit.Toolkit]) -> list[Variant]:
    """The matrix's variants that ``--only`` keeps, each with a toolkit in *found* or a recipe.
    With an installed torch (--torch-from, `torch: installed`), the variants for its version,
    less those of another CUDA major than it (buildtorch.pairs), before anything is provisioned."""
    torch = installed_torch(settings)
    installed = (str(torch.version), settings.torch_from) if torch and settings.torch_from else None
    chosen = variants.select(variants.expand(settings.matrix, found, installed), settings.only)
    if installed is None or torch is None or not abi.of(settings.matrix.abi).per_torch:
        return chosen
    return buildtorch.pairs(chosen, {installed: torch})


def installed_torch(settings: BuildSettings) -> torchprobe.TorchEnv | None:
    """The torch an unstable-ABI build borrows (--torch-from, `torch: installed`), None when
    the build makes environments of its own. The answer is cached while the interpreter's files
    are unchanged (torchprobe)."""
    if settings.torch_from is None:
        return None
    return torchprobe.probe_torch(settings.torch_from, cache=settings.cache_dir)


def using_cached(plans: Sequence[VariantPlan], cache_dir: Path) -> contextlib.ExitStack:
    """Shared locks on the cached toolkits and torch environments *plans* compile with, held
    while they do: `wheelforge cache prune` skips an entry in use, and nothing removes it
    under a running build."""
    stack = contextlib.ExitStack()
    held: set[Path] = set()
    for plan in plans:
        toolkit_folder = toolkit.provisioned_folder(plan.variant.toolkit, cache_dir)
        cached = (
            (provision.lock_path, "the toolkit", toolkit_folder),
            (envs.lock_path, "the torch environment", envs.folder_of(plan.torch.python, cache_dir)),
        )
        for lock_of, what, folder in cached:
            if folder is not None and folder not in held:
                held.add(folder)
                stack.enter_context(locks.share(lock_of(folder), what=f"{what} {folder}"))
    return stack
