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

from wheelforge.binaries import abicheck
from wheelforge.binaries.inspection import BinaryReport, inspect_paths
from wheelforge.binaries.verify import verify_binaries
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, log
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.packaging import repair, wheel, wheel_variants
from wheelforge.planning import ninja, variants
from wheelforge.planning.plan import VariantPlan, make_plan
from wheelforge.planning.variants import Variant
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
        first, rest = violations[0], violations[1:]
        raise VerificationError(
            f"variant {plan.variant.id}: {first.message}"
            + (f" (and {len(rest)} more below)" if rest else ""),
            details="\n".join(v.message for v in rest) or None,
        )
    return checks


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Published:
    wheel: Path
    binaries: list[BinaryReport]
    abi: list[abicheck.BinaryCheck]
    variant_properties: tuple[str, ...] = ()
    null_wheel: Path | None = None


def build_variant(plan: VariantPlan, *, jobs: int | None, null: bool = False) -> VariantResult:
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
    # A variant wheel is always re-packed (seconds; compiling stays incremental): the ABI check
    # reads tags from a wheel's name, which a variant label makes unparsable to packaging.
    reusable = None if variant.variant_label else _reusable(plan, digest)
    if reusable is not None:
        log.info(f"  {reusable.name} is up to date")
        binaries, abi = _check(reusable, plan)
        done = _Published(wheel=reusable, binaries=binaries, abi=abi)
    else:
        done = _pack_and_publish(plan, contents, null=null)
        stamp = {"digest": digest, "wheel": done.wheel.name, "sha256": _sha256(done.wheel)}
        fsutil.write_if_changed(plan.build_dir / STAMP, json.dumps(stamp, indent=2) + "\n")
    return VariantResult(
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        wheel=done.wheel,
        wheel_size=done.wheel.stat().st_size,
        compiled=tuple(compiled),
        reused=reusable is not None,
        binaries=tuple(done.binaries),
        abi_checks=tuple(done.abi),
        seconds=time.perf_counter() - start,
        variant_label=variant.variant_label,
        variant_properties=done.variant_properties,
        null_wheel=done.null_wheel,
    )


def _check(
    wheel_path: Path, plan: VariantPlan
) -> tuple[list[BinaryReport], list[abicheck.BinaryCheck]]:
    """Fatbins against the arch set, then the stable-ABI rules; either failing stops the variant."""
    binaries = inspect_paths([wheel_path])
    verify_binaries(binaries, plan)
    return binaries, check_stable_abi(wheel_path, plan)


def _variant_wheels(
    plan: VariantPlan, repaired: Path, binaries: list[BinaryReport], stage: Path, *, null: bool
) -> tuple[list[Path], tuple[str, ...]]:
    """The PEP 825 variant wheel of a checked wheel (and the null variant, if this build is
    it), with properties read from the binaries that were checked."""
    label = plan.variant.variant_label
    assert label is not None
    unstable = plan.matrix.abi == "unstable"
    torch = plan.torch.version
    facts = wheel_variants.VariantFacts(
        sm_arch=wheel_variants.sm_arch_values(binaries),
        cuda=plan.variant.toolkit.release,
        torch=f"{torch.major}.{torch.minor}" if unstable else None,
    )
    props = wheel_variants.properties(facts)
    made = [wheel_variants.make_variant_wheel(
        repaired, label, wheel_variants.variant_json(label, props, unstable_abi=unstable), stage / "variant")]  # fmt: skip
    if null:
        null_json = wheel_variants.variant_json(
            wheel_variants.NULL_LABEL, [], unstable_abi=unstable
        )
        made.append(wheel_variants.make_variant_wheel(repaired, wheel_variants.NULL_LABEL, null_json, stage / "null"))  # fmt: skip
    return made, tuple(props)


def _pack_and_publish(
    plan: VariantPlan, contents: wheel.WheelContents, *, null: bool
) -> _Published:
    """Pack, repair and check in a staging folder; only a wheel that passed reaches the output."""
    with log.step(f"{plan.variant.id}: pack, repair and check the wheel"):
        stage = Path(tempfile.mkdtemp(prefix="stage-", dir=plan.build_dir))
        try:
            raw = wheel.pack(contents, stage / "raw")
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch()
            )
            binaries, abi = _check(repaired, plan)
            outputs, props = [repaired], tuple[str, ...]()
            if plan.variant.variant_label:
                outputs, props = _variant_wheels(plan, repaired, binaries, stage, null=null)
            for made in outputs:
                previous = plan.out_dir / made.name
                if previous.is_file() and _sha256(previous) != _sha256(made):
                    log.warning(
                        f"replacing {previous}: same name, other content (another arch set or toolkit?)"
                    )
            published = [fsutil.publish(made, plan.out_dir) for made in outputs]
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    # Name what was read after the published wheel, not the staging copy.
    def rename(path: str) -> str:
        return path.replace(str(repaired), str(published[0]), 1)

    return _Published(
        wheel=published[0],
        binaries=[dataclasses.replace(b, path=rename(b.path)) for b in binaries],
        abi=[dataclasses.replace(c, path=rename(c.path)) for c in abi],
        variant_properties=props,
        null_wheel=published[1] if len(published) > 1 else None,
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
    null = variants.null_variant([p.variant for p in plans], m)
    results = [build_variant(plan, jobs=settings.jobs, null=plan.variant == null) for plan in plans]
    index = None
    if m.wheel_variants.enabled:
        # The whole output folder: variants built by other jobs and collected here count too.
        index = wheel_variants.write_index_json(
            settings.out_dir, m.package.wheel_name, m.package.version
        )
    return BuildReport(
        matrix=settings.matrix.path,
        target_version=settings.matrix.torch.target,
        built_against=plans[0].torch.label,
        variants=tuple(results),
        variants_json=index,
    )
