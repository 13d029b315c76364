"""``build --verify-reproducible``: each variant built again from scratch in a fresh temporary
folder, and the two wheels compared byte for byte (binaries/reprodiff.py names a difference).
The rebuild compiles with no compile cache and no launcher at all (``--compile-cache none``):
a cache hit would hand it the first build's objects, identical by construction."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

from wheelforge.binaries import reprodiff
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import log
from wheelforge.foundation.errors import VerificationError
from wheelforge.packaging import stamp
from wheelforge.planning.plan import VariantPlan
from wheelforge.running.build.results import VariantFailure, VariantResult

Build = Callable[[VariantPlan, BuildSettings], "VariantResult | VariantFailure"]
Replan = Callable[..., VariantPlan]


def verify(
    result: VariantResult,
    plan: VariantPlan,
    settings: BuildSettings,
    *,
    build: Build,
    replan: Replan,
) -> VariantResult | VariantFailure:
    """Build the variant again (*replan* with another build root and output folder, then
    *build*), and require the same wheel; a difference fails the variant, naming the member,
    ELF section and fatbin entry, and takes the wheel back out of the output folder."""
    title = f"{plan.variant.id}: rebuild in another folder to verify reproducibility"
    with log.step(title), tempfile.TemporaryDirectory(prefix="wheelforge-verify-") as tmp:
        twin = replan(
            plan.variant, plan.torch, settings,
            build_root=Path(tmp) / "build", out_dir=Path(tmp) / "dist",
        )  # fmt: skip
        # No cache: replan got none, and the environment's launchers (CXX="ccache g++") go too.
        twin = dataclasses.replace(twin, cxx_launcher=(), cc_launcher=(), cuda_launcher=())
        again = build(twin, settings)
        if isinstance(again, VariantFailure):
            return again
        try:
            reprodiff.require_identical(
                result.wheel, again.wheel, what=f"variant {plan.variant.id}"
            )
        except VerificationError as exc:
            result.wheel.unlink(missing_ok=True)
            stamp.forget(plan.build_dir)
            return VariantFailure(
                variant_id=result.variant_id, arch_set=result.arch_set, toolkit=result.toolkit,
                torch=result.torch, error=exc, size=result.size,
                stages=(*result.stages, *again.stages), seconds=result.seconds + again.seconds,
            )  # fmt: skip
    return dataclasses.replace(result, reproducible=again.sha256)
