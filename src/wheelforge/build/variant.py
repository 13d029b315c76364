"""One variant's build, from its plan: compile (torch's own answer confirmed; a different one
is planned and compiled again), pack, repair, check (fatbins, the ABI rules, the size budget, the
import), then an atomic move into the output folder. A failed variant is data, not an error."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wheelforge.binaries.sizecheck import SizeCheck, check_size, over_budget
from wheelforge.binaries.verify import WheelVerification, verify_wheel
from wheelforge.build import importcheck, reuse
from wheelforge.build.compiling import TORCH_LOCK, Compiled, compile_confirmed
from wheelforge.build.preflight import describe_os_error
from wheelforge.build.results import VariantFailure, VariantResult, shared_objects
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, locks, log, proc, removal, writers
from wheelforge.foundation.errors import (
    BuildError,
    ConfigError,
    EnvironmentProblem,
    Interrupted,
    WheelforgeError,
)
from wheelforge.packaging import provenance, repair, stamp, wheel
from wheelforge.planning import hostshare
from wheelforge.planning.plan import PlanInputs, VariantPlan

# Variants built side by side (build/together.py) compile at once, and pack, repair,
# check and publish one at a time: the staging, auditwheel, the import check's warm torch child
# and the --out folder's names are then as they are for one variant.
_FINISHING = threading.Lock()


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
    inputs: PlanInputs,
    settings: BuildSettings,
    *,
    null: bool = False,
    keep_repairs: bool = True,
) -> VariantResult | VariantFailure:
    """Build one variant, planned from *inputs* (and, with *null*, also publish it as the PEP 825
    null variant); a failure is returned as data (with the error), not raised, so the other
    variants still build and the report says which failed and why. Without *keep_repairs*,
    auditwheel runs even where a kept repair of the same bytes exists (repair.py): the
    reproducibility twin's wheel must come from its own repair."""
    start = time.perf_counter()
    stages = _Stages()
    variant = plan.variant
    try:
        kept = settings.cache_dir if keep_repairs else None
        try:
            return _build_variant(plan, inputs, settings, stages, start, null=null, kept=kept)
        except FileNotFoundError as exc:  # a source, a package file removed while it ran
            raise BuildError(
                f"variant {variant.id}: {exc.filename or exc} was removed while the build ran; "
                "run the build again once it is back"
            ) from None
    except Interrupted:
        raise  # SIGINT or SIGTERM ends the whole build, not one variant
    except WheelforgeError as exc:
        with contextlib.suppress(OSError):  # `wheelforge test` must not test an older wheel
            stamp.fail(plan.build_dir, exc.message)
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
    import_check: tuple[str, ...] | None = None  # what the import check ran; None: skipped
    variant_properties: tuple[str, ...] = ()
    null_wheel: Path | None = None


def _build_variant(
    plan: VariantPlan,
    inputs: PlanInputs,
    settings: BuildSettings,
    stages: _Stages,
    start: float,
    *,
    null: bool,
    kept: Path | None,
) -> VariantResult:
    variant = plan.variant
    title = f"{variant.id}: compile for {variant.arch_set} with CUDA {variant.toolkit.version}"
    with log.group(title), log.step(title), stages.stage("compile"):
        plan, made = compile_confirmed(plan, inputs, settings)
        compiled, generated = made.compiled, made.generated
        log.info(f"  {_compiled_words(plan, made, len(compiled), generated)}")
    with _FINISHING:
        return _finish(plan, made, settings, stages, start, null=null, kept=kept)


def _finish(
    plan: VariantPlan,
    made: Compiled,
    settings: BuildSettings,
    stages: _Stages,
    start: float,
    *,
    null: bool,
    kept: Path | None,
) -> VariantResult:
    """Pack (or reuse), repair, check and publish the compiled variant: its result."""
    proc.refuse_if_stopped()  # beside other variants: stopped while this one compiled
    variant = plan.variant
    compiled, generated = made.compiled, made.generated
    contents = wheel.contents(plan, repair.build_platform(), reuse.dist_info_files(plan))
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
        stamp.write(plan.build_dir, digest=digest, wheel=done.wheel, index=plan.variant.index)
        reuse.remember_verification(done.wheel, plan, done.found, done.import_check)
    published, found, reused = done.wheel, done.found, reusable is not None
    assert stages.size is not None  # _check sets it
    return VariantResult(
        index=variant.index,
        variant_id=variant.id,
        arch_set=variant.arch_set,
        toolkit=str(variant.toolkit.version),
        torch=plan.torch.label,
        wheel=published,
        wheel_size=published.stat().st_size,
        sha256=fsutil.sha256(published),
        sources=len(hostshare.all_steps(plan)),
        compiled=compiled,
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
        compile_cache=made.cache,
        jobs=made.jobs,
        peak_memory=made.peak,
        schedule=plan.compile.schedule,
        device_share=plan.compile.device_share,
        shared_objects=shared_objects(plan, stages.size, done.import_check),
        generated=generated,
        inputs=plan.build_dir / provenance.INPUTS_NAME,
    )


def _compiled_words(plan: VariantPlan, made: Compiled, compiled: int, generated: int) -> str:
    """What the compile did: sources compiled, those the compile cache answered (its hits: no
    compiler ran for them), generate steps run."""
    if not compiled and not generated:
        return "nothing to compile: up to date"
    total = len(hostshare.all_steps(plan))
    hits = sum(1 for job in made.jobs if job.cached)
    tool = made.cache.tool if made.cache is not None else "the compile cache"
    if hits and hits >= compiled:
        words = f"{hits} of {total} sources from the compile cache ({tool}), none compiled"
    elif hits:
        words = f"compiled {compiled - hits} of {total} sources, {hits} more from the compile cache ({tool})"
    elif any(job.cached is None for job in made.jobs) and made.cache is not None:
        # sccache does not say which compiles it answered, only how many (its line below)
        words = f"compiled {compiled} of {total} sources or took them from {tool} (counts below)"
    else:
        words = f"compiled {compiled} of {total} sources"
    if generated:
        words += f", ran {generated} of {len(plan.compile.generate)} generate steps"
    return words


