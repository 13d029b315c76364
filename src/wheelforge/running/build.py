"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from wheelforge.binaries.sizecheck import SizeCheck, check_size
from wheelforge.binaries.verify import WheelVerification, verify_wheel
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, locks, log
from wheelforge.foundation.errors import (
    BuildError,
    EnvironmentProblem,
    Interrupted,
    WheelforgeError,
)
from wheelforge.packaging import repair, simpleindex, stamp, wheel, wheel_variants
from wheelforge.planning import variants
from wheelforge.planning.plan import VariantPlan
from wheelforge.planning.variants import Variant
from wheelforge.running import budget, importcheck, incremental, preflight, reproduce
from wheelforge.running.preflight import describe_os_error
from wheelforge.running.prepare import (
    folders,
    plan_all,
    plan_variant,
    resolve_variants,
    using_cached,
)
from wheelforge.running.results import BuildReport, VariantFailure, VariantResult
from wheelforge.toolchain import compilecache, torchprobe, warmtorch


class _Stages:
    """Times of a variant's stages, and its size check once there is one (kept when it fails)."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self.size: SizeCheck | None = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.times.append((name, round(time.perf_counter() - start, 3)))


def build_variant(
    plan: VariantPlan,
    settings: BuildSettings,
    cache: compilecache.CompileCache | None = None,
    *,
    null: bool = False,
    keep_repairs: bool = True,
) -> VariantResult | VariantFailure:
    """Build one variant (and, with *null*, also publish it as the PEP 825 null variant); a
    failure is returned as data (with the error), not raised, so the other variants still
    build and the report says which failed and why. Without *keep_repairs*, auditwheel runs
    even where a kept repair of the same bytes exists (repair.py): the reproducibility twin's
    wheel must come from its own repair."""
    start = time.perf_counter()
    stages = _Stages()
    variant = plan.variant
    try:
        kept = settings.cache if keep_repairs else None
        return _build_variant(plan, settings, stages, start, cache, null=null, kept=kept)
    except Interrupted:
        raise  # SIGINT or SIGTERM ends the whole build, not one variant
    except WheelforgeError as exc:
        return VariantFailure(
            variant_id=variant.id,
            arch_set=variant.arch_set,
            toolkit=str(variant.toolkit.version),
            torch=plan.torch.label,
            error=exc,
            size=stages.size,
            stages=tuple(stages.times),
            seconds=time.perf_counter() - start,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Published:
    wheel: Path
    found: WheelVerification
    import_check: str | None = None  # what the import check ran; None: skipped
    variant_properties: tuple[str, ...] = ()
    null_wheel: Path | None = None


def _build_variant(
    plan: VariantPlan,
    settings: BuildSettings,
    stages: _Stages,
    start: float,
    cache: compilecache.CompileCache | None,
    *,
    null: bool,
    kept: Path | None,
) -> VariantResult:
    variant = plan.variant
    title = f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    with log.group(title), log.step(title), stages.stage("compile"):
        plan, steps, cache_stats = _compile(plan, settings, cache)
        compiled = [s for s in steps if s in ("CXX", "CC", "NVCC")]
        counted = f"compiled {len(compiled)} of {len(plan.compile_steps)} sources"
        log.info(f"  {counted if compiled else 'nothing to compile: up to date'}")

    contents = wheel.contents(plan, repair.build_platform(), incremental.dist_info_files(plan))
    digest = contents.digest()
    # A variant wheel is always re-packed (seconds; compiling stays incremental): the ABI check
    # reads tags from a wheel's name, which a variant label makes unparsable to packaging.
    reusable = (
        None if variant.variant_label else stamp.reusable(plan.build_dir, plan.out_dir, digest)
    )
    done = _reuse(reusable, plan, settings, stages) if reusable else None
    if done is None:
        title = f"{plan.variant.id}: pack, repair and check the wheel"
        with log.group(title), log.step(title):
            done = _pack_and_publish(plan, contents, settings, stages, null=null, kept=kept)
        stamp.write(plan.build_dir, digest=digest, wheel=done.wheel, index=variant.index)
        incremental.remember_verification(done.wheel, plan, done.found, done.import_check)
    published, found, reused = done.wheel, done.found, reusable is not None
    assert stages.size is not None  # _check sets it
    return VariantResult(
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        torch=plan.torch.label,
        wheel=published,
        wheel_size=published.stat().st_size,
        sha256=stamp.sha256(published),
        sources=len(plan.compile_steps),
        compiled=tuple(compiled),
        reused=reused,
        binaries=found.binaries,
        arch_checks=found.arch_checks,
        abi_checks=found.abi_checks,
        size=stages.size,
        stages=tuple(stages.times),
        seconds=time.perf_counter() - start,
        import_check=done.import_check,
        variant_label=variant.variant_label,
        variant_properties=done.variant_properties,
        null_wheel=done.null_wheel,
        compile_cache=cache_stats,
    )


def _reuse(
    reusable: Path, plan: VariantPlan, settings: BuildSettings, stages: _Stages
) -> _Published:
    """The published wheel, still made from these inputs: its stored findings (the same bytes
    give the same ones), the size budget checked again, the import check reused."""
    log.info(f"  {reusable} is up to date")
    with stages.stage("verify"):
        before = incremental.verified_before(reusable, plan)
        found = _check(reusable, plan, settings, stages, before[0] if before else None)
        imported = None
        if settings.import_check:  # imported when published, unless that was skipped
            imported = (before[1] if before else None) or _import_check(reusable, plan, settings)
    return _Published(wheel=reusable, found=found, import_check=imported)


def _compile(
    plan: VariantPlan, settings: BuildSettings, cache: compilecache.CompileCache | None
) -> tuple[VariantPlan, list[str], compilecache.CacheStats | None]:
    """Compile; when the plan's torch was read from torch's files (torchprobe.probe_torch's
    *early*), torch's own answer, awaited now (or when the compile failed), decides: a different
    one is planned and compiled again, so neither a wheel nor an error rests on the guess."""
    steps: list[str] = []
    stats = None
    try:
        steps, stats = incremental.compile_variant(
            plan, settings.jobs, cache, before_ninja=_before_ninja(plan, settings)
        )
    except BuildError:
        if torchprobe.confirm(plan.torch, cache=settings.cache) == plan.torch:
            raise
    torch = torchprobe.confirm(plan.torch, cache=settings.cache)
    if torch == plan.torch:
        return dataclasses.replace(plan, torch=torch), steps, stats  # its watch list
    log.warning(f"torch {torch.label} answered otherwise than its files read: compiling again")
    plan = plan_variant(plan.variant, torch, settings, cache=cache)
    again, stats = incremental.compile_variant(plan, settings.jobs, cache)
    return plan, steps + again, stats


def _before_ninja(plan: VariantPlan, settings: BuildSettings) -> Callable[[], None]:
    """What overlaps the compile: the import check's child imports torch (toolchain/warmtorch),
    and the modules packing needs (cyclonedx, wheel: ~0.2 s) load in a thread."""

    def start() -> None:
        if settings.import_check:
            warmtorch.warm(plan.torch.python)
        threading.Thread(target=_preload, name="wheelforge-preload", daemon=True).start()

    return start


def _preload() -> None:
    import wheel.wheelfile  # noqa: F401

    from wheelforge.packaging import sbom  # noqa: F401


def _import_check(wheel_path: Path, plan: VariantPlan, settings: BuildSettings) -> str | None:
    if not settings.import_check:
        return None
    return importcheck.check_import(wheel_path, plan, cache=settings.cache)


def _check(
    wheel_path: Path,
    plan: VariantPlan,
    settings: BuildSettings,
    stages: _Stages,
    found: WheelVerification | None = None,
) -> WheelVerification:
    """Fatbins against the arch set, the stable-ABI rules (verify_wheel, unless *found* holds its
    findings on these bytes), then the size budget; any failing stops the variant."""
    found = found or verify_wheel(wheel_path, plan)
    stages.size = check_size(
        wheel_size=wheel_path.stat().st_size,
        budget=settings.size_budget,
        binaries=found.binaries,
        toolkit=(plan.variant.toolkit.version.major, plan.variant.toolkit.version.minor),
        nvcc_flags=plan.matrix.extension.nvcc_flags,
        wheel=wheel_path,
    )
    if stages.size.over:
        raise budget.over_budget(
            plan, wheel_path, stages.size, published=wheel_path.parent == plan.out_dir
        )
    return found


def _pack_and_publish(
    plan: VariantPlan,
    contents: wheel.WheelContents,
    settings: BuildSettings,
    stages: _Stages,
    *,
    null: bool,
    kept: Path | None,
) -> _Published:
    """Pack, repair, check and import in a staging folder; only a wheel that passed reaches the
    output."""
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
    try:
        with stages.stage("package"):
            raw = wheel.pack(contents, stage / "raw", compress=False)  # repair deflates
            repaired = repair.repair(raw, stage / "repaired",
                                     source_date_epoch=wheel.source_date_epoch(),
                                     cache=kept)  # fmt: skip
        with stages.stage("verify"):
            found = _check(repaired, plan, settings, stages)
            imported = _import_check(repaired, plan, settings)
        with stages.stage("publish"):
            outputs, props = [repaired], tuple[str, ...]()
            if plan.variant.variant_label:
                outputs, props = wheel_variants.for_plan(
                    plan, repaired, found.binaries, stage, null=null
                )
            for made in outputs:
                previous = plan.out_dir / made.name
                if previous.is_file() and stamp.sha256(previous) != stamp.sha256(made):
                    log.warning(
                        f"replacing {previous}: same name, other content (another arch set or toolkit?)"
                    )
            try:
                done = [fsutil.publish(made, plan.out_dir) for made in outputs]
            except OSError as exc:
                raise EnvironmentProblem(
                    f"--out {plan.out_dir}: cannot write {outputs[0].name}: {describe_os_error(exc)}"
                ) from None
            published = done[0]
    finally:
        shutil.rmtree(stage, ignore_errors=True)

    # Name what was read after the published wheel, not the staging copy.
    stages.size = stages.size and stages.size.moved(repaired, published)
    return _Published(
        wheel=published,
        found=found.moved(repaired, published),
        import_check=imported,
        variant_properties=props,
        null_wheel=done[1] if len(done) > 1 else None,
    )


def run_build(settings: BuildSettings) -> BuildReport:
    start = time.perf_counter()
    with preflight.tidy(folders(settings)):
        chosen = resolve_variants(settings, probe=True)
        lock = settings.build_root / locks.LOCK_NAME
        with (
            locks.hold(lock, what=f"the build folder {settings.build_root}", wait=settings.wait),
            warmtorch.session(),
        ):
            return _run_build(settings, chosen, start)


def _run_build(settings: BuildSettings, chosen: list[Variant], start: float) -> BuildReport:
    cache = compilecache.resolve(settings.compile_cache, settings.matrix.root)
    plans = plan_all(settings, chosen, cache, early=True)
    m = settings.matrix
    labels = sorted({p.torch.label for p in plans})
    if m.abi == "stable":
        how = (
            f"for torch {m.torch.requirement[5:]} (stable ABI target {m.torch.target[0]}.{m.torch.target[1]}, "
            f"built against torch {plans[0].torch.label})"
        )
    else:
        how = f"for torch {', '.join(labels)} (unstable ABI: one build each)"
    log.info(
        f"building {len(plans)} variant(s) of {m.package.name} {m.package.version} {how}; archs from {settings.arch_source}"
    )
    if plans:
        importcheck.warn_if_torch_not_imported_first(plans[0])
    null = variants.null_variant([p.variant for p in plans], m)
    with using_cached(plans, settings.cache):
        outcomes = [build_variant(p, settings, cache, null=p.variant == null) for p in plans]
        if settings.verify_reproducible:  # the twin compiles with no cache (reproduce.verify)
            twin_build = functools.partial(build_variant, keep_repairs=False)
            outcomes = [
                reproduce.verify(o, p, settings, build=twin_build, replan=plan_variant)
                if isinstance(o, VariantResult)
                else o
                for o, p in zip(outcomes, plans, strict=True)
            ]
    # Each CUDA release's index folder (cuda-index: folders) is a package index pip can use.
    for folder in sorted({p.out_dir for p in plans if p.variant.index}):
        simpleindex.write(folder, m.package.name, m.package.wheel_name)
    index = None
    if m.variant_wheels:
        # The whole output folder: variants built by other jobs and collected here count too.
        index = wheel_variants.write_index_json(
            settings.out_dir, m.package.wheel_name, m.package.version
        )
    return BuildReport(
        matrix=settings.matrix.path,
        abi=m.abi,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label if m.abi == "stable" else ", ".join(labels),
        variants=tuple(o for o in outcomes if isinstance(o, VariantResult)),
        failures=tuple(o for o in outcomes if isinstance(o, VariantFailure)),
        seconds=time.perf_counter() - start,
        variants_json=index,
    )
