"""Several extensions in one wheel (issue 19): the matrix's ``extensions`` list, each with its
own sources and flags, compiled by one build.ninja per variant; a library of operators (no
PyInit, loaded with torch.ops.load_library); the size budget of one shared object."""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.binaries import verify
from wheelforge.binaries.facts import BinaryContents, file_role
from wheelforge.binaries.sizecheck import check_size
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.planning import hostshare, ninjafile

from .fakes import DEMO_OPS_HEAD as HEAD
from .fakes import built_contents, plan_for

Project = Callable[..., Path]

THREE = (
    HEAD
    + """\
extensions:
  - name: demo_ops._C
    sources: [csrc/ops.cpp, csrc/kernel.cu]
    include-dirs: [csrc]
  - name: demo_ops.moe._moe_C
    sources: [csrc/kernel.cu, csrc/moe.cu]
    nvcc-flags: [-DMOE_TOPK=8]
    size-budget: 1KiB
  - name: demo_ops.lib._C
    kind: library
    sources: [csrc/ops.cpp]
    include-dirs: [csrc]
"""
)


@pytest.fixture
def three(project: Project, tmp_path: Path) -> Path:
    (tmp_path / "csrc" / "moe.cu").write_text("// moe\n")
    (tmp_path / "demo_ops" / "moe").mkdir()
    (tmp_path / "demo_ops" / "moe" / "__init__.py").write_text("")
    return project(THREE)


def test_extension_is_a_list_of_one(project: Project) -> None:
    matrix = load_matrix(project())
    assert [e.name for e in matrix.extensions] == ["demo_ops._C"]
    assert matrix.extensions[0] is matrix.extension


def test_extensions_read_each_with_its_own_keys(three: Path) -> None:
    matrix = load_matrix(three)
    names = [(e.name, e.kind, e.size_budget) for e in matrix.extensions]
    assert names == [
        ("demo_ops._C", "module", None),
        ("demo_ops.moe._moe_C", "module", 1024),
        ("demo_ops.lib._C", "library", None),
    ]
    assert matrix.extensions[1].nvcc_flags == ("-DMOE_TOPK=8",)


def test_both_keys_are_one_clear_error(project: Project) -> None:
    text = THREE.replace(
        "extensions:", "extension:\n  name: demo_ops._X\n  sources: [csrc/*.cpp]\nextensions:"
    )
    with pytest.raises(ConfigError, match="both 'extension' and 'extensions'"):
        load_matrix(project(text))


def test_neither_key_is_a_pure_python_wheel(project: Project) -> None:
    # kernel-builder's torch-noarch kernels: nothing to compile, one py3-none-any wheel
    assert load_matrix(project(HEAD)).extensions == ()


def test_two_extensions_landing_at_one_path_are_refused(project: Project) -> None:
    text = HEAD + textwrap.dedent(
        """\
        extensions:
          - {name: demo_ops._C, sources: [csrc/ops.cpp]}
          - {name: demo_ops._C, kind: library, sources: [csrc/kernel.cu]}
        """
    )
    with pytest.raises(
        ConfigError, match=r"extensions\[1\]: 'demo_ops._C' lands where extensions\[0\]"
    ):
        load_matrix(project(text))


def test_every_extension_must_lie_in_a_package(project: Project) -> None:
    text = (
        HEAD
        + "extensions:\n  - {name: demo_ops._C, sources: [csrc/ops.cpp]}\n  - {name: other._C, sources: [csrc/kernel.cu]}\n"
    )
    with pytest.raises(ConfigError, match=r"extensions\[1\].name 'other._C' is not inside"):
        load_matrix(project(text))


