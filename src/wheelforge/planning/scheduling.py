"""A plan's compile steps as the schedule sees them (planning/parallelism.py): each step's key
in the job-cost history (planning/jobcosts.py), its cost there or the first-time estimate, how
many processes it can run side by side, and which steps the schedule puts in the heavy pool."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from wheelforge.planning import jobcosts, parallelism, reproducible
from wheelforge.planning.plan import CompileStep, FlagSet, PlanInputs, flags_rule
from wheelforge.planning.variants import Variant


def scheduled(
    inputs: PlanInputs,
    variant: Variant,
    steps: Sequence[CompileStep],
    *,
    flag_sets: Sequence[FlagSet],
    folders: tuple[tuple[Path, str], ...],
) -> tuple[list[CompileStep], parallelism.Schedule]:
    """Each step with its job-cost key and its place in the heavy pool, and the schedule that
    keeps the compiles within the memory (planning/parallelism.py), from what earlier builds
    measured of each step (inputs.costs) or the first-time estimate."""
    keyed = []
    loads = []
    for step in steps:
        whole = step.rule == "nvcc"  # one nvcc -c: its archs on nvcc's threads
        archs = step.rule in ("nvcc", "nvcc_device", "fatbin")
        gencode = (step.gencode or variant.arch_set.gencode()) if archs else ""
        flags = getattr(flag_sets[step.flag_set], flags_rule(step.rule))
        text = reproducible.path_free_text(" ".join((flags, gencode, step.flags)), folders)
        name = reproducible.source_name(step.source, inputs.settings.matrix.root)
        key = jobcosts.step_key(name, step.rule, (text,))
        units = len((step.arch_set or variant.arch_set).specs) + 1 if whole else 1
        cost = inputs.costs.get(key) or jobcosts.first_estimate(
            nvcc=step.rule in ("nvcc", "nvcc_device", "nvcc_host"),
            units=units,
            threads=inputs.settings.nvcc_threads or units,
        )
        keyed.append(dataclasses.replace(step, cost_key=key))
        # one load per step: nvcc's steps of one source are told apart by rule and code
        load = name if whole or step.rule in ("cxx", "cc") else f"{name} {step.rule} {step.code}"
        loads.append(parallelism.StepLoad(name=load, cost=cost, units=units, nvcc=whole))
    memory = inputs.memory
    found = parallelism.schedule(
        loads,
        cores=inputs.cores,
        memory=memory.bytes if memory else None,
        memory_source=memory.source if memory else "",
        jobs=inputs.settings.jobs,
        threads=inputs.settings.nvcc_threads,
    )
    heavy = set(found.heavy)
    threads = found.nvcc_threads
    placed = [
        dataclasses.replace(
            s,
            heavy=load.name in heavy,
            expected_seconds=(
                load.cost.seconds_at(threads if load.nvcc else 1, load.units)
                if load.cost.measured
                else None
            ),
        )
        for s, load in zip(keyed, loads, strict=True)
    ]
    return placed, found
