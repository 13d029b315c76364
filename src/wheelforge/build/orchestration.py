"""``wheelforge build``: settings → the variants (toolkits on disk, the output folders probed)
→ one plan per variant → each built (build/variant.py), and rebuilt in another folder for
--verify-reproducible → the variant index → a BuildReport, under the build folder's lock."""

from __future__ import annotations

import contextlib
import time

from wheelforge.build import compiling, importcheck, preflight, together
from wheelforge.build.prepare import folders, resolve_variants, using_cached
from wheelforge.build.results import BuildReport, VariantFailure, VariantResult
from wheelforge.build.variant import build_variant
from wheelforge.configuration import abi
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import locks, log, removal
from wheelforge.packaging import wheel
from wheelforge.planning import variants
from wheelforge.planning.plan import VariantPlan
from wheelforge.planning.planner import plan_all, plan_inputs
from wheelforge.toolchain import compilecache, warmtorch


def _sweep(settings: BuildSettings) -> None:
    """Remove what runs killed while packing or publishing left (staging folders of 2x the
    wheel, hidden ``.part`` files): under the build folder's lock, nothing of another build's
    is there; in the output folder, only leftovers whose process is gone (removal.sweep)."""
    removed = removal.sweep(settings.out_dir, within=settings.out_dir)
    with contextlib.suppress(OSError):
        for folder in settings.build_root.iterdir():
            if folder.is_dir() and not folder.is_symlink():
                removed += removal.sweep(folder, within=settings.build_root)
    if removed:
        log.info(f"removed {len(removed)} leftover(s) of an interrupted build, e.g. {removed[0]}")


def run_build(settings: BuildSettings) -> BuildReport:
    """The build of *settings*' variants: the folders it writes probed and tidied, the variants
    resolved (toolkits on disk), then under the build folder's lock (and a warm torch) each
    planned, built and reported."""
    if not settings.matrix.extensions:  # nothing to compile: one py3-none-any wheel
        from wheelforge.build import purewheel

        return purewheel.build(settings)
    start = time.perf_counter()
    with contextlib.ExitStack() as held:
        held.enter_context(preflight.tidy(folders(settings)))
        chosen = resolve_variants(settings, probe=True)
        lock = settings.build_root / locks.LOCK_NAME
        what = f"the build folder {settings.build_root}"
        held.enter_context(locks.hold(lock, what=what, wait=settings.wait))
        held.enter_context(warmtorch.session())
        _sweep(settings)
        compile_cache = _compile_cache(settings)
        inputs = plan_inputs(settings, compile_cache)
        plans = plan_all(settings, chosen, inputs, early=True)
        m = settings.matrix
        for plan in plans:  # before anything compiles
            wheel.require_valid_metadata(plan, m.path)
        flavour = abi.of(m.abi)
        labels = sorted({p.torch.label for p in plans})
        _announce(settings, plans, labels)
        if plans:
            importcheck.warn_if_torch_not_imported_first(plans[0])
        null = variants.null_variant([p.variant for p in plans], m)
        with using_cached(plans, settings.cache_dir):
            # Side by side where the memory and the tools allow (together.py), else in turn.
            outcomes = together.build(
                plans,
                lambda p: build_variant(p, inputs, settings, null=p.variant == null),
                workers=together.at_once(plans),
            )
            if settings.verify_reproducible:  # the twin compiles with no cache (inputs.twin)
                from wheelforge.build import reproduce

                outcomes = [
                    reproduce.verify(o, p, inputs, settings) if isinstance(o, VariantResult) else o
                    for o, p in zip(outcomes, plans, strict=True)
                ]
        if removed := compiling.tidy_shared(settings.build_root, plans):
            log.detail(f"removed {len(removed)} shared build folder(s) no variant links any more")
        # Each CUDA release's index folder (cuda-index: folders) is a package index pip can use.
        for folder in sorted({p.out_dir for p in plans if p.variant.index}):
            from wheelforge.packaging import simpleindex

            simpleindex.write(folder, m.package.name, m.package.wheel_name)
        index = None
        if m.variant_wheels:
            from wheelforge.packaging import wheel_variants

            # The whole output folder: variants built by other jobs and collected here count too.
            index = wheel_variants.write_index_json(
                settings.out_dir, m.package.wheel_name, m.package.version
            )
        return BuildReport(
            matrix=settings.matrix.path,
            abi=flavour.name,
            target_version=settings.matrix.torch.floor,
            built_against=", ".join(labels) if flavour.per_torch else plans[0].torch.label,
            variants=tuple(o for o in outcomes if isinstance(o, VariantResult)),
            failures=tuple(o for o in outcomes if isinstance(o, VariantFailure)),
            seconds=time.perf_counter() - start,
            variants_json=index,
            test_torches=m.tests.torch if m.tests is not None else None,
            no_compile_cache=(
                compilecache.none_reason(settings.compile_cache, settings.compile_cache_source)
                if compile_cache is None
                else None
            ),
        )


def _compile_cache(settings: BuildSettings) -> compilecache.CompileCache | None:
    """The compile cache the build's compiles go through (with the sccache-dist scheduler,
    where one is given), or None."""
    dist = None
    if settings.dist_scheduler and settings.dist_token:
        dist = compilecache.Dist(
            scheduler=settings.dist_scheduler,
            token=settings.dist_token,
            toolchains=settings.cache_dir / compilecache.DIST_TOOLCHAINS,
        )
    return compilecache.resolve(settings.compile_cache, settings.matrix.root, dist=dist)


def _announce(settings: BuildSettings, plans: list[VariantPlan], labels: list[str]) -> None:
    """The build's first line: how many variants of what, for which torch, archs from where."""
    m = settings.matrix
    flavour = abi.of(m.abi)
    if not flavour.per_torch:
        targets = sorted({m.torch_target_of(e) for e in m.extensions} or {m.torch.target})
        said = ", ".join(f"{major}.{minor}" for major, minor in targets)
        target = f"target{'s' if len(targets) > 1 else ''} {said}"
        how = (
            f"for torch {m.torch.requirement[5:]} (stable ABI {target}, "
            f"built against torch {plans[0].torch.label})"
        )
    else:
        how = f"for torch {', '.join(labels)} (unstable ABI: one build each)"
    what = f"{len(plans)} variant{'' if len(plans) == 1 else 's'} of {m.package.name} {m.package.version}"
    log.info(f"building {what} {how}; archs from {settings.arch_source}")