def test_each_extension_links_its_own_objects_and_shares_identical_compiles(
    three: Path, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(three), tmp_path)
    by_name = {link.extension.name: link for link in plan.links}
    build = plan.build_dir
    c, moe, ops = by_name["demo_ops._C"], by_name["demo_ops.moe._moe_C"], by_name["demo_ops.lib._C"]
    assert c.wheel_path == "demo_ops/_C.abi3.so"
    assert moe.wheel_path == "demo_ops/moe/_moe_C.abi3.so"
    assert ops.wheel_path == "demo_ops/lib/_C.so"  # a library: no ABI suffix, it is no module
    assert ops.role == "library" and file_role(ops.wheel_path) == "library"
    assert c.role == "extension" and file_role(c.wheel_path) == "extension"
    # Objects of different extensions never collide: each has its own folder (in the variant's
    # build folder, or in the shared one of the C++ and C compiles: planning/hostshare.py).
    assert plan.host is not None
    host_dir = plan.host.build_dir

    def within(o: Path, ext: str) -> bool:
        return o.is_relative_to(build / "obj" / ext) or o.is_relative_to(host_dir / "obj" / ext)

    assert all(within(o, "demo_ops._C") for o in c.objects)
    assert all(within(o, "demo_ops.moe._moe_C") for o in moe.objects)
    # kernel.cu with other nvcc flags (-DMOE_TOPK) is compiled twice; ops.cpp with the same C++
    # flags (the same include folders, the same TORCH_EXTENSION_NAME=_C) in demo_ops._C and
    # demo_ops.lib._C is compiled once, linked into both.
    sources = [s.source.name for s in hostshare.all_steps(plan)]
    assert sources.count("kernel.cu") == 2
    assert sources.count("ops.cpp") == 1
    shared = next(s.object for s in hostshare.all_steps(plan) if s.source.name == "ops.cpp")
    assert shared in c.objects and shared in ops.objects
    # The generated PyInit goes into the modules only.
    steps = hostshare.all_steps(plan)
    inits = sorted(s.source.name for s in steps if "module_init" in s.source.name)
    assert inits == ["_C_module_init.c", "_moe_C_module_init.c"]
    assert not any("module_init" in o.name for o in ops.objects)
    # The libraries lie apart in the build folder: the two _C leaves are in two packages.
    assert len({link.library for link in plan.links}) == 3
    assert len({link.export_map for link in plan.links}) == 3


def test_each_extension_has_its_own_flags(three: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(three), tmp_path)
    first, moe, _ops = (shlex.split(f.nvcc) for f in plan.compile.flag_sets)
    assert "-DTORCH_EXTENSION_NAME=_C" in first and "-DMOE_TOPK=8" not in first
    assert "-DTORCH_EXTENSION_NAME=_moe_C" in moe and "-DMOE_TOPK=8" in moe
    assert "-I../../csrc" in first and "-I../../csrc" not in moe


def test_a_library_exports_nothing_and_a_module_its_pyinit(three: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(three), tmp_path)
    scripts = {g.path: g.text for g in plan.compile.generated}
    c, _moe, ops = plan.links
    assert "PyInit__C;" in scripts[c.export_map]
    assert "global" not in scripts[ops.export_map] and "local:\n    *;" in scripts[ops.export_map]
    assert f"-Wl,--version-script={ops.export_map}" in shlex.split(ops.ldflags)


def test_one_ninja_file_compiles_and_links_them_all(three: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(three), tmp_path)
    text = ninjafile.render(plan)
    assert "ext1_nvcc_flags = " in text and "ext2_cxx_flags = " in text
    assert "  nvcc_flags = $ext1_nvcc_flags" in text  # _moe_C's kernel.cu takes its own flags
    for link in plan.links:
        assert f"build {plan.command_path(link.library)}: link " in text
    assert "  ldflags = $ext2_ldflags" in text
    default = next(line for line in text.splitlines() if line.startswith("default "))
    assert default.count(".so") == 3


def test_the_wheel_carries_every_shared_object(three: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(three), tmp_path)
    names = [name for name, _ in built_contents(plan).files]
    assert {"demo_ops/_C.abi3.so", "demo_ops/moe/_moe_C.abi3.so", "demo_ops/lib/_C.so"} <= set(
        names
    )


