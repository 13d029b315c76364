"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge import __version__
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, log
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.packaging import repair, wheel
from wheelforge.planning import freshness, ninja, variants
from wheelforge.planning.plan import VariantPlan, auto_nvcc_threads, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running.results import BuildReport, VariantResult
from wheelforge.toolchain import compilecache, shims, toolkit, torchprobe

if TYPE_CHECKING:  # the ELF readers load only when a wheel is checked, never in a no-op build
    from wheelforge.binaries.abicheck import BinaryCheck
    from wheelforge.binaries.inspection import BinaryReport

STAMP = "wheel.json"
# The checks' results for the wheel the stamp names, so an unchanged wheel is not read again.
CHECKS = "wheel-checks.pickle"


def _ready(variant: Variant, settings: BuildSettings, found: list[toolkit.Toolkit]) -> Variant:
    """*variant* with a toolkit on disk: provisioned now if it is a recipe (unless --offline)."""
    recipe = variant.choice.recipe
    if variant.choice.toolkit is not None or recipe is None:
        return variant
    from wheelforge.toolchain import provision

    if settings.offline:
        unbuilt = [a for a in variant.arch_set.archs if not any(t.supports(a) for t in found)]
        why = (
            f" for {', '.join(f'{a} ({a.sass})' for a in unbuilt)}, which none of them builds"
            if unbuilt
            else ""
        )
        raise ConfigError(
            f"variant {variant.id} needs CUDA {recipe.release}, which is not installed (found: "
            f"{'; '.join(t.describe() for t in found) or 'none'}){why}; run 'wheelforge toolkit install "
            f"{recipe.release}' ({recipe.describe()}) or build without --offline"
        )
    folder = provision.install(recipe, settings.cache)
    return variants.with_toolkit(variant, toolkit.load_provisioned(folder, cache=settings.cache))


def resolve_variants(settings: BuildSettings) -> list[Variant]:
    """The variants to build, each with its toolkit. Everything that can be refused without a
    compiler is refused here, before anything is downloaded or compiled."""
    found = toolkit.discover(cache=settings.cache)
    chosen = variants.select(variants.expand(settings.matrix, found), settings.only)
    return [_ready(v, settings, found) for v in chosen]


def _build_torch(variant: Variant, settings: BuildSettings) -> torchprobe.TorchEnv:
    """The torch a variant compiles against: the build Python's for the stable ABI; for the
    unstable ABI, an isolated environment with exactly the variant's torch (built on first use,
    shared with ``wheelforge test``)."""
    if variant.torch is None:
        return torchprobe.probe_torch(settings.python, cache=settings.cache)
    from wheelforge.toolchain import envs

    tests = settings.matrix.tests
    spec = envs.EnvSpec(torch=variant.torch, requires=tests.requires if tests else ())
    return torchprobe.probe_torch(
        envs.ensure_env(spec, settings.cache).python, cache=settings.cache
    )


def _with_threads(plan: VariantPlan, settings: BuildSettings) -> VariantPlan:
    """NVCC_THREADS when given, else enough nvcc threads for the nvcc jobs to fill the cores."""
    if plan.nvcc_threads is not None:
        return plan
    nvcc = [s for s in plan.compile_steps if s.rule == "nvcc"]
    targets = max((len((s.arch_set or plan.variant.arch_set).specs) for s in nvcc), default=1)
    threads = auto_nvcc_threads(cores=len(os.sched_getaffinity(0)), jobs=settings.jobs,
                                nvcc_sources=len(nvcc), targets=targets)  # fmt: skip
    return dataclasses.replace(plan, nvcc_threads=threads)


