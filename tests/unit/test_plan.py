from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import ninja
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import hostshare, ninjafile, planner
from wheelforge.planning.parallelism import auto_nvcc_threads
from wheelforge.planning.planner import make_plan
from wheelforge.toolchain.compilecache import CompileCache
from wheelforge.toolchain.toolkits import Toolkit

from .conftest import GOOD_MATRIX
from .fakes import plan_for, plan_inputs, toolkit

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

    from wheelforge.configuration.matrix.load import load_matrix
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


def _split_toolkit(split: bool = True, jobserver: bool = True) -> Toolkit:
    return dataclasses.replace(toolkit(), split_compile=split, jobserver=jobserver)


def test_split_compile_is_one_fixed_flag_of_every_nvcc_compile(
    project: Project, tmp_path: Path
) -> None:
    """Where nvcc lists --split-compile and --jobserver, every nvcc compile is cut into the same
    number of partitions whatever the machine's cores (the number changes nvcc's bytes), as one
    token a launcher cannot take for an input file; nvcc's --jobserver goes through its
    environment only when ninja runs under a jobserver (it changes no byte)."""
    matrix = load_matrix(project())
    plan = plan_for(matrix, tmp_path, tk=_split_toolkit())
    nvcc = shlex.split(plan.compile.flag_sets[0].nvcc)
    assert f"--split-compile={planner.SPLIT_PARTITIONS}" in nvcc
    assert plan.compile.split_compile == planner.SPLIT_PARTITIONS
    for cores in (2, 128):
        inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), cores=cores)
        other = plan_for(matrix, tmp_path, tk=_split_toolkit(), inputs=inputs)
        assert other.compile.flag_sets == plan.compile.flag_sets
    assert "--jobserver" not in ninja.run_env(plan).get("NVCC_APPEND_FLAGS", "")
    assert ninja.run_env(plan, jobserver=True)["NVCC_APPEND_FLAGS"].endswith("--jobserver")
    text = ninjafile.render(plan)
    assert f"--split-compile={planner.SPLIT_PARTITIONS}" in text


@pytest.mark.parametrize(
    ("split", "jobserver", "wanted", "expected"),
    [
        (False, True, None, 0),  # nvcc without --split-compile
        (True, False, None, 0),  # without --jobserver every partition would run at once
        (True, True, 1, 0),  # WHEELFORGE_SPLIT_COMPILE=1: not cut
        (True, True, 4, 4),
    ],
)
def test_split_compile_needs_both_options_and_can_be_set(
    project: Project, tmp_path: Path, split: bool, jobserver: bool, wanted: int | None,
    expected: int,
) -> None:  # fmt: skip
    matrix = load_matrix(project())
    inputs = plan_inputs(matrix, tmp_path)
    inputs = dataclasses.replace(
        inputs, settings=dataclasses.replace(inputs.settings, split_compile=wanted)
    )
    plan = plan_for(matrix, tmp_path, tk=_split_toolkit(split, jobserver), inputs=inputs)
    assert plan.compile.split_compile == expected
    assert ("--split-compile" in plan.compile.flag_sets[0].nvcc) == bool(expected)
    appended = ninja.run_env(plan, jobserver=True).get("NVCC_APPEND_FLAGS", "")
    assert ("--jobserver" in appended) == bool(expected)


def test_no_split_compile_where_the_release_is_not_known_to_take_a_fifo_jobserver(
    project: Project, tmp_path: Path
) -> None:
    """A CUDA 12.8 nvcc that lists both options is not split: the release table's ``jobserver``
    is measured on 13.0 only, and without a jobserver each partition runs at once."""
    tk = dataclasses.replace(toolkit("12.8.93"), split_compile=True, jobserver=True)
    plan = plan_for(load_matrix(project()), tmp_path, tk=tk)
    assert plan.compile.split_compile == 0
    assert "--split-compile" not in plan.compile.flag_sets[0].nvcc


