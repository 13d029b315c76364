"""nvcc's steps shared between arch sets (planning/devshare.py): when the plan uses them, and
the steps and edges it gives each variant and the shared folder."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.planning import devshare, ninjafile
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import make_plan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.choice import ToolkitChoice

from .conftest import GOOD_MATRIX
from .fakes import plan_inputs, toolkit, torch_env

Project = Callable[..., Path]
CCCL = "  nvcc-flags: [" + ", ".join(devshare.CCCL_OFF) + "]\n"
SETS = {"a": "8.0 9.0", "b": "9.0 10.0+PTX"}
SHARED = GOOD_MATRIX.replace("  include-dirs: [csrc]\n", "  include-dirs: [csrc]\n" + CCCL).replace(
    '  default: "8.0 9.0+PTX"\n', "".join(f'  {name}: "{archs}"\n' for name, archs in SETS.items())
)


def plan_of(inputs: PlanInputs, tmp: Path, name: str, archs: str) -> VariantPlan:
    tk = toolkit()
    variant = Variant(
        id=f"{name}-{tk.short}",
        arch_set=ArchSet(name, parse_arch_list(archs, source="test")),
        choice=ToolkitChoice(toolkit=tk, recipe=None),
        local_label=name,
    )
    weak = "#pragma weak aoti_torch_get_current_cuda_stream\n"
    return make_plan(inputs, variant, torch_env(tmp), weak_header=weak, nvcc_host="/usr/bin/g++")


def host_of(plan: VariantPlan) -> VariantPlan:
    assert plan.host is not None
    return plan.host


def plans(project: Project, tmp: Path, text: str = SHARED) -> list[VariantPlan]:
    inputs = plan_inputs(load_matrix(project(text)), tmp)
    return [plan_of(inputs, tmp, name, archs) for name, archs in SETS.items()]


def rules(plan: VariantPlan) -> list[tuple[str, str]]:
    return [(s.rule, s.code) for s in plan.compile.steps]


def test_with_cccl_namespaces_off_each_arch_is_a_shared_step(
    project: Project, tmp_path: Path
) -> None:
    a, b = plans(project, tmp_path)
    assert a.compile.device_share.on and b.compile.device_share.on
    host_a, host_b = host_of(a), host_of(b)
    assert host_a.build_dir == host_b.build_dir  # one folder: the arch list is not in its key
    # the shared folder: the C++ compiles, one device step per code, the .cu's host side
    assert sorted(r for r in rules(host_a) if r[0] != "cxx" and r[0] != "cc") == [
        ("nvcc_device", "sm_80"),
        ("nvcc_device", "sm_90"),
        ("nvcc_host", ""),
    ]
    assert ("nvcc_device", "compute_100") in rules(host_b) and ("nvcc_device", "sm_100") in rules(
        host_b
    )
    # sm_90 is the same step, the same object, in both; so is the host step
    same = {s.object for s in host_a.compile.steps} & {s.object for s in host_b.compile.steps}
    assert any(o.name.endswith(".sm_90.cubin") for o in same)
    assert any(s.rule == "nvcc_host" and s.object in same for s in host_a.compile.steps)
    # each variant: its fatbin from the shared images, linked after the shared host object
    for plan, host in ((a, host_a), (b, host_b)):
        [fatbin] = plan.compile.steps
        assert fatbin.rule == "fatbin" and fatbin.arch_set == plan.variant.arch_set
        images = [s.object for s in host.compile.steps if s.rule == "nvcc_device"]
        [host_object] = [s.object for s in host.compile.steps if s.rule == "nvcc_host"]
        assert fatbin.inputs == (*images, host_object)
        objects = list(plan.links[0].objects)
        assert objects.index(fatbin.object) == objects.index(host_object) + 1
        assert plan.compile.split_compile == 0


def test_the_edges_name_no_arch_where_arch_sets_share(project: Project, tmp_path: Path) -> None:
    a, b = plans(project, tmp_path)
    lines_a = ninjafile.render(host_of(a)).splitlines()
    lines_b = ninjafile.render(host_of(b)).splitlines()
    host_edge = [ln for ln in lines_a if ln.startswith("build ") and ": nvcc_host " in ln]
    assert len(host_edge) == 1 and "||" in host_edge[0]  # after the device steps, not on them

    # the host edge and its variables are the same text for both arch sets
    def host_block(lines: list[str]) -> list[str]:
        at = next(i for i, ln in enumerate(lines) if ": nvcc_host " in ln)
        block = [lines[at].split("||")[0]]
        for ln in lines[at + 1 :]:
            if not ln.startswith("  "):
                break
            block.append(ln)
        return block

    assert host_block(lines_a) == host_block(lines_b)
    assert any("--code $code" in ln for ln in lines_a)
    text = ninjafile.render(a)
    assert "nvccsplit fatbin" in text and "-gencode=arch=compute_90,code=sm_90" in text
    assert "nvcc_device" not in text.split("rule link", 1)[1]


def test_without_the_cccl_defines_each_variant_keeps_nvcc_c(
    project: Project, tmp_path: Path
) -> None:
    a, _ = plans(project, tmp_path, SHARED.replace(CCCL, ""))
    share = a.compile.device_share
    assert not share.on and "-DTHRUST_DISABLE_ABI_NAMESPACE" in share.why
    assert [s.rule for s in a.compile.steps] == ["nvcc"]
    assert all(s.rule in ("cxx", "cc") for s in host_of(a).compile.steps)


def test_a_source_naming_the_arch_list_keeps_nvcc_c(project: Project, tmp_path: Path) -> None:
    root = project(SHARED).parent
    (root / "csrc" / "kernel.cu").write_text("#if __CUDA_ARCH_LIST__ > 800\n#endif\n")
    a, _ = plans(project, tmp_path)
    assert not a.compile.device_share.on
    assert a.compile.device_share.why == "kernel.cu names __CUDA_ARCH_LIST__"


def test_relocatable_device_code_keeps_nvcc_c(project: Project, tmp_path: Path) -> None:
    text = SHARED.replace(
        "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR", "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR, -rdc=true"
    )
    a, _ = plans(project, tmp_path, text)
    assert not a.compile.device_share.on and "relocatable" in a.compile.device_share.why


def test_the_decision_reads_no_other_variant(project: Project, tmp_path: Path) -> None:
    """A variant planned alone is planned as within the matrix: the same steps, the same
    shared folder, so the same wheel."""
    a, _ = plans(project, tmp_path)
    inputs = plan_inputs(load_matrix(project(SHARED)), tmp_path)
    alone = plan_of(inputs, tmp_path, "a", SETS["a"])
    assert dataclasses.replace(alone.compile, schedule=a.compile.schedule) == a.compile
    assert host_of(alone).build_dir == host_of(a).build_dir
    assert ninjafile.render(alone) == ninjafile.render(a)


def test_a_matrix_of_one_arch_set_keeps_nvcc_c(project: Project, tmp_path: Path) -> None:
    """Nothing to share: the steps would only cost more (docs/performance.md)."""
    one = SHARED.replace('  b: "9.0 10.0+PTX"\n', "")
    inputs = plan_inputs(load_matrix(project(one)), tmp_path)
    plan = plan_of(inputs, tmp_path, "a", "8.0 9.0")
    assert not plan.compile.device_share.on
    assert plan.compile.device_share.why == "one arch set: nothing for nvcc's steps to share"
