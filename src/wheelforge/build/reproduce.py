"""``build --verify-reproducible``: each variant built again from scratch in a fresh temporary
folder, and the two wheels compared byte for byte (binaries/reprodiff.py names a difference).
The rebuild is planned from the twin's inputs (PlanInputs.twin): no compile cache and no
launcher at all, since a cache hit would hand it the first build's objects, identical by
construction."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from wheelforge.binaries import reprodiff
from wheelforge.build.results import VariantFailure, VariantResult
from wheelforge.build.variant import build_variant
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import log, removal
from wheelforge.foundation.errors import VerificationError
from wheelforge.packaging import stamp
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import plan_variant


def verify(
    result: VariantResult, plan: VariantPlan, inputs: PlanInputs, settings: BuildSettings
) -> VariantResult | VariantFailure:
    """Build the variant again (planned from the twin of *inputs*, in a temporary folder), and
    require the same wheel; a difference fails the variant, naming the member, ELF section and
    fatbin entry, and takes the wheel back out of the output folder."""
    title = f"{plan.variant.id}: rebuild in another folder to verify reproducibility"
    with log.step(title), tempfile.TemporaryDirectory(prefix="wheelforge-verify-") as tmp:
        twin_inputs = inputs.twin(Path(tmp))
        twin = plan_variant(twin_inputs, plan.variant, plan.torch)
        again = build_variant(twin, twin_inputs, settings, keep_repairs=False)
        if isinstance(again, VariantFailure):
            return again
        try:
            reprodiff.require_identical(
                result.wheel, again.wheel, what=f"variant {plan.variant.id}"
            )
        except VerificationError as exc:
            removal.remove(result.wheel, within=plan.out_dir)
            stamp.forget(plan.build_dir)
            return VariantFailure(
                variant_id=result.variant_id,
                arch_set=result.arch_set,
                toolkit=result.toolkit,
                torch=result.torch,
                error=exc,
                size=result.size,
                stages=(*result.stages, *again.stages),
                seconds=result.seconds + again.seconds,
            )
    return dataclasses.replace(result, reproducible=again.sha256)