def test_one_shared_object_over_its_own_budget() -> None:
    binaries = [
        BinaryContents(path="w.whl!demo_ops/_C.abi3.so", size=900, entries=()),
        BinaryContents(path="w.whl!demo_ops/moe/_moe_C.abi3.so", size=2048, entries=()),
    ]
    size = check_size(
        wheel_size=3000,
        budget=10_000,
        binaries=binaries,
        toolkit=(13, 0),
        nvcc_flags=[],
        budgets={"demo_ops/_C.abi3.so": 1024, "demo_ops/moe/_moe_C.abi3.so": 1024},
    )
    assert not size.over  # the wheel is within its budget
    assert [s.binary for s in size.over_shared] == ["w.whl!demo_ops/moe/_moe_C.abi3.so"]
    assert [s.over for s in size.shared_objects] == [False, True]


def test_one_extension_keeps_the_layout_it_had(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    [link] = plan.links
    assert link.library == plan.build_dir / "_C.abi3.so"
    assert link.export_map == plan.build_dir / "gen" / "exports.map"
    assert plan.host is not None
    folders = (plan.build_dir, plan.host.build_dir)
    assert all(any(o.parent.is_relative_to(f / "obj") for f in folders) for o in link.objects)
    assert not any(f / "obj" / "demo_ops._C" in o.parents for o in link.objects for f in folders)
    text = ninjafile.render(plan)
    assert "ext1_" not in text


def test_a_library_with_module_init_is_refused(three: Path) -> None:
    text = three.read_text().replace(
        "    kind: library\n", "    kind: library\n    module-init: true\n"
    )
    three.write_text(text)
    with pytest.raises(ConfigError, match=r"extensions\[2\].module-init: a library"):
        load_matrix(three)


def test_each_extension_compiles_for_its_own_archs_and_owes_only_those(
    project: Project, tmp_path: Path
) -> None:
    """extensions[].archs (issue 32): two shared objects of one wheel built for different archs,
    as a setup.py whose extensions pass different -gencode flags builds them; a source's own
    archs still win, and verification owes each .so what its nvcc steps compiled for."""
    (tmp_path / "csrc" / "hopper.cu").write_text("// hopper\n")
    text = (
        HEAD.replace('"8.0 9.0+PTX"', '"8.0 9.0a+PTX"')
        + """\
extensions:
  - name: demo_ops._C
    sources: [csrc/ops.cpp, csrc/kernel.cu]
    archs: "8.0"
  - name: demo_ops._hopper
    sources: [csrc/kernel.cu, {files: csrc/hopper.cu, archs: 9.0a}]
    archs: 9.0a+PTX
"""
    )
    matrix = load_matrix(project(text))
    assert [str(e.archs[0]) if e.archs else None for e in matrix.extensions] == ["8.0", "9.0a+PTX"]
    plan = plan_for(matrix, tmp_path, archs="8.0 9.0a+PTX")
    nvcc = [s for s in plan.compile.steps if s.rule == "nvcc"]
    assert sorted(str(s.arch_set) for s in nvcc) == ["8.0", "9.0a", "9.0a+PTX"]
    c, hopper = plan.links
    assert str(verify.link_archs(plan, c)) == "8.0"
    assert str(verify.link_archs(plan, hopper)) == "9.0a+PTX"
    only_80 = BinaryContents(path=f"w.whl!{c.wheel_path}", size=1, entries=())
    with pytest.raises(VerificationError, match="lacks SASS sm_80 asked for by arch set"):
        verify.verify_binaries([only_80], plan)


def test_an_extensions_archs_must_be_an_arch_list(project: Project) -> None:
    bad = HEAD + "extension:\n  name: demo_ops._C\n  sources: [csrc/*.cu]\n  archs: sm_80\n"
    with pytest.raises(ConfigError, match=r"extension\.archs"):
        load_matrix(project(bad))
