"""The arch-independent compiles of a variant, in a build folder shared by every variant whose
compiles of them are the same: a matrix of several arch sets compiles each C++ and C source once,
not once per arch set.

A C++ or C source compiles without -gencode, so its command differs between two arch sets of one
toolkit, torch and flags only in the folder it runs in. A ``.cu`` source does not: nvcc defines
``__CUDA_ARCH_LIST__`` for its host side too and embeds the fatbin of the arch set in the host
object (``nvcc --dryrun``: the host preprocessing and the host compile both get
``-D__CUDA_ARCH_LIST__=800``, the host compile includes the ``.fatbin.c``), so it stays in the
variant's folder.

The shared folder, ``<build root>/host-<key>``, is a build folder of its own, planned as a
variant's is (the same depth below the build root, so every path the commands name relative to
it is spelled as in the variant's folder) and holding only those compiles: its own build.ninja,
ninja log, deps log and freshness stamp. Its key is the digest of every command in it, except
the folder itself, and of the generated files those commands read (the weak-shims header, the
module init, the header libraries' stamp): two variants share the folder exactly when their
compiles there would be the same commands on the same inputs. The variant's links name the
objects there. A matrix with generate steps keeps every compile in the variant's folder: their
outputs, which a compile may read, are the variant's."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from wheelforge.planning import reproducible, scheduling
from wheelforge.planning.plan import (
    CompileStep,
    GeneratedFile,
    PlanInputs,
    VariantPlan,
    flags_rule,
)

# What stays in the variant's folder: one nvcc -c per .cu, or the arch set's fatbin of nvcc's
# steps (planning/devshare.py), whose host and device steps are shared
_OWN = ("nvcc", "fatbin")
HOST_PREFIX = "host-"  # the shared folders' names: host-<key>
_PROBE = "host"  # the folder the key is computed in: never created, the same depth as the others
_KEY_LENGTH = 16
# a shared folder's name, as a variant's build.ninja names it (build/compiling.tidy_shared)
FOLDER_RE = re.compile(re.escape(HOST_PREFIX) + f"[0-9a-f]{{{_KEY_LENGTH}}}")


def shared(
    inputs: PlanInputs, planned_in: Callable[[Path], VariantPlan], build_dir: Path
) -> VariantPlan:
    """The plan *planned_in* makes in *build_dir*, with its C++ and C compiles moved into the
    shared folder their commands name (``VariantPlan.host``); the plan as made when it has
    none, or generate steps."""
    plan = planned_in(build_dir)
    moved = [s for s in plan.compile.steps if s.rule not in _OWN]
    if not moved or plan.compile.generate:
        return plan
    root = inputs.settings.build_root.resolve()
    probe = _host_part(inputs, planned_in(root / _PROBE))
    folder = root / f"{HOST_PREFIX}{key(probe)}"
    host = _host_part(inputs, planned_in(folder))
    objects = {s.object: folder / s.object.relative_to(build_dir) for s in moved}
    assert set(objects.values()) == {s.object for s in host.compile.steps}, "host steps differ"
    host_sources = {s.source for s in moved}
    compile_plan = dataclasses.replace(
        plan.compile,
        steps=tuple(
            dataclasses.replace(s, inputs=tuple(objects.get(i, i) for i in s.inputs))
            for s in plan.compile.steps
            if s.rule in _OWN
        ),
        # a generated source of a moved compile (the module init) is the shared folder's
        generated=tuple(g for g in plan.compile.generated if g.path not in host_sources),
        # what the compiles read there is named as in the variant's own folder (the inputs
        # list, the SBOM): the same wheel as with every compile in the variant's folder
        input_folders=(*plan.compile.input_folders, (folder, reproducible.BUILD_DIR)),
    )
    links = tuple(
        dataclasses.replace(link, objects=tuple(objects.get(o, o) for o in link.objects))
        for link in plan.links
    )
    return dataclasses.replace(plan, compile=compile_plan, links=links, host=host)


def _host_part(inputs: PlanInputs, plan: VariantPlan) -> VariantPlan:
    """*plan* (made in the shared folder) cut to its C++ and C compiles and nvcc's host and
    device steps (planning/devshare.py), and what they read: no link, no nvcc flags where no
    nvcc step is there, no -gencode (a device step has its own), and a schedule of their own
    (the device steps are the arch set's; everything else the same for every variant)."""
    steps = [s for s in plan.compile.steps if s.rule not in _OWN]
    nvcc = any(s.rule == "nvcc_host" for s in steps)
    placed, timing = scheduling.scheduled(
        inputs,
        plan.variant,
        steps,
        flag_sets=plan.compile.flag_sets,
        folders=plan.compile.input_folders,
    )
    return dataclasses.replace(
        plan,
        compile=dataclasses.replace(
            plan.compile,
            flag_sets=tuple(
                f if nvcc else dataclasses.replace(f, nvcc="") for f in plan.compile.flag_sets
            ),
            gencode="",
            steps=tuple(placed),
            left_out=(),
            generated=_read_by(plan),
            nvcc_preload=None,
            jobs=timing.jobs,
            nvcc_threads=timing.nvcc_threads,
            split_compile=0,  # no nvcc compile
            schedule=timing,
        ),
        links=(),
        host=None,
    )


def _read_by(plan: VariantPlan) -> tuple[GeneratedFile, ...]:
    """The generated files the C++ and C compiles may read: every file the plan generates (the
    weak-shims header a C++ source is given with -include, the module init; a matrix with
    generate steps shares nothing) and the header libraries' stamp (every compile depends on
    it)."""
    return tuple(plan.compile.generated)


def key(host: VariantPlan) -> str:
    """The digest of every compile command of *host* (its launcher, compiler, flags, source
    and object, as the commands spell them) and of the generated files they read, the
    folder's own path left out: the same exactly when the commands are. nvcc's device steps
    are left out: they differ by arch alone, and each arch set adds its own to the folder."""
    folder = host.build_dir
    spell = host.command_path
    compile_plan = host.compile
    launchers = compile_plan.launchers
    stamp = compile_plan.header_stamp
    nvcc_steps = any(s.rule == "nvcc_host" for s in compile_plan.steps)
    material = {
        "compilers": {"cxx": compile_plan.cxx, "cc": compile_plan.cc}
        | ({"nvcc": str(compile_plan.nvcc)} if nvcc_steps else {}),
        "launchers": {"cxx": launchers.cxx, "cc": launchers.cc},
        "steps": [
            [
                s.rule,
                getattr(compile_plan.flag_sets[s.flag_set], flags_rule(s.rule)),
                s.flags,
                spell(s.source),
                spell(s.object),
            ]
            for s in compile_plan.steps
            if s.rule != "nvcc_device"
        ],
        "depends": spell(stamp.path) if stamp else None,
        "generated": [[os.path.relpath(g.path, folder), g.text] for g in compile_plan.generated],
    }
    text = json.dumps(material, sort_keys=True).replace(str(folder), "@")
    return hashlib.sha256(text.encode()).hexdigest()[:_KEY_LENGTH]


def parts(plan: VariantPlan) -> list[VariantPlan]:
    """The build folders a variant's compiles run in, in order: the shared one first."""
    return [plan.host, plan] if plan.host is not None else [plan]


def all_steps(plan: VariantPlan) -> tuple[CompileStep, ...]:
    """Every compile step of a variant, in its folder and in the shared one."""
    return tuple(s for part in parts(plan) for s in part.compile.steps)
