from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.reader import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import hostshare, ninjafile
from wheelforge.planning.parallelism import auto_nvcc_threads
from wheelforge.planning.planner import make_plan
from wheelforge.running.builds import ninja
from wheelforge.toolchain.compilecache import CompileCache

from .conftest import GOOD_MATRIX
from .fakes import plan_for, plan_inputs

Project = Callable[..., Path]


def test_flags_follow_the_stable_abi_rules(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    cxx = shlex.split(plan.compile.flag_sets[0].cxx)
    nvcc = shlex.split(plan.compile.flag_sets[0].nvcc)
    for flags in (cxx, nvcc):
        assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in flags
        assert "-DPy_LIMITED_API=0x030a0000" in flags
        assert "-std=c++17" in flags
        # The build folder (tmp/build/default-cu130) lies in the project: paths relative to it.
        assert flags[flags.index("-include") + 1] == "gen/wheelforge_weak_shims.h"
        assert "-I../../torch/include" in flags
        assert "-I../../csrc" in flags
    assert "-DUSE_CUDA" in nvcc and "-DUSE_CUDA" not in cxx
    assert "-fPIC" in cxx
    assert "-Xcompiler=-fPIC" in nvcc
    # Exports are the version script's job, never the sources' visibility (issue 9, defect 1).
    assert not any("visibility" in f for f in (*cxx, *nvcc))
    assert not any(f.startswith("-gencode") for f in nvcc)  # the arch set's flags are separate
    gencode = shlex.split(plan.compile.gencode)
    assert gencode == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert "--threads" not in nvcc
    assert plan.compile.nvcc_threads == 1  # planned for the one core fakes.plan_inputs gives


def test_paths_outside_the_project_stay_absolute(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(project())
    inside = plan_for(matrix, tmp_path)
    assert inside.command_path(tmp_path / "csrc" / "kernel.cu") == "../../csrc/kernel.cu"
    assert inside.command_path(Path("/usr/include/python3.11")) == "/usr/include/python3.11"
    # A build folder outside the project: its own files relative, the project's absolute
    # (a climb out of the build folder would name the clone's folder anyway).
    outside = dataclasses.replace(inside, build_dir=Path("/elsewhere/build"))
    assert outside.command_path(Path("/elsewhere/build/obj/a.o")) == "obj/a.o"
    assert outside.command_path(tmp_path / "csrc" / "kernel.cu") == str(
        tmp_path / "csrc" / "kernel.cu"
    )


def test_auto_nvcc_threads_fill_the_cores() -> None:
    # 16 cores, two .cu files at once: eight threads each, at most one per arch and one for
    # the host side.
    assert auto_nvcc_threads(cores=16, jobs=None, nvcc_sources=2, targets=7) == 8
    assert auto_nvcc_threads(cores=16, jobs=None, nvcc_sources=2, targets=5) == 6
    assert auto_nvcc_threads(cores=16, jobs=None, nvcc_sources=2, targets=12) == 8
    assert (
        auto_nvcc_threads(cores=16, jobs=1, nvcc_sources=2, targets=12) == 13
    )  # -j1: one at a time
    assert auto_nvcc_threads(cores=2, jobs=None, nvcc_sources=2, targets=3) == 1
    assert auto_nvcc_threads(cores=2, jobs=None, nvcc_sources=1, targets=3) == 2
    assert auto_nvcc_threads(cores=64, jobs=None, nvcc_sources=0, targets=1) == 2


def test_link_keeps_libtorch_and_static_cudart(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    ld = shlex.split(plan.links[0].ldflags)
    assert "/opt/cuda-13.0.88/lib64/libcudart_static.a" in ld
    assert ld.index("-Wl,--no-as-needed") < ld.index("-ltorch") < ld.index("-Wl,--as-needed")
    assert "-Wl,--exclude-libs,ALL" in ld


def test_steps_objects_and_generated_module_init(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    steps = hostshare.all_steps(plan)
    rules = {s.source.name: s.rule for s in steps}
    assert rules == {"ops.cpp": "cxx", "kernel.cu": "nvcc", "_C_module_init.c": "cc"}
    objects = [s.object for s in steps]
    assert len(set(objects)) == len(objects)
    # the C++ and C objects in the shared folder (planning/hostshare.py), the .cu's in the variant's
    assert plan.host is not None
    folders = {s.source.name: s.object for s in steps}
    assert folders["kernel.cu"].is_relative_to(plan.build_dir / "obj")
    assert folders["ops.cpp"].is_relative_to(plan.host.build_dir / "obj")
    assert folders["_C_module_init.c"].is_relative_to(plan.host.build_dir / "obj")
    generated = (*plan.compile.generated, *plan.host.compile.generated)
    init = next(g for g in generated if g.path.name == "_C_module_init.c")
    assert "PyInit__C" in init.text and "PyModule_Create" in init.text
    assert plan.links[0].library.name == "_C.abi3.so"
    assert plan.links[0].wheel_path == "demo_ops/_C.abi3.so"
    assert plan.abi.abi_tag == "cp310-abi3"


def test_module_init_can_be_turned_off(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace("include-dirs: [csrc]", "include-dirs: [csrc]\n  module-init: false")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    assert [g.path.name for g in plan.compile.generated] == [
        "wheelforge_weak_shims.h",
        "exports.map",
    ]


def test_nvcc_threads_and_user_flags(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]",
        "include-dirs: [csrc]\n  nvcc-flags: [--use_fast_math]\n  cxx-flags: [-Wall]",
    )
    plan = plan_for(load_matrix(project(text)), tmp_path, nvcc_threads=4)
    nvcc = shlex.split(plan.compile.flag_sets[0].nvcc)
    # --threads goes to nvcc through its environment, not the command line: neither ninja
    # nor a compile cache sees a change when the core count changes.
    assert "--threads" not in nvcc and plan.compile.nvcc_threads == 4
    env = ninja.run_env(plan)
    assert env["NVCC_APPEND_FLAGS"].endswith("--threads 4")
    assert nvcc[-1] == "--use_fast_math"
    assert shlex.split(plan.compile.flag_sets[0].cxx)[-1] == "-Wall"


def test_ninja_file(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(project())
    plan = plan_for(matrix, tmp_path)
    text = ninjafile.render(plan)
    assert "rule nvcc" in text and "--generate-dependencies-with-compile" in text
    assert "$nvcc_flags $gencode $source_flags -c $in" in text
    assert "deps = gcc" in text
    for step in plan.compile.steps:
        obj, src = plan.command_path(step.object), plan.command_path(step.source)
        assert f"build {obj}: {step.rule} {src}" in text
    assert plan.host is not None
    assert f"build _C.abi3.so: link ../{plan.host.build_dir.name}/obj/" in text
    assert "default _C.abi3.so" in text
    assert (
        "cuda_launcher = \n" in text
        and "command = $nvcc_launch$job_cost $out $cuda_launcher $nvcc " in text
    )
    # No compile command names the folder the project lies in (the link's do: it is not cached).
    compiles = [ln for ln in text.splitlines() if not ln.startswith("ldflags = ")]
    assert not [ln for ln in compiles if str(tmp_path) in ln]
    assert text == ninjafile.render(plan)  # deterministic
    ccache = CompileCache(tool="ccache", exe=Path("/opt/bin/ccache"), base=tmp_path)
    inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), compile_cache=ccache)
    cached = make_plan(inputs, plan.variant, plan.torch, weak_header="", nvcc_host="g++")
    assert "cuda_launcher = /opt/bin/ccache\n" in ninjafile.render(cached)


def test_ninja_escapes_dollars(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", "include-dirs: [csrc]\n  cxx-flags: ['-DX=$HOME']"
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    assert "-DX=$$HOME" in ninjafile.render(plan)


def test_write_only_when_changed(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    text = ninjafile.write(plan)
    path = plan.build_dir / "build.ninja"
    assert path.read_text() == text
    before = path.stat().st_mtime_ns
    ninjafile.write(plan)
    assert path.stat().st_mtime_ns == before


def test_per_source_arch_limits(project: Project, tmp_path: Path) -> None:
    (tmp_path / "csrc" / "hopper.cu").write_text("// wgmma\n")
    (tmp_path / "csrc" / "volta.cu").write_text("// old\n")
    text = GOOD_MATRIX.replace(
        "sources: [csrc/*.cpp, csrc/*.cu]",
        "sources:\n    - csrc/*.cpp\n    - csrc/*.cu\n    - {files: csrc/hopper.cu, archs: 9.0a}\n"
        "    - {files: csrc/volta.cu, archs: '7.0'}",
    )
    plan = plan_for(load_matrix(project(text)), tmp_path, archs="8.0 9.0+PTX")
    by_name = {s.source.name: s for s in plan.compile.steps}
    assert by_name["kernel.cu"].arch_set is None  # the arch set's own flags
    assert str(by_name["hopper.cu"].arch_set) == "9.0a"
    assert "volta.cu" not in by_name and [p.name for p in plan.compile.left_out] == ["volta.cu"]
    rendered = ninjafile.render(plan)
    assert "  gencode = -gencode=arch=compute_90a,code=sm_90a" in rendered


def test_two_limits_on_one_source_are_refused(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "sources: [csrc/*.cpp, csrc/*.cu]",
        "sources: [csrc/*.cpp, {files: csrc/*.cu, archs: 9.0a}, {files: csrc/kernel.cu, archs: '8.0'}]",
    )
    with pytest.raises(ConfigError, match="kernel.cu is limited by both"):
        plan_for(load_matrix(project(text)), tmp_path)


def test_local_label_goes_into_the_version(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(project())
    plan = plan_for(matrix, tmp_path)
    assert plan.wheel.version == "1.2.0"
    labelled = make_plan(
        plan_inputs(matrix, tmp_path),
        dataclasses.replace(plan.variant, local_label="hopper.cu131"),
        plan.torch,
        weak_header="",
        nvcc_host="c++",
    )
    assert labelled.wheel.version == "1.2.0+hopper.cu131"


def test_a_line_break_in_a_path_or_flag_is_one_line_not_an_assertion(
    tmp_path: Path,
) -> None:
    """Issue 21: a newline in the project path ended in an AssertionError from ninja_syntax."""
    import pytest

    from wheelforge.configuration.matrix.reader import load_matrix
    from wheelforge.foundation.errors import ConfigError
    from wheelforge.planning import ninjafile

    from .conftest import GOOD_MATRIX
    from .fakes import plan_for

    root = tmp_path / "my\nproject"
    (root / "demo_ops").mkdir(parents=True)
    (root / "demo_ops" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    for name in ("ops.cpp", "kernel.cu", "ops.h"):
        (root / "csrc" / name).write_text("//\n")
    (root / "matrix.yaml").write_text(GOOD_MATRIX)
    plan = plan_for(load_matrix(root / "matrix.yaml"), tmp_path)
    with pytest.raises(ConfigError, match="holds a line break, which a ninja file cannot express"):
        ninjafile.render(plan)
