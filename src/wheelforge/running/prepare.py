"""Before anything compiles: settings → the variants to build, each with its toolkit on disk
(refusals and the output folders' preflight first) → torch probed once per torch → one plan per
variant."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import locks
from wheelforge.planning import variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running import incremental
from wheelforge.running.preflight import preflight
from wheelforge.toolchain import compilecache, envs, provision, toolkit, torchprobe
from wheelforge.toolchain.choice import ensure_toolkit


def folders(settings: BuildSettings) -> dict[str, Path]:
    """The folders a build writes, by the flag that sets each."""
    return {
        "--out": settings.out_dir,
        "--build-dir": settings.build_root,
        "--cache-dir": settings.cache,
    }


def resolve_variants(settings: BuildSettings, *, probe: bool = False) -> list[Variant]:
    """The variants to build, each with its toolkit (provisioned now where needed). Everything
    that can be refused without a compiler is refused here, before anything is downloaded or
    compiled; with *probe*, the folders the build writes are then probed (preflight.py), still
    before any download."""
    found = toolkit.discover(cache=settings.cache, pythons=(settings.python,))
    chosen = selected(settings, found)

    def ready(v: Variant) -> Variant:
        choice = ensure_toolkit(v.choice, who=f"variant {v.id}", archs=v.arch_set.archs,
                                found=found, cache=settings.cache, offline=settings.offline)  # fmt: skip
        return variants.with_choice(v, choice)

    if probe:
        if settings.offline:  # its refusals come first: nothing is written for a refused build
            chosen = [ready(v) for v in chosen]
        preflight(settings.matrix, folders(settings))
    return [ready(v) for v in chosen]


def selected(settings: BuildSettings, found: Sequence[toolkit.Toolkit]) -> list[Variant]:
    """The matrix's variants that ``--only`` keeps, each with a toolkit in *found* or a recipe."""
    return variants.select(variants.expand(settings.matrix, found), settings.only)


def has_cuda_sources(matrix: Matrix) -> bool:
    """Whether the extension compiles any ``.cu`` source (then an unstable-ABI build needs a
    CUDA build of torch: its CUDA headers and libc10_cuda)."""
    return any(
        path.suffix == ".cu"
        for spec in matrix.extension.sources
        for path in matrix.root.glob(spec.pattern)
    )


def _build_torch(variant: Variant, settings: BuildSettings, *, early: bool) -> torchprobe.TorchEnv:
    tests = settings.matrix.tests
    return envs.build_torch(
        variant.torch,
        python=settings.python,
        requires=tests.requires if tests else (),
        cache=settings.cache,
        cuda=variant.torch is not None and has_cuda_sources(settings.matrix),
        early=early,
    )


def plan_variant(variant: Variant, torch: torchprobe.TorchEnv, settings: BuildSettings, *,
                 cache: compilecache.CompileCache | None = None, build_root: Path | None = None,
                 out_dir: Path | None = None) -> VariantPlan:  # fmt: skip
    """The plan of one variant, compiling through *cache* when given; another *build_root* and
    *out_dir* give its twin for ``--verify-reproducible``."""
    launchers = incremental.launchers(settings, cache)
    plan = make_plan(
        matrix=settings.matrix,
        variant=variant,
        torch=torch,
        weak_header=torchprobe.weak_shims_header(
            torchprobe.cuda_only_shims(torch.include_dir, cache=settings.cache)
        ),
        build_root=build_root or settings.build_root,
        out_dir=out_dir or settings.out_dir,
        cxx=settings.cxx,
        cc=settings.cc,
        nvcc_host=toolkit.host_compiler(variant.toolkit, settings.cxx, cache=settings.cache),
        nvcc_threads=settings.nvcc_threads,
        cxx_launcher=launchers[0],
        cc_launcher=launchers[1],
        cuda_launcher=launchers[2],
    )
    return incremental.with_threads(plan, settings)


def plan_all(
    settings: BuildSettings,
    chosen: list[Variant] | None = None,
    cache: compilecache.CompileCache | None = None,
    *,
    early: bool = False,
) -> list[VariantPlan]:
    """A plan per variant (each with its toolkit on disk: *chosen*, else resolve_variants),
    compiling through *cache* when given. *early*: torch may be read from its files, to be
    confirmed before packing (torchprobe.probe_torch); a build does that, a dry run does not."""
    matrix = settings.matrix
    chosen = resolve_variants(settings) if chosen is None else chosen
    plans = []
    probed: dict[str | None, torchprobe.TorchEnv] = {}
    for variant in chosen:
        if variant.torch not in probed:
            torch = probed[variant.torch] = _build_torch(variant, settings, early=early)
            if matrix.abi == "stable":
                torchprobe.check_target(torch, matrix.torch.lowest)
        plans.append(plan_variant(variant, probed[variant.torch], settings, cache=cache))
    return plans


def using_cached(plans: Sequence[VariantPlan], cache: Path) -> contextlib.ExitStack:
    """Shared locks on the cached toolkits and torch environments *plans* compile with, held
    while they do: `wheelforge cache prune` skips an entry in use, and nothing removes it
    under a running build."""
    stack = contextlib.ExitStack()
    held: set[Path] = set()
    for plan in plans:
        cached = (
            (provision.lock_path, "the toolkit", toolkit.provisioned_folder(plan.variant.toolkit, cache)),
            (envs.lock_path, "the torch environment", envs.folder_of(plan.torch.python, cache)),
        )  # fmt: skip
        for lock_of, what, folder in cached:
            if folder is not None and folder not in held:
                held.add(folder)
                stack.enter_context(locks.share(lock_of(folder), what=f"{what} {folder}"))
    return stack