def test_a_plain_library_keeps_its_exports_and_links_no_torch(
    project: Project, tmp_path: Path
) -> None:
    text = GOOD_MATRIX.replace(
        "  name: demo_ops._C\n",
        "  name: demo_ops.libdemo_cuda\n  kind: plain\n  libraries: [cublas]\n",
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    link = plan.links[0]
    assert link.wheel_path == "demo_ops/libdemo_cuda.so"
    assert link.role == "library"
    ld = shlex.split(link.ldflags)
    assert not [f for f in ld if f.startswith(("-ltorch", "-lc10"))]
    assert "-Wl,-soname,libdemo_cuda.so" in ld
    # cuBLAS from the toolkit's library folder, cudart static and hidden as for every kind
    assert ld.index("-L/opt/cuda-13.0.88/lib64") < ld.index("-lcublas")
    assert "-Wl,--exclude-libs,ALL" in ld
    generated = {g.path.name: g.text for g in plan.compile.generated}
    assert "global:\n    *;" in generated["exports.map"]
    every = [*plan.compile.generated, *(plan.host.compile.generated if plan.host else ())]
    assert not [g for g in every if "module_init" in g.path.name]  # no PyInit invented
    assert link.device_link is None


def test_a_wheel_of_plain_libraries_only_is_tagged_py3_none(
    project: Project, tmp_path: Path
) -> None:
    """No CPython extension module: any CPython 3 loads it with ctypes (bitsandbytes' own
    wheels are py3-none-<platform>); a Python module keeps the ABI's tag."""
    plain = GOOD_MATRIX.replace(
        "  name: demo_ops._C\n", "  name: demo_ops.libdemo\n  kind: plain\n"
    )
    plan = plan_for(load_matrix(project(plain)), tmp_path)
    assert plan.python_tag == "py3-none"
    module = plan_for(load_matrix(project()), tmp_path / "module")
    assert module.python_tag == module.abi.abi_tag == "cp310-abi3"


def test_a_wheel_whose_binaries_use_no_torch_requires_the_projects_own_torch(
    project: Project, tmp_path: Path
) -> None:
    """bitsandbytes (issue 40 item 2): every extension kind: plain, loaded with ctypes and
    linking no torch: the matrix may name the project's own range below the stable ABI's 2.9,
    and the wheel requires it as written (its own wheel's torch<3,>=2.4), with no floor."""
    from wheelforge.packaging import wheel

    plain = GOOD_MATRIX.replace(
        "  name: demo_ops._C\n", "  name: demo_ops.libdemo\n  kind: plain\n"
    ).replace('torch: ">=2.10"', "torch: '>=2.4,<3'")
    matrix = load_matrix(project(plain))
    assert not matrix.uses_torch
    plan = plan_for(matrix, tmp_path)
    assert plan.abi.torch_free and plan.abi.torch_requirement == "torch<3,>=2.4"
    assert plan.links[0].torch_target is None  # no -DTORCH_TARGET_VERSION, no floor to check
    assert "Requires-Dist: torch<3,>=2.4\n" in wheel.metadata_text(plan)
    # an extension module uses torch: the stable ABI's floor holds
    module = plain.replace("  kind: plain\n", "")
    with pytest.raises(ConfigError, match="the stable ABI needs torch >= 2.9.*kind: plain"):
        load_matrix(project(module))
    used = plan_for(load_matrix(project(GOOD_MATRIX)), tmp_path / "module")
    assert not used.abi.torch_free and used.abi.torch_requirement == "torch>=2.10"


def test_the_dry_run_says_what_the_wheel_requires_of_torch_and_why() -> None:
    import io

    from rich.console import Console

    from wheelforge.build.dryrun import PlannedVariant
    from wheelforge.cli.build_screen import print_dry_run

    def shown(**given: object) -> str:
        planned = PlannedVariant(
            variant_id="default-cu130", arch_set="default", archs="8.0", toolkit="CUDA 13.0",
            torch="2.13.0", commands=(), note="", **given,  # type: ignore[arg-type]
        )  # fmt: skip
        console = Console(file=io.StringIO(), width=300)
        print_dry_run([planned], console)
        text: str = console.file.getvalue()  # type: ignore[attr-defined]
        return next(ln for ln in text.splitlines() if ln.startswith("  requires: "))

    free = shown(torch_requirement="torch<3,>=2.4", torch_free=True)
    assert free.startswith("  requires: torch<3,>=2.4, the matrix's torch as written")
    assert "no binary uses torch (every extension is kind: plain, or there is none)" in free
    assert shown(torch_requirement="torch>=2.10") == "  requires: torch>=2.10"
    assert "pinned to the torch it builds against" in shown()


def test_relocatable_device_code_gets_nvccs_device_link(project: Project, tmp_path: Path) -> None:
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", "include-dirs: [csrc]\n  nvcc-flags: [-rdc=true]"
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    dlink = plan.links[0].device_link
    assert dlink is not None
    assert [o.name for o in dlink.objects] == ["kernel.cu.o"]  # the CUDA objects only
    ld = shlex.split(plan.links[0].ldflags)
    assert ld.index("/opt/cuda-13.0.88/lib64/libcudadevrt.a") < ld.index(
        "/opt/cuda-13.0.88/lib64/libcudart_static.a"
    )
    text = ninjafile.render(plan)
    out = plan.command_path(dlink.output)
    assert "command = $nvcc_launch$nvcc -dlink $dlink_flags $gencode $in -o $out" in text
    assert f"build {out}: dlink {plan.command_path(dlink.objects[0])}" in text
    link_line = next(ln for ln in text.splitlines() if ln.startswith("build _C.abi3.so: link"))
    assert link_line.endswith(f"{out} | gen/exports.map")
    assert "--compress-mode" not in dlink.flags


def test_the_device_link_packs_its_fatbin_as_the_nvcc_flags_ask(
    project: Project, tmp_path: Path
) -> None:
    """bitsandbytes' --compress-mode=size: CMake gives the device link CMAKE_CUDA_FLAGS too;
    without it the linked image is 14 times larger (2.7 MiB of SASS for 200 KiB)."""
    flags = "[-rdc=true, --compress-mode=size, --use_fast_math, -Xfatbin=-compress-all]"
    text = GOOD_MATRIX.replace(
        "include-dirs: [csrc]", f"include-dirs: [csrc]\n  nvcc-flags: {flags}"
    )
    dlink = plan_for(load_matrix(project(text)), tmp_path).links[0].device_link
    assert dlink is not None
    assert shlex.split(dlink.flags)[-2:] == ["--compress-mode=size", "-Xfatbin=-compress-all"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((), False),
        (("-rdc=true",), True),
        (("--relocatable-device-code=true",), True),
        (("-rdc", "true"), True),
        (("-dc",), True),
        (("-rdc=true", "-rdc=false"), False),
        (("-rdc=false",), False),
    ],
)
def test_which_nvcc_flags_ask_for_relocatable_device_code(
    flags: tuple[str, ...], expected: bool, project: Project
) -> None:
    from wheelforge.planning.planner import relocatable

    ext = dataclasses.replace(load_matrix(project()).extensions[0], nvcc_flags=flags)
    assert relocatable(ext) is expected


