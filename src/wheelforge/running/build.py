"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from wheelforge.binaries.verify import WheelVerification, verify_wheel
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, log
from wheelforge.packaging import repair, stamp, wheel
from wheelforge.planning import ninja, variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running.results import BuildReport, VariantResult
from wheelforge.toolchain import envs, shims, toolkit, torchprobe
from wheelforge.toolchain.choice import ensure_toolkit


def resolve_variants(settings: BuildSettings) -> list[Variant]:
    """The variants to build, each with its toolkit (provisioned now where needed). Everything
    that can be refused without a compiler is refused here, before anything is downloaded or
    compiled."""
    found = toolkit.discover(cache=settings.cache)
    chosen = variants.select(variants.expand(settings.matrix, found), settings.only)
    return [
        variants.with_choice(
            v,
            ensure_toolkit(
                v.choice,
                who=f"variant {v.id}",
                archs=v.arch_set.archs,
                found=found,
                cache=settings.cache,
                offline=settings.offline,
            ),
        )
        for v in chosen
    ]


def _build_torch(variant: Variant, settings: BuildSettings) -> torchprobe.TorchEnv:
    tests = settings.matrix.tests
    return envs.build_torch(
        variant.torch,
        python=settings.python,
        requires=tests.requires if tests else (),
        cache=settings.cache,
    )


def plan_all(settings: BuildSettings) -> list[VariantPlan]:
    matrix = settings.matrix
    chosen = resolve_variants(settings)
    plans = []
    probed: dict[str | None, torchprobe.TorchEnv] = {}
    for variant in chosen:
        if variant.torch not in probed:
            torch = probed[variant.torch] = _build_torch(variant, settings)
            if matrix.abi == "stable":
                torchprobe.check_target(torch, matrix.torch.lowest)
        torch = probed[variant.torch]
        weak = torchprobe.weak_shims_header(shims.cuda_only_shims(torch.include_dir))
        plans.append(
            make_plan(
                matrix=matrix,
                variant=variant,
                torch=torch,
                weak_header=weak,
                build_root=settings.build_root,
                out_dir=settings.out_dir,
                cxx=settings.cxx,
                cc=settings.cc,
                nvcc_host=toolkit.host_compiler(variant.toolkit, settings.cxx),
                nvcc_threads=settings.nvcc_threads,
            )
        )
    return plans


def build_variant(plan: VariantPlan, *, jobs: int | None) -> VariantResult:
    start = time.perf_counter()
    variant = plan.variant
    with log.step(
        f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    ):
        for generated in plan.generated:
            fsutil.write_if_changed(generated.path, generated.text)
        ninja.write(plan)
        steps = ninja.run(plan, jobs=jobs)
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
    if published is not None:
        log.info(f"  {published.name} is up to date")
        found = verify_wheel(published, plan)
    else:
        published, found = _pack_and_publish(plan, contents)
        stamp.write(plan.build_dir, digest=digest, wheel=published)
    return VariantResult(
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        wheel=published,
        wheel_size=published.stat().st_size,
        compiled=tuple(compiled),
        reused=reused,
        binaries=found.binaries,
        arch_checks=found.arch_checks,
        abi_checks=found.abi_checks,
        seconds=time.perf_counter() - start,
    )


def _pack_and_publish(
    plan: VariantPlan, contents: wheel.WheelContents
) -> tuple[Path, WheelVerification]:
    """Pack, repair and check in a staging folder; only a wheel that passed reaches the output."""
    with log.step(f"{plan.variant.id}: pack, repair and check the wheel"):
        stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
        try:
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
            found = verify_wheel(repaired, plan)
            previous = plan.out_dir / repaired.name
            if previous.is_file() and stamp.sha256(previous) != stamp.sha256(repaired):
                log.warning(
                    f"replacing {previous}: same name, other content (another arch set or toolkit?)"
                )
            published = fsutil.publish(repaired, plan.out_dir)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    # Name what was read after the published wheel, not the staging copy.
    return published, found.moved(repaired, published)


def run_build(settings: BuildSettings) -> BuildReport:
    plans = plan_all(settings)
    m = settings.matrix
    if m.abi == "stable":
        how = (
            f"for torch {m.torch.requirement[5:]} (stable ABI target {m.torch.target[0]}.{m.torch.target[1]}, "
            f"built against torch {plans[0].torch.label})"
        )
    else:
        how = f"for torch {', '.join(sorted({p.torch.label for p in plans}))} (unstable ABI: one build each)"
    log.info(
        f"building {len(plans)} variant(s) of {m.package.name} {m.package.version} {how}; archs from {settings.arch_source}"
    )
    results = [build_variant(plan, jobs=settings.jobs) for plan in plans]
    return BuildReport(
        matrix=settings.matrix.path,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label,
        variants=tuple(results),
    )
