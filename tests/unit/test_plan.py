from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from wheelforge import ninja
from wheelforge.matrix import load_matrix

from .conftest import GOOD_MATRIX
from .fakes import plan_for

Project = Callable[..., Path]


def test_flags_follow_the_stable_abi_rules(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    cxx = shlex.split(plan.cxx_flags)
    nvcc = shlex.split(plan.nvcc_flags)
    for flags in (cxx, nvcc):
        assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in flags
        assert "-DPy_LIMITED_API=0x030a0000" in flags
        assert "-std=c++17" in flags
        assert flags[flags.index("-include") + 1].endswith("gen/wheelforge_weak_shims.h")
        assert f"-I{tmp_path / 'torch' / 'include'}" in flags
        assert f"-I{tmp_path / 'csrc'}" in flags
    assert "-DUSE_CUDA" in nvcc and "-DUSE_CUDA" not in cxx
    assert {"-fPIC", "-fvisibility=hidden"} <= set(cxx)
    assert {"-Xcompiler=-fPIC", "-Xcompiler=-fvisibility=hidden"} <= set(nvcc)
    gencode = [f for f in nvcc if f.startswith("-gencode")]
    assert gencode == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert "--threads" not in nvcc


def test_link_keeps_libtorch_and_static_cudart(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    ld = shlex.split(plan.ldflags)
    assert "/opt/cuda/lib64/libcudart_static.a" in ld
    assert ld.index("-Wl,--no-as-needed") < ld.index("-ltorch") < ld.index("-Wl,--as-needed")
    assert "-Wl,--exclude-libs,ALL" in ld


def test_steps_objects_and_generated_module_init(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    rules = {s.source.name: s.rule for s in plan.compile_steps}
    assert rules == {"ops.cpp": "cxx", "kernel.cu": "nvcc", "_C_module_init.c": "cc"}
    objects = [s.object for s in plan.compile_steps]
    assert len(set(objects)) == len(objects)
    assert all(o.is_relative_to(plan.build_dir / "obj") for o in objects)
    init = next(g for g in plan.generated if g.path.name == "_C_module_init.c")
    assert "PyInit__C" in init.text and "PyModule_Create" in init.text
    assert plan.library.name == "_C.abi3.so"
    assert plan.wheel_library_path == "demo_ops/_C.abi3.so"
    assert plan.abi_tag == "cp310-abi3"


def test_module_init_can_be_turned_off(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace("include-dirs: [csrc]", "include-dirs: [csrc]\n  module-init: false")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    assert [g.path.name for g in plan.generated] == ["wheelforge_weak_shims.h"]


def test_nvcc_threads_and_user_flags(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]",
        "include-dirs: [csrc]\n  nvcc-flags: [--use_fast_math]\n  cxx-flags: [-Wall]",
    )
    plan = plan_for(load_matrix(project(text)), tmp_path, nvcc_threads=4)
    nvcc = shlex.split(plan.nvcc_flags)
    assert nvcc[nvcc.index("--threads") + 1] == "4"
    assert nvcc[-1] == "--use_fast_math"
    assert shlex.split(plan.cxx_flags)[-1] == "-Wall"


def test_ninja_file(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    text = ninja.render(plan)
    assert "rule nvcc" in text and "--generate-dependencies-with-compile" in text
    assert "deps = gcc" in text
    for step in plan.compile_steps:
        assert f"build {step.object}: {step.rule} {step.source}" in text
    assert f"build {plan.library}: link " in text
    assert f"default {plan.library}" in text
    assert text == ninja.render(plan)  # deterministic


def test_ninja_escapes_dollars(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", "include-dirs: [csrc]\n  cxx-flags: ['-DX=$HOME']"
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    assert "-DX=$$HOME" in ninja.render(plan)


def test_write_only_when_changed(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    path = ninja.write(plan)
    before = path.stat().st_mtime_ns
    ninja.write(plan)
    assert path.stat().st_mtime_ns == before