def say_up_to_date(wheel: Path) -> None:
    """The wheel's name on a line of its own (a wheel's name fits 80 columns), then its folder:
    the whole path after the indent would not fit, and the terminal would fold it mid-name."""
    log.info(f"  {wheel.name} is up to date")
    log.info(f"  in {wheel.parent}")


def _reuse(
    reusable: Path, plan: VariantPlan, settings: BuildSettings, stages: _Stages
) -> _Published:
    """The published wheel, still made from these inputs: its stored findings (the same bytes
    give the same ones), the size budget checked again, the import check reused."""
    say_up_to_date(reusable)
    with stages.stage("verify"):
        before = reuse.verified_before(reusable, plan)
        found = _check(reusable, plan, settings, stages, before[0] if before else None)
        imported = None
        if settings.import_check:  # imported when published, unless that was skipped
            imported = (before[1] if before else None) or _import_check(reusable, plan, settings)
    return _Published(wheel=reusable, found=found, import_check=imported)


def _import_check(
    wheel_path: Path, plan: VariantPlan, settings: BuildSettings
) -> tuple[str, ...] | None:
    if not settings.import_check:
        return None
    with TORCH_LOCK:  # the warm child another variant's compile may be starting
        return importcheck.check_import(wheel_path, plan, cache_dir=settings.cache_dir)


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
        # the flags nvcc compiled with, the matrix's among them: which levers are pulled already
        nvcc_flags=[f for flags in plan.compile.flag_sets for f in shlex.split(flags.nvcc)],
        wheel=wheel_path,
        budgets={link.wheel_path: link.extension.size_budget for link in plan.links},
    )
    if stages.size.over or stages.size.over_shared:
        raise over_budget(
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
    # stage-<pid>-…: a run killed while packing leaves it; the next build sweeps it (_sweep).
    stage = Path(tempfile.mkdtemp(prefix=f"stage-{os.getpid()}-", dir=plan.build_dir))
    try:
        with stages.stage("package"):
            raw = wheel.pack(contents, stage / "raw", compress=False)  # repair deflates
            repaired = repair.repair(
                raw, stage / "repaired", source_date_epoch=wheel.source_date_epoch(), cache=kept
            )
        with stages.stage("verify"):
            found = _check(repaired, plan, settings, stages)
            imported = _import_check(repaired, plan, settings)
        with stages.stage("publish"):
            proc.refuse_if_stopped()  # never published once the build was stopped
            outputs, props = [repaired], tuple[str, ...]()
            if plan.variant.variant_label:
                from wheelforge.packaging import wheel_variants

                outputs, props = wheel_variants.for_plan(
                    plan, repaired, found.binaries, stage, null=null
                )
            # One build at a time checks and publishes into one --out, whatever its build folder.
            with locks.hold_folder(plan.out_dir, what=f"--out {plan.out_dir}"):
                for made in outputs:
                    _refuse_to_replace(plan.out_dir / made.name, made, plan)
                try:
                    done = [writers.publish(made, plan.out_dir) for made in outputs]
                except OSError as exc:
                    raise EnvironmentProblem(
                        f"--out {plan.out_dir}: cannot write {outputs[0].name}: "
                        f"{describe_os_error(exc)}"
                    ) from None
            published = done[0]
    finally:
        removal.remove(stage, within=plan.build_dir)

    # Name what was read after the published wheel, not the staging copy.
    stages.size = stages.size and stages.size.moved(repaired, published)
    return _Published(
        wheel=published,
        found=found.moved(repaired, published),
        import_check=imported,
        variant_properties=props,
        null_wheel=done[1] if len(done) > 1 else None,
    )


def _refuse_to_replace(previous: Path, made: Path, plan: VariantPlan) -> None:
    """A wheel of the same name in the output folder: another variant's (its stamp says so) is
    never replaced silently, as builds with different --archs into one --out did; any other
    is replaced with a warning."""
    if not previous.is_file() or fsutil.sha256(previous) == fsutil.sha256(made):
        return
    own = stamp.read(plan.build_dir)
    if own is not None and own.published(plan.out_dir) == previous:
        return  # this variant's own earlier wheel: a rebuild replaces it, as it always has
    other = stamp.publisher(previous, plan.build_dir.parent, besides=plan.build_dir)
    if other is not None:
        raise ConfigError(
            f"--out {plan.out_dir}: {made.name} is the wheel variant {other.build_dir.name} "
            f"published, and variant {plan.variant.id} makes one of the same name; build it into "
            f"another --out, or remove {previous} to replace it"
        )
    theirs = provenance.published_variant(previous)
    ours = (plan.variant.id, str(plan.variant.arch_set))
    if theirs is not None and theirs != ours:
        # Another build folder's variant (its stamp is not under this one): its build info says.
        raise ConfigError(
            f"--out {plan.out_dir}: {made.name} is the wheel of variant {theirs[0]} (arch set "
            f"{theirs[1]}), built from another build folder, and variant {ours[0]} (arch set "
            f"{ours[1]}) makes one of the same name; build it into another --out, or remove "
            f"{previous} to replace it"
        )
    log.warning(f"replacing {previous}: same name, other content (another arch set or toolkit?)")
