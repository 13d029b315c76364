"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wheelforge.binaries import abicheck, reprodiff
from wheelforge.binaries.inspection import BinaryReport, inspect_paths
from wheelforge.binaries.sizes import TOP_CONTRIBUTORS, SizeCheck, check_size
from wheelforge.binaries.verify import verify_binaries
from wheelforge.configuration.settings import BuildSettings
from wheelforge.configuration.sizes import format_size
from wheelforge.foundation import fsutil, log
from wheelforge.foundation.errors import (
    EnvironmentProblem,
    SizeBudgetError,
    VerificationError,
    WheelforgeError,
)
from wheelforge.packaging import provenance, repair, wheel
from wheelforge.planning import ninja, variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running.results import BuildReport, VariantFailure, VariantResult
from wheelforge.toolchain import envs, provision, shims, toolkit, torchprobe

STAMP = "wheel.json"


def _ready(variant: Variant, settings: BuildSettings, found: list[toolkit.Toolkit]) -> Variant:
    """*variant* with a toolkit on disk: provisioned now if it is a recipe (unless --offline)."""
    recipe = variant.choice.recipe
    if variant.choice.toolkit is not None or recipe is None:
        return variant
    if settings.offline:
        unbuilt = [a for a in variant.arch_set.archs if not any(t.supports(a) for t in found)]
        why = (
            f" for {', '.join(f'{a} ({a.sass})' for a in unbuilt)}, which none of them builds"
            if unbuilt
            else ""
        )
        raise EnvironmentProblem(
            f"variant {variant.id} needs CUDA {recipe.release}, which is not installed (found: "
            f"{'; '.join(t.describe() for t in found) or 'none'}){why}; run 'wheelforge toolkit install "
            f"{recipe.release}' ({recipe.describe()}) or build without --offline"
        )
    folder = provision.install(recipe, settings.cache)
    return variants.with_toolkit(variant, toolkit.load_provisioned(folder))


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
        return torchprobe.probe_torch(settings.python)
    tests = settings.matrix.tests
    spec = envs.EnvSpec(torch=variant.torch, requires=tests.requires if tests else ())
    return torchprobe.probe_torch(envs.ensure_env(spec, settings.cache).python)


def plan_variant(
    variant: Variant,
    torch: torchprobe.TorchEnv,
    settings: BuildSettings,
    *,
    build_root: Path | None = None,
    out_dir: Path | None = None,
) -> VariantPlan:
    """The plan of one variant; another *build_root* and *out_dir* give its twin for
    ``--verify-reproducible``."""
    return make_plan(
        matrix=settings.matrix,
        variant=variant,
        torch=torch,
        weak_header=torchprobe.weak_shims_header(shims.cuda_only_shims(torch.include_dir)),
        build_root=build_root or settings.build_root,
        out_dir=out_dir or settings.out_dir,
        cxx=settings.cxx,
        cc=settings.cc,
        nvcc_host=toolkit.host_compiler(variant.toolkit, settings.cxx),
        nvcc_threads=settings.nvcc_threads,
    )


def plan_all(settings: BuildSettings, chosen: list[Variant] | None = None) -> list[VariantPlan]:
    """A plan per variant (each with its toolkit on disk: *chosen*, else resolve_variants)."""
    matrix = settings.matrix
    chosen = resolve_variants(settings) if chosen is None else chosen
    plans = []
    probed: dict[str | None, torchprobe.TorchEnv] = {}
    for variant in chosen:
        if variant.torch not in probed:
            torch = probed[variant.torch] = _build_torch(variant, settings)
            if matrix.abi == "stable":
                torchprobe.check_target(torch, matrix.torch.lowest)
        plans.append(plan_variant(variant, probed[variant.torch], settings))
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


def check_stable_abi(wheel_path: Path, plan: VariantPlan) -> list[abicheck.BinaryCheck]:
    """The stable-ABI rules (abicheck.py) on a wheel about to be published; a violation stops it.
    An unstable-ABI build uses torch's C++ API on purpose: nothing to check."""
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


def build_variant(plan: VariantPlan, settings: BuildSettings) -> VariantResult | VariantFailure:
    """Build one variant; a failure is returned as data (with the error), not raised, so the
    other variants still build and the report says which failed and why."""
    start = time.perf_counter()
    stages = _Stages()
    variant = plan.variant
    try:
        return _build_variant(plan, settings, stages, start)
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
    plan: VariantPlan, settings: BuildSettings, stages: _Stages, start: float
) -> VariantResult:
    variant = plan.variant
    title = f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    with log.group(title), log.step(title), stages.stage("compile"):
        for generated in plan.generated:
            fsutil.write_if_changed(generated.path, generated.text)
        ninja.write(plan)
        steps = ninja.run(plan, jobs=settings.jobs)
        compiled = [s for s in steps if s in ("CXX", "CC", "NVCC")]
        log.info(
            f"  compiled {len(compiled)} of {len(plan.compile_steps)} sources"
            if compiled
            else "  nothing to compile: up to date"
        )

    prov = provenance.provenance(plan, epoch=wheel.source_date_epoch())
    extra = ((provenance.SBOM_NAME, prov.sbom), (provenance.BUILD_INFO_NAME, prov.build_info))
    contents = wheel.contents(plan, repair.build_platform(), extra)
    digest = contents.digest()
    published = _reusable(plan, digest)
    reused = published is not None
    if published is not None:
        log.info(f"  {published} is up to date")
        with stages.stage("verify"):
            binaries, abi = _check(published, plan, settings, stages)
    else:
        title = f"{plan.variant.id}: pack, repair and check the wheel"
        with log.group(title), log.step(title):
            published, binaries, abi = _pack_and_publish(plan, contents, settings, stages)
        stamp = {"digest": digest, "wheel": published.name, "sha256": _sha256(published)}
        fsutil.write_if_changed(plan.build_dir / STAMP, json.dumps(stamp, indent=2) + "\n")
    assert stages.size is not None  # _check sets it
    return VariantResult(
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        torch=plan.torch.label,
        wheel=published,
        wheel_size=published.stat().st_size,
        sha256=_sha256(published),
        sources=len(plan.compile_steps),
        compiled=tuple(compiled),
        reused=reused,
        binaries=tuple(binaries),
        abi_checks=tuple(abi),
        size=stages.size,
        stages=tuple(stages.times),
        seconds=time.perf_counter() - start,
    )


