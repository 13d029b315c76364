"""The C++ and C compiles of variants in a folder they share (planning/hostshare.py): decided
in the plan, once per identical set of commands, never across a difference in a host flag."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.planning import hostshare, ninjafile
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import make_plan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.choice import ToolkitChoice
from wheelforge.toolchain.toolkits import Toolkit

from .conftest import GOOD_MATRIX
from .fakes import plan_inputs, toolkit, torch_env

Project = Callable[..., Path]
THREE = {"a": "8.0", "b": "9.0", "c": "10.0"}


def plan_of(
    inputs: PlanInputs, tmp: Path, name: str, archs: str, tk: Toolkit | None = None
) -> VariantPlan:
    tk = tk or toolkit()
    variant = Variant(
        id=f"{name}-{tk.short}",
        arch_set=ArchSet(name, parse_arch_list(archs, source="test")),
        choice=ToolkitChoice(toolkit=tk, recipe=None),
        local_label=name,
    )
    return make_plan(
        inputs,
        variant,
        torch_env(tmp),
        weak_header="#pragma weak aoti_torch_get_current_cuda_stream\n",
        nvcc_host="/usr/bin/g++",
    )


def three_plans(project: Project, tmp: Path, text: str = GOOD_MATRIX) -> list[VariantPlan]:
    inputs = plan_inputs(load_matrix(project(text)), tmp)
    return [plan_of(inputs, tmp, name, archs) for name, archs in THREE.items()]


def host_of(plan: VariantPlan) -> VariantPlan:
    assert plan.host is not None
    return plan.host


def test_three_arch_sets_share_one_folder_compiled_once(project: Project, tmp_path: Path) -> None:
    plans = three_plans(project, tmp_path)
    hosts = [host_of(p) for p in plans]
    assert len({h.build_dir for h in hosts}) == 1  # one shared folder for the three
    folder = hosts[0].build_dir
    assert folder.parent == plans[0].build_dir.parent and folder.name.startswith("host-")
    # Each shared object appears once: the three plans name the same steps, the same file text.
    assert len({h.compile.steps for h in hosts}) == 1
    assert len({ninjafile.render(h) for h in hosts}) == 1
    shared = {s.object for s in hosts[0].compile.steps}
    assert {s.source.name for s in hosts[0].compile.steps} == {"ops.cpp", "_C_module_init.c"}
    for plan in plans:
        # the variant compiles its .cu alone, and links the shared objects
        assert [s.source.name for s in plan.compile.steps] == ["kernel.cu"]
        assert shared <= set(plan.links[0].objects)
        assert len(plan.links[0].objects) == 3
    # nothing of an arch set in the shared folder's file
    text = ninjafile.render(hosts[0])
    assert "gencode=" not in text and "sm_" not in text
    assert "link" not in text.split("rule link", 1)[1].split("\n", 2)[2]  # no link edge
    for plan, archs in zip(plans, THREE.values(), strict=True):
        major, minor = archs.split(".")
        assert f"sm_{major}{minor}" in ninjafile.render(plan)


def test_the_shared_commands_are_the_variants_own(project: Project, tmp_path: Path) -> None:
    """An object is shared only when its command is what the variant would have run: the same
    text, but for where it lies (the folders sit at the same depth below the build root)."""
    matrix = load_matrix(project())
    inputs = plan_inputs(matrix, tmp_path)
    plan = plan_of(inputs, tmp_path, "a", "8.0")
    host = host_of(plan)
    assert host.compile.flag_sets[0].cxx == plan.compile.flag_sets[0].cxx
    assert host.compile.flag_sets[0].cc == plan.compile.flag_sets[0].cc
    for step in host.compile.steps:
        assert step.object.relative_to(host.build_dir).parts[0] == "obj"
        if step.source.is_relative_to(host.build_dir):  # its own generated source
            assert host.command_path(step.source) == "gen/_C_module_init.c"
        else:  # a project file: spelled as from the variant's folder
            assert host.command_path(step.source) == plan.command_path(step.source)
    # what those compiles read is written into the shared folder, not the variant's
    init = [g for g in host.compile.generated if g.path.name == "_C_module_init.c"]
    assert init and init[0].path.is_relative_to(host.build_dir)
    assert not any(g.path.name == "_C_module_init.c" for g in plan.compile.generated)
    assert any(g.path.name == "wheelforge_weak_shims.h" for g in host.compile.generated)
    assert any(g.path.name == "wheelforge_weak_shims.h" for g in plan.compile.generated)


def test_variants_differing_in_a_host_flag_do_not_share(project: Project, tmp_path: Path) -> None:
    plain = three_plans(project, tmp_path)
    flagged = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", "include-dirs: [csrc]\n  cxx-flags: [-Wall]"
    )
    other = three_plans(project, tmp_path, flagged)
    assert host_of(plain[0]).build_dir != host_of(other[0]).build_dir
    assert len({host_of(p).build_dir for p in other}) == 1
    # another toolkit (its headers are in the C++ flags): a folder of its own
    inputs = plan_inputs(load_matrix(project()), tmp_path)
    older = plan_of(inputs, tmp_path, "a", "8.0", toolkit("12.8.93"))
    assert host_of(older).build_dir != host_of(plain[0]).build_dir
    # a changed generated file the compiles read (torch's weak-shims header): another folder
    again = make_plan(
        inputs,
        plain[0].variant,
        torch_env(tmp_path),
        weak_header="#pragma weak aoti_torch_get_current_xpu_stream\n",
        nvcc_host="/usr/bin/g++",
    )
    assert host_of(again).build_dir != host_of(plain[0]).build_dir
    # nvcc flags are not the C++ compile's: still shared
    nvcc_only = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", "include-dirs: [csrc]\n  nvcc-flags: [--use_fast_math]"
    )
    assert host_of(three_plans(project, tmp_path, nvcc_only)[0]).build_dir == (
        host_of(plain[0]).build_dir
    )


def test_absolute_spelling_shares_too(project: Project, tmp_path: Path) -> None:
    """Before CUDA 12.9 the commands name every path absolutely (nvcc runs from /): the shared
    folder's own path is in them, and is left out of its key."""
    inputs = plan_inputs(load_matrix(project()), tmp_path)
    tk = toolkit("12.4.131")
    plans = [plan_of(inputs, tmp_path, n, archs, tk) for n, archs in (("a", "8.0"), ("b", "9.0"))]
    hosts = [host_of(p) for p in plans]
    assert hosts[0].build_dir == hosts[1].build_dir
    cxx = shlex.split(hosts[0].compile.flag_sets[0].cxx)
    assert f"-ffile-prefix-map={hosts[0].build_dir}=wheelforge-build" in cxx


