"""A plan is never changed once made: torch's confirmed answer is planned again through the one
planning call (build/compiling.compile_confirmed), and compiled again only when it differs."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.build import compiling
from wheelforge.build.compiling import Compiled
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import make_plan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain import torchprobe
from wheelforge.toolchain.torchprobe import TorchEnv

from .fakes import plan_for, plan_inputs

Project = Callable[..., Path]


@pytest.mark.parametrize("answer", ["same", "other"])
def test_torchs_answer_is_planned_again_through_the_planning_call(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    matrix = load_matrix(project())
    inputs = plan_inputs(matrix, tmp_path)
    plan = plan_for(matrix, tmp_path)
    # Torch's own answer: the same torch (with the files it watches), or another version.
    confirmed = dataclasses.replace(
        plan.torch,
        watch=("site-packages",),
        version=plan.torch.version if answer == "same" else Version("2.14.0"),
    )
    planned: list[tuple[PlanInputs, Variant, TorchEnv]] = []

    def plan_variant(given: PlanInputs, v: Variant, torch: TorchEnv) -> VariantPlan:
        planned.append((given, v, torch))
        return make_plan(given, v, torch, weak_header="", nvcc_host="g++")

    compiled: list[VariantPlan] = []

    def compile_variant(p: VariantPlan, **_: object) -> Compiled:
        compiled.append(p)
        return Compiled(ran=("NVCC",))

    monkeypatch.setattr(compiling, "plan_variant", plan_variant)
    monkeypatch.setattr(compiling, "compile_variant", compile_variant)
    monkeypatch.setattr(torchprobe, "confirm", lambda _torch, cache=None: confirmed)
    settings = types.SimpleNamespace(cache_dir=tmp_path / "cache", import_check=False)
    made, ran = compiling.compile_confirmed(plan, inputs, settings)  # type: ignore[arg-type]
    assert planned == [(inputs, plan.variant, confirmed)] and made.torch is confirmed
    assert made is not plan and plan.torch is not confirmed  # the first plan is left as made
    assert list(ran.ran) == (["NVCC"] if answer == "same" else ["NVCC", "NVCC"])
    assert compiled == ([plan] if answer == "same" else [plan, made])


def test_a_torch_that_was_not_a_guess_keeps_its_plan(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = load_matrix(project())
    plan = plan_for(matrix, tmp_path)
    monkeypatch.setattr(compiling, "compile_variant", lambda p, **_: Compiled())
    monkeypatch.setattr(compiling, "plan_variant", lambda *_: pytest.fail("planned again"))
    settings = types.SimpleNamespace(cache_dir=None, import_check=False)
    made, ran = compiling.compile_confirmed(plan, plan_inputs(matrix, tmp_path), settings)  # type: ignore[arg-type]
    assert made is plan and list(ran.ran) == []