def _check(
    wheel_path: Path, plan: VariantPlan, settings: BuildSettings, stages: _Stages
) -> tuple[list[BinaryReport], list[abicheck.BinaryCheck]]:
    """Fatbins against the arch set, the stable-ABI rules, then the size budget; any failing
    stops the variant."""
    binaries = inspect_paths([wheel_path])
    verify_binaries(binaries, plan)
    abi = check_stable_abi(wheel_path, plan)
    stages.size = check_size(
        wheel_size=wheel_path.stat().st_size,
        budget=settings.size_budget,
        binaries=binaries,
        toolkit=(plan.variant.toolkit.version.major, plan.variant.toolkit.version.minor),
        nvcc_flags=plan.matrix.extension.nvcc_flags,
        wheel=wheel_path,
    )
    if stages.size.over:
        raise _over_budget(
            plan, wheel_path, stages.size, published=wheel_path.parent == plan.out_dir
        )
    return binaries, abi


def _over_budget(
    plan: VariantPlan, wheel_path: Path, size: SizeCheck, *, published: bool
) -> SizeBudgetError:
    """Names the largest fatbin entries and what each lever would save."""
    top = size.contributions[:TOP_CONTRIBUTORS]
    lines = ["largest contributors (in the wheel / stored in the binary / uncompressed):"]
    lines += [
        f"  {c.binary.rsplit('!', 1)[-1]} {c.kind.upper()} {c.arch}: "
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
) -> tuple[Path, list[BinaryReport], list[abicheck.BinaryCheck]]:
    """Pack, repair and check in a staging folder; only a wheel that passed reaches the output."""
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
    try:
        with stages.stage("package"):
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
        with stages.stage("verify"):
            binaries, abi = _check(repaired, plan, settings, stages)
        with stages.stage("publish"):
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

    if stages.size is not None:
        stages.size = dataclasses.replace(
            stages.size,
            contributions=tuple(
                dataclasses.replace(c, binary=rename(c.binary)) for c in stages.size.contributions
            ),
        )
    return (
        published,
        [dataclasses.replace(b, path=rename(b.path)) for b in binaries],
        [dataclasses.replace(c, path=rename(c.path)) for c in abi],
    )


def verify_reproducible(
    result: VariantResult, plan: VariantPlan, settings: BuildSettings
) -> VariantResult | VariantFailure:
    """Build the variant again from scratch in a fresh temporary folder, and require the same
    wheel, byte for byte; a difference names the member, ELF section and fatbin entry, and takes
    the wheel back out of the output folder."""
    title = f"{plan.variant.id}: rebuild in another folder to verify reproducibility"
    with log.step(title), tempfile.TemporaryDirectory(prefix="wheelforge-verify-") as tmp:
        twin = plan_variant(
            plan.variant, plan.torch, settings,
            build_root=Path(tmp) / "build", out_dir=Path(tmp) / "dist",
        )  # fmt: skip
        again = build_variant(twin, settings)
        if isinstance(again, VariantFailure):
            return again
        try:
            reprodiff.require_identical(
                result.wheel, again.wheel, what=f"variant {plan.variant.id}"
            )
        except VerificationError as exc:
            result.wheel.unlink(missing_ok=True)
            (plan.build_dir / STAMP).unlink(missing_ok=True)
            return VariantFailure(
                variant_id=result.variant_id, arch_set=result.arch_set, toolkit=result.toolkit,
                torch=result.torch, error=exc, size=result.size,
                stages=(*result.stages, *again.stages), seconds=result.seconds + again.seconds,
            )  # fmt: skip
    return dataclasses.replace(result, reproducible=again.sha256)


def run_build(settings: BuildSettings) -> BuildReport:
    start = time.perf_counter()
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
    outcomes = [build_variant(plan, settings) for plan in plans]
    if settings.verify_reproducible:
        outcomes = [
            verify_reproducible(o, p, settings) if isinstance(o, VariantResult) else o
            for o, p in zip(outcomes, plans, strict=True)
        ]
    return BuildReport(
        matrix=settings.matrix.path,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label,
        variants=tuple(o for o in outcomes if isinstance(o, VariantResult)),
        failures=tuple(o for o in outcomes if isinstance(o, VariantFailure)),
        seconds=time.perf_counter() - start,
    )
