"""``wheelforge build --dry-run``: the plan of a build (variants, toolkits, archs, the exact
compile commands, every member of each wheel) with nothing compiled, downloaded or written to the
build folder."""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wheelforge.build import ninja
from wheelforge.build.prepare import selected
from wheelforge.configuration import abi as abis
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import writers
from wheelforge.packaging import wheel
from wheelforge.planning import ninjafile
from wheelforge.planning.plan import DeviceShare, VariantPlan
from wheelforge.planning.planner import plan_all, plan_inputs
from wheelforge.planning.selection import Member
from wheelforge.toolchain import toolkits as toolkit


@dataclass(frozen=True, kw_only=True)
class PlannedVariant:
    variant_id: str
    arch_set: str  # name
    archs: str
    toolkit: str  # "CUDA 13.0.88 (sm_75 to sm_121) at /usr/local/cuda", or the recipe's
    torch: str | None  # the torch compiled against, when known without installing anything
    commands: tuple[str, ...]  # exactly what ninja would run, compile and link
    note: str  # why commands are missing, if they are
    # the wheel's members as planned (the packer writes these); none where commands are missing
    members: tuple[Member, ...] = ()
    project: Path | None = None  # the folder matrix.yaml is in: members' files are named from it
    # the build folder its C++ and C compiles share with every variant whose commands are the
    # same (planning/hostshare.py), and those commands, run there; None: none shared
    shared_folder: Path | None = None
    shared_commands: tuple[str, ...] = ()
    # whether its .cu sources compile as nvcc's steps shared between arch sets, and why
    # (planning/devshare.py); None where commands are missing
    device_share: DeviceShare | None = None
    # the wheel's Requires-Dist on torch (None: the torch it builds against pins it, known once
    # that torch is), and whether no binary uses torch (then it is the matrix's torch as written)
    torch_requirement: str | None = None
    torch_free: bool = False


def dry_run(settings: BuildSettings) -> list[PlannedVariant]:
    if not settings.matrix.extensions:  # build/purewheel.py: one wheel, nothing to compile
        from wheelforge.build import purewheel

        return [
            PlannedVariant(
                variant_id=purewheel.TAG,
                arch_set=purewheel.NO_ARCH.name,
                archs="",
                toolkit="none",
                torch=None,
                commands=(),
                note="pure Python: no extension, nothing to compile",
                members=purewheel.members(settings.matrix),
                project=settings.matrix.root,
                # as purewheel.contents writes it: no binary, so no torch floor or ABI
                torch_requirement=abis.of(settings.matrix.abi).requirement(settings.matrix),
                torch_free=True,
            )
        ]
    chosen = selected(
        settings, toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    )
    matrix = settings.matrix
    requirement = abis.of(matrix.abi).requirement(matrix)
    planned = []
    inputs = None  # the build's one walk of the project, for every variant planned
    for v in chosen:
        shown = PlannedVariant(
            variant_id=v.id,
            arch_set=v.arch_set.name,
            archs=str(v.arch_set),
            toolkit=v.choice.describe(),
            torch=v.torch,
            commands=(),
            note="",
            torch_requirement=requirement,
            torch_free=not matrix.uses_torch,
        )
        note = ""
        if v.choice.toolkit is None:
            note = (
                f"CUDA {v.choice.release} is provisioned first; the commands are known after that"
            )
        elif v.torch is not None:
            # Unstable ABI: the compile flags come from an environment holding exactly that torch.
            note = f"torch {v.torch}'s build environment is made (or reused) first"
        if note:
            planned.append(dataclasses.replace(shown, note=note))
            continue
        # No compile cache; a PyPI header library is named where it will be, not downloaded.
        inputs = inputs or plan_inputs(settings, download=False)
        [plan] = plan_all(settings, [v], inputs)
        wheel.require_valid_metadata(plan, settings.matrix.path)
        host = plan.host
        planned.append(
            dataclasses.replace(
                shown,
                torch=plan.torch.label,
                torch_requirement=plan.abi.torch_requirement,
                commands=_commands(plan),
                members=plan.wheel.members,
                project=plan.project,
                shared_folder=host.build_dir if host is not None else None,
                shared_commands=_commands(host) if host is not None else (),
                device_share=plan.compile.device_share,
            )
        )
    return planned


def _commands(plan: VariantPlan) -> tuple[str, ...]:
    """The commands of the build.ninja the build would write for *plan*, rendered elsewhere:
    ninja lists them."""
    with tempfile.TemporaryDirectory(prefix="wheelforge-dry-run-") as tmp:
        writers.write_atomic(Path(tmp) / "build.ninja", ninjafile.render(plan))
        return tuple(ninja.commands(Path(tmp)))
