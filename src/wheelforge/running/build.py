"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wheelforge.binaries import elf, initexport
from wheelforge.binaries.sizes import TOP_CONTRIBUTORS, SizeCheck, check_size
from wheelforge.binaries.verify import WheelVerification, verify_wheel
from wheelforge.configuration.settings import BuildSettings
from wheelforge.configuration.sizes import format_size
from wheelforge.foundation import fsutil, locks, log
from wheelforge.foundation.errors import (
    EnvironmentProblem,
    Interrupted,
    SizeBudgetError,
    VerificationError,
    WheelforgeError,
)
from wheelforge.packaging import repair, stamp, wheel
from wheelforge.planning import variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running import importcheck, incremental
from wheelforge.running.preflight import describe_os_error, preflight
from wheelforge.running.results import BuildReport, VariantFailure, VariantResult
from wheelforge.toolchain import compilecache, envs, toolkit, torchprobe
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
    found = toolkit.discover(cache=settings.cache)
    chosen = variants.select(variants.expand(settings.matrix, found), settings.only)

    def ready(v: Variant, *, offline: bool) -> Variant:
        choice = ensure_toolkit(v.choice, who=f"variant {v.id}", archs=v.arch_set.archs,
                                found=found, cache=settings.cache, offline=offline)  # fmt: skip
        return variants.with_choice(v, choice)

    if probe:
        if settings.offline:  # its refusals come first: nothing is written for a refused build
            chosen = [ready(v, offline=True) for v in chosen]
        preflight(settings.matrix, folders(settings))
    return [ready(v, offline=settings.offline) for v in chosen]


def _build_torch(variant: Variant, settings: BuildSettings) -> torchprobe.TorchEnv:
    tests = settings.matrix.tests
    return envs.build_torch(
        variant.torch,
        python=settings.python,
        requires=tests.requires if tests else (),
        cache=settings.cache,
    )


def plan_all(
    settings: BuildSettings,
    chosen: list[Variant] | None = None,
    cache: compilecache.CompileCache | None = None,
) -> list[VariantPlan]:
    """A plan per variant (each with its toolkit on disk: *chosen*, else resolve_variants),
    compiling through *cache* when given."""
    matrix = settings.matrix
    chosen = resolve_variants(settings) if chosen is None else chosen
    plans = []
    probed: dict[str | None, torchprobe.TorchEnv] = {}
    for variant in chosen:
        if variant.torch not in probed:
            torch = probed[variant.torch] = _build_torch(variant, settings)
            if matrix.abi == "stable":
                torchprobe.check_target(torch, matrix.torch.lowest)
        torch = probed[variant.torch]
        cuda_only = torchprobe.cuda_only_shims(torch.include_dir, cache=settings.cache)
        launchers = incremental.launchers(settings, cache)
        plan = make_plan(
            matrix=matrix,
            variant=variant,
            torch=torch,
            weak_header=torchprobe.weak_shims_header(cuda_only),
            build_root=settings.build_root,
            out_dir=settings.out_dir,
            cxx=settings.cxx,
            cc=settings.cc,
            nvcc_host=toolkit.host_compiler(variant.toolkit, settings.cxx, cache=settings.cache),
            nvcc_threads=settings.nvcc_threads,
            cxx_launcher=launchers[0],
            cc_launcher=launchers[1],
            cuda_launcher=launchers[2],
        )
        plans.append(incremental.with_threads(plan, settings))
    return plans


