"""Orchestration: settings → toolkit and torch → one plan per variant → for each: generated
files, ninja, wheel, repair, fatbin verification, then an atomic move into the output folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from wheelforge.binaries import abicheck, initexport
from wheelforge.binaries.inspection import BinaryReport, inspect_paths
from wheelforge.binaries.verify import verify_binaries
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, log
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.packaging import repair, wheel
from wheelforge.planning import ninja, variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
from wheelforge.running import importcheck
from wheelforge.running.results import BuildReport, VariantResult
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
        raise ConfigError(
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
        # Name the wheel, not the staging folder it sits in until it passes.
        messages = [v.message.replace(str(wheel_path), wheel_path.name) for v in violations]
        raise VerificationError(
            f"variant {plan.variant.id}: {messages[0]}"
            + (f" (and {len(messages) - 1} more below)" if len(messages) > 1 else ""),
            details="\n".join(messages[1:]) or None,
        )
    return checks


def build_variant(
    plan: VariantPlan, *, jobs: int | None, import_check: bool = True
) -> VariantResult:
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
    published = _reusable(plan, digest)
    reused = published is not None
    imported = None
    if published is not None:
        log.info(f"  {published.name} is up to date")
        binaries, abi = _check(published, plan)
        if import_check:
            imported = importcheck.check_import(published, plan)
    else:
        published, binaries, abi, imported = _pack_and_publish(plan, contents, import_check)
        stamp = {"digest": digest, "wheel": published.name, "sha256": _sha256(published)}
        fsutil.write_if_changed(plan.build_dir / STAMP, json.dumps(stamp, indent=2) + "\n")
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
        import_check=imported,
    )


def _check(
    wheel_path: Path, plan: VariantPlan
) -> tuple[list[BinaryReport], list[abicheck.BinaryCheck]]:
    """Fatbins against the arch set, the module's PyInit export, then the stable-ABI rules; any
    failing stops the variant."""
    binaries = inspect_paths([wheel_path])
    verify_binaries(binaries, plan)
    if plan.matrix.abi != "stable":  # the stable-ABI check has this rule too
        problems = initexport.wheel_init_problems(wheel_path)
        if problems:
            message = problems[0][1].replace(str(wheel_path), wheel_path.name)
            raise VerificationError(f"variant {plan.variant.id}: {message}")
    return binaries, check_stable_abi(wheel_path, plan)


def _pack_and_publish(
    plan: VariantPlan, contents: wheel.WheelContents, import_check: bool
) -> tuple[Path, list[BinaryReport], list[abicheck.BinaryCheck], str | None]:
    """Pack, repair, check and import in a staging folder; only a wheel that passed reaches
    the output."""
    with log.step(f"{plan.variant.id}: pack, repair and check the wheel"):
        stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
        try:
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
            binaries, abi = _check(repaired, plan)
            imported = importcheck.check_import(repaired, plan) if import_check else None
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
        imported,
    )


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
    if plans:
        importcheck.warn_if_torch_not_imported_first(plans[0])
    results = [
        build_variant(plan, jobs=settings.jobs, import_check=settings.import_check)
        for plan in plans
    ]
    return BuildReport(
        matrix=settings.matrix.path,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label,
        variants=tuple(results),
    )