def plan_all(
    settings: BuildSettings, cache: compilecache.CompileCache | None = None
) -> list[VariantPlan]:
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
        cuda_only = torchprobe.cuda_only_shims(torch.include_dir, cache=settings.cache)
        weak = torchprobe.weak_shims_header(cuda_only)
        plan = make_plan(
            matrix=matrix,
            variant=variant,
            torch=torch,
            weak_header=weak,
            build_root=settings.build_root,
            out_dir=settings.out_dir,
            cxx=settings.cxx,
            cc=settings.cc,
            nvcc_host=toolkit.host_compiler(variant.toolkit, settings.cxx, cache=settings.cache),
            nvcc_threads=settings.nvcc_threads,
            launcher=cache.exe if cache else None,
        )
        plans.append(_with_threads(plan, settings))
    return plans


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reusable(plan: VariantPlan, digest: str) -> Path | None:
    """The wheel already in the output folder, if it was made from exactly these inputs."""
    try:
        stamp = json.loads((plan.build_dir / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    published = plan.out_dir / str(stamp.get("wheel", ""))
    if stamp.get("digest") != digest or not published.is_file():
        return None
    return published if _sha256(published) == stamp.get("sha256") else None


def _checked_before(
    published: Path, plan: VariantPlan
) -> tuple[list[BinaryReport], list[BinaryCheck]] | None:
    """What the checks found when this wheel was published, if they ran on these very bytes
    with this wheelforge: the same bytes give the same findings. The pickle is wheelforge's
    own, in its own build folder."""
    try:
        version, sha, binaries, abi = pickle.loads((plan.build_dir / CHECKS).read_bytes())
    except Exception:  # missing, truncated, from another layout: the checks simply run again
        return None
    if version != __version__ or sha != _sha256(published):
        return None
    return binaries, abi


def check_stable_abi(wheel_path: Path, plan: VariantPlan) -> list[BinaryCheck]:
    """The stable-ABI rules (abicheck.py) on a wheel about to be published; a violation stops it.
    An unstable-ABI build uses torch's C++ API on purpose: nothing to check."""
    from wheelforge.binaries import abicheck

    if plan.matrix.abi != "stable":
        return []
    checks = abicheck.check_wheel(
        wheel_path,
        torch=plan.matrix.torch.target,
        guards=shims.header_guards(plan.torch.include_dir),
    )
    violations = [v for c in checks for v in c.violations]
    if violations:
        first, rest = violations[0], violations[1:]
        raise VerificationError(
            f"variant {plan.variant.id}: {first.message}"
            + (f" (and {len(rest)} more below)" if rest else ""),
            details="\n".join(v.message for v in rest) or None,
        )
    return checks


def _compile(
    plan: VariantPlan, jobs: int | None, cache: compilecache.CompileCache | None
) -> tuple[list[str], compilecache.CacheStats | None]:
    """Bring the objects and the library up to date: the steps ninja ran (none, and no ninja
    process, when the freshness stamp says nothing changed) and the compile cache's counts."""
    for generated in plan.generated:
        fsutil.write_if_changed(generated.path, generated.text)
    text = ninja.write(plan)
    if freshness.up_to_date(plan, text):
        return [], None
    freshness.forget(plan)
    started = time.time_ns()
    stats = None
    if cache is None:
        steps = ninja.run(plan, jobs=jobs)
    else:
        with compilecache.session(cache, plan.build_dir) as (env, found):
            steps = ninja.run(plan, jobs=jobs, env=env)
        stats = found[0] if found else None
    freshness.record(plan, text, ninja.executable(), started)
    return steps, stats


def build_variant(
    plan: VariantPlan, *, jobs: int | None, cache: compilecache.CompileCache | None = None
) -> VariantResult:
    start = time.perf_counter()
    variant = plan.variant
    with log.step(
        f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    ):
        steps, cache_stats = _compile(plan, jobs, cache)
    compiled = [s for s in steps if s in ("CXX", "CC", "NVCC")]
    log.info(
        f"  compiled {len(compiled)} of {len(plan.compile_steps)} sources"
        if compiled
        else "  nothing to compile: up to date"
    )

    contents = wheel.contents(plan, repair.build_platform())
    digest = contents.digest()
    published = _reusable(plan, digest)
    reused = published is not None
    if published is not None:
        log.info(f"  {published.name} is up to date")
        binaries, abi = _checked_before(published, plan) or _check(published, plan)
    else:
        published, binaries, abi = _pack_and_publish(plan, contents)
        sha = _sha256(published)
        stamp = {"digest": digest, "wheel": published.name, "sha256": sha}
        fsutil.write_if_changed(plan.build_dir / STAMP, json.dumps(stamp, indent=2) + "\n")
        (plan.build_dir / CHECKS).write_bytes(pickle.dumps((__version__, sha, binaries, abi)))
    return VariantResult(
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        wheel=published,
        wheel_size=published.stat().st_size,
        compiled=tuple(compiled),
        reused=reused,
        binaries=tuple(binaries),
        abi_checks=tuple(abi),
        seconds=time.perf_counter() - start,
        compile_cache=cache_stats,
    )


def _check(wheel_path: Path, plan: VariantPlan) -> tuple[list[BinaryReport], list[BinaryCheck]]:
    """Fatbins against the arch set, then the stable-ABI rules; either failing stops the variant."""
    from wheelforge.binaries.inspection import inspect_paths
    from wheelforge.binaries.verify import verify_binaries

    binaries = inspect_paths([wheel_path])
    verify_binaries(binaries, plan)
    return binaries, check_stable_abi(wheel_path, plan)


def _pack_and_publish(
    plan: VariantPlan, contents: wheel.WheelContents
) -> tuple[Path, list[BinaryReport], list[BinaryCheck]]:
    """Pack, repair and check in a staging folder; only a wheel that passed reaches the output."""
    with log.step(f"{plan.variant.id}: pack, repair and check the wheel"):
        stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
        try:
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
            binaries, abi = _check(repaired, plan)
            previous = plan.out_dir / repaired.name
            if previous.is_file() and _sha256(previous) != _sha256(repaired):
                log.warning(
                    f"replacing {previous}: same name, other content (another arch set or toolkit?)"
                )
            published = fsutil.publish(repaired, plan.out_dir)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    # Name what was read after the published wheel, not the staging copy.
    def rename(path: str) -> str:
        return path.replace(str(repaired), str(published), 1)

    return (
        published,
        [dataclasses.replace(b, path=rename(b.path)) for b in binaries],
        [dataclasses.replace(c, path=rename(c.path)) for c in abi],
    )


def run_build(settings: BuildSettings) -> BuildReport:
    cache = compilecache.resolve(settings.compile_cache, settings.matrix.root)
    plans = plan_all(settings, cache)
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
    results = [build_variant(plan, jobs=settings.jobs, cache=cache) for plan in plans]
    return BuildReport(
        matrix=settings.matrix.path,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label,
        variants=tuple(results),
    )