def test_a_sources_own_flags_follow_the_extensions_on_its_compile_alone(
    project: Project, tmp_path: Path
) -> None:
    text = GOOD_MATRIX.replace(
        "  sources: [csrc/*.cpp, csrc/*.cu]\n",
        "  sources:\n  - csrc/*.cpp\n"
        "  - {files: csrc/kernel.cu, flags: [-static-global-template-stub=false]}\n"
        "  nvcc-flags: [--use_fast_math]\n",
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    steps = {s.source.name: s for s in hostshare.all_steps(plan)}
    assert shlex.split(steps["kernel.cu"].flags)[-1] == "-static-global-template-stub=false"
    assert "-static-global-template-stub" not in steps["ops.cpp"].flags
    text = ninjafile.render(plan)
    line = next(ln for ln in text.splitlines() if "source_flags" in ln and "template" in ln)
    assert "-static-global-template-stub=false" in line


@pytest.mark.parametrize(("value", "macro"), [("3", "3"), ("3.8", "0x03080000")])
def test_an_extension_s_limited_api_is_its_py_limited_api_and_the_tag_stays(
    project: Project, tmp_path: Path, value: str, macro: str
) -> None:
    # CMake's USE_SABI 3 writes -DPy_LIMITED_API=3 (Python's docs: the same as 3.2): kept as
    # written, while the wheel stays tagged python-abi's cp310-abi3
    text = GOOD_MATRIX.replace(
        "  include-dirs: [csrc]\n", f'  include-dirs: [csrc]\n  limited-api: "{value}"\n'
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    for flags in (plan.compile.flag_sets[0].cxx, plan.compile.flag_sets[0].nvcc):
        words = shlex.split(flags)
        assert f"-DPy_LIMITED_API={macro}" in words
        assert "-DPy_LIMITED_API=0x030a0000" not in words
    assert plan.abi.abi_tag == "cp310-abi3"