def test_generate_steps_keep_every_compile_in_the_variants_folder(
    project: Project, tmp_path: Path
) -> None:
    text = GOOD_MATRIX + (
        'generate:\n  - name: kernels\n    run: ["{python}", "gen.py", "{out}"]\n'
        "    outputs: [k.h]\n"
    )
    (tmp_path / "gen.py").write_text("")
    plan = plan_of(plan_inputs(load_matrix(project(text)), tmp_path), tmp_path, "a", "8.0")
    assert plan.host is None
    assert {s.source.name for s in plan.compile.steps} == {
        "ops.cpp",
        "kernel.cu",
        "_C_module_init.c",
    }


def test_the_key_is_of_the_commands_not_the_schedule(project: Project, tmp_path: Path) -> None:
    """Another core count or job-cost history changes the schedule, not the commands: the
    same folder (no recompile after the first build measures its costs)."""
    matrix = load_matrix(project())
    first = plan_of(plan_inputs(matrix, tmp_path), tmp_path, "a", "8.0")
    base = plan_inputs(matrix, tmp_path)
    more = dataclasses.replace(base, cores=16, settings=dataclasses.replace(base.settings, jobs=3))
    again = plan_of(more, tmp_path, "a", "8.0")
    assert host_of(first).build_dir == host_of(again).build_dir
    assert hostshare.key(host_of(first)) == hostshare.key(host_of(again))


def test_a_shared_folder_no_variant_links_is_removed(project: Project, tmp_path: Path) -> None:
    from wheelforge.build.compiling import tidy_shared

    plans = three_plans(project, tmp_path)
    root = plans[0].build_dir.parent
    used = host_of(plans[0]).build_dir
    kept, stale = root / f"host-{'1' * 16}", root / f"host-{'2' * 16}"
    for folder in (used, kept, stale, root / "old-cu128"):
        (folder / "obj").mkdir(parents=True)
    # a variant this build did not build still links from its folder: kept
    (root / "old-cu128" / "build.ninja").write_text(f"build _C.so: link ../{kept.name}/obj/x.o\n")
    assert tidy_shared(root, plans) == [stale]
    assert used.is_dir() and kept.is_dir() and not stale.exists()
    assert tidy_shared(root, plans) == []