class _Stages:
    """Times of a variant's stages, and its size check once there is one (kept when it fails)."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self.size: SizeCheck | None = None
        self.compiled: list[str] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.times.append((name, round(time.perf_counter() - start, 3)))


def build_variant(
    plan: VariantPlan, settings: BuildSettings, cache: compilecache.CompileCache | None = None
) -> VariantResult | VariantFailure:
    """Build one variant; a failure is returned as data (with the error), not raised, so the
    other variants still build and the report says which failed and why."""
    start = time.perf_counter()
    stages = _Stages()
    variant = plan.variant
    try:
        return _build_variant(plan, settings, stages, start, cache)
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


def _build_variant(
    plan: VariantPlan,
    settings: BuildSettings,
    stages: _Stages,
    start: float,
    cache: compilecache.CompileCache | None,
) -> VariantResult:
    variant = plan.variant
    title = f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    with log.group(title), log.step(title), stages.stage("compile"):
        steps, cache_stats = incremental.compile_variant(plan, settings.jobs, cache)
        compiled = [s for s in steps if s in ("CXX", "CC", "NVCC")]
        log.info(
            f"  compiled {len(compiled)} of {len(plan.compile_steps)} sources"
            if compiled
            else "  nothing to compile: up to date"
        )

    contents = wheel.contents(plan, repair.build_platform())
    digest = contents.digest()
    published = stamp.reusable(plan.build_dir, plan.out_dir, digest)
    reused = published is not None
    imported = None
    if published is not None:
        log.info(f"  {published} is up to date")
        with stages.stage("verify"):
            before = incremental.verified_before(published, plan)
            found = _check(published, plan, settings, stages, before[0] if before else None)
            if settings.import_check:
                # Imported when it was published (the same bytes), unless that was skipped.
                imported = (before[1] if before else None) or importcheck.check_import(
                    published, plan
                )
    else:
        title = f"{plan.variant.id}: pack, repair and check the wheel"
        with log.group(title), log.step(title):
            published, found, imported = _pack_and_publish(plan, contents, settings, stages)
        stamp.write(plan.build_dir, digest=digest, wheel=published)
        incremental.remember_verification(published, plan, found, imported)
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
        import_check=imported,
        compile_cache=cache_stats,
    )


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
    if plan.matrix.abi != "stable":  # the stable-ABI rules include this one
        problems = initexport.wheel_init_problems(wheel_path)
        if problems:
            message = problems[0][1].replace(str(wheel_path), wheel_path.name)
            raise VerificationError(f"variant {plan.variant.id}: {message}")
    stages.size = check_size(
        wheel_size=wheel_path.stat().st_size,
        budget=settings.size_budget,
        binaries=found.binaries,
        toolkit=(plan.variant.toolkit.version.major, plan.variant.toolkit.version.minor),
        nvcc_flags=plan.matrix.extension.nvcc_flags,
        wheel=wheel_path,
    )
    if stages.size.over:
        raise _over_budget(
            plan, wheel_path, stages.size, published=wheel_path.parent == plan.out_dir
        )
    return found


def _over_budget(
    plan: VariantPlan, wheel_path: Path, size: SizeCheck, *, published: bool
) -> SizeBudgetError:
    """Names the largest fatbin entries and what each lever would save."""
    top = size.contributions[:TOP_CONTRIBUTORS]
    lines = ["largest contributors (in the wheel / stored in the binary / uncompressed):"]
    lines += [
        f"  {elf.member_path(c.binary)} {c.kind.upper()} {c.arch}: "
        f"{format_size(c.in_wheel) if c.in_wheel is not None else '-'} / "
        f"{format_size(c.stored)} / {format_size(c.uncompressed)} ({c.compression})"
        for c in top
    ]
    measured = [c.in_wheel for c in size.contributions if c.in_wheel is not None]
    if measured:
        lines.append(
            f"  all SASS and PTX: {format_size(sum(measured))} of the wheel's "
            f"{format_size(size.wheel_size)}; the rest is host code and Python files"
        )
    lines.append("levers (what each saves):")
    lines += [
        f"  {lv.change}: "
        + (f"saves {format_size(lv.saves)}" if lv.saves is not None else "not measured")
        + (f" ({lv.note})" if lv.note else "")
        for lv in size.levers[:8]
    ]
    biggest = (
        ", ".join(f"{c.arch} {format_size(c.in_wheel or c.stored)}" for c in top[:3]) or "no fatbin"
    )
    return SizeBudgetError(
        f"variant {plan.variant.id}: {wheel_path.name} is {format_size(size.wheel_size)}, over "
        f"its size budget of {format_size(size.budget)}; "
        + ("it was published by an earlier build; " if published else "nothing was published; ")
        + "largest: "
        f"{biggest} (size-budget in matrix.yaml or --size-budget raises the budget)",
        details="\n".join(lines),
    )


def _pack_and_publish(
    plan: VariantPlan,
    contents: wheel.WheelContents,
    settings: BuildSettings,
    stages: _Stages,
) -> tuple[Path, WheelVerification, str | None]:
    """Pack, repair, check and import in a staging folder; only a wheel that passed reaches the
    output."""
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
    try:
        with stages.stage("package"):
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
        with stages.stage("verify"):
            found = _check(repaired, plan, settings, stages)
            imported = importcheck.check_import(repaired, plan) if settings.import_check else None
        with stages.stage("publish"):
            previous = plan.out_dir / repaired.name
            if previous.is_file() and stamp.sha256(previous) != stamp.sha256(repaired):
                log.warning(
                    f"replacing {previous}: same name, other content (another arch set or toolkit?)"
                )
            try:
                published = fsutil.publish(repaired, plan.out_dir)
            except OSError as exc:
                raise EnvironmentProblem(
                    f"--out {plan.out_dir}: cannot write {repaired.name}: {describe_os_error(exc)}"
                ) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)

    # Name what was read after the published wheel, not the staging copy.
    if stages.size is not None:
        stages.size = dataclasses.replace(
            stages.size,
            contributions=tuple(
                dataclasses.replace(c, binary=elf.rename_wheel(c.binary, repaired, published))
                for c in stages.size.contributions
            ),
        )
    return published, found.moved(repaired, published), imported


def run_build(settings: BuildSettings) -> BuildReport:
    start = time.perf_counter()
    chosen = resolve_variants(settings, probe=True)
    lock = settings.build_root / locks.LOCK_NAME
    with locks.hold(lock, what=f"the build folder {settings.build_root}", wait=settings.wait):
        return _run_build(settings, chosen, start)


def _run_build(settings: BuildSettings, chosen: list[Variant], start: float) -> BuildReport:
    cache = compilecache.resolve(settings.compile_cache, settings.matrix.root)
    plans = plan_all(settings, chosen, cache)
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
    outcomes = [build_variant(plan, settings, cache) for plan in plans]
    return BuildReport(
        matrix=settings.matrix.path,
        abi=m.abi,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label if m.abi == "stable" else ", ".join(labels),
        variants=tuple(o for o in outcomes if isinstance(o, VariantResult)),
        failures=tuple(o for o in outcomes if isinstance(o, VariantFailure)),
        seconds=time.perf_counter() - start,
    )
