"""What a plan is made from (planning/plan.PlanInputs): the threads, the launchers and the twin's
folders are decided by planning, never patched into a plan afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Launchers
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import make_plan
from wheelforge.toolchain.compilecache import CompileCache, Dist

from .fakes import plan_for, plan_inputs

Project = Callable[..., Path]


def _plan(inputs: PlanInputs, like: VariantPlan) -> VariantPlan:
    return make_plan(inputs, like.variant, like.torch, weak_header="", nvcc_host="g++")


def test_nvcc_threads_fill_the_cores_unless_given(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(project())
    like = plan_for(matrix, tmp_path)  # one .cu file, 8.0 and 9.0+PTX: two archs
    sixteen = dataclasses.replace(plan_inputs(matrix, tmp_path), cores=16)
    assert _plan(sixteen, like).compile.nvcc_threads == 3  # two archs and the host side
    threads = dataclasses.replace(sixteen.settings, nvcc_threads=5)  # NVCC_THREADS
    given = dataclasses.replace(sixteen, settings=threads)
    assert _plan(given, like).compile.nvcc_threads == 5


def test_launchers_come_from_the_environment_else_the_compile_cache(
    project: Project, tmp_path: Path
) -> None:
    matrix = load_matrix(project())
    like = plan_for(matrix, tmp_path)
    inputs = plan_inputs(matrix, tmp_path)
    sccache = CompileCache(tool="sccache", exe=Path("/bin/sccache"), base=tmp_path)
    cached = _plan(dataclasses.replace(inputs, compile_cache=sccache), like).compile
    # nvcc runs through sccache too, which splits it into its steps (issue 22)
    launch = ("/bin/sccache",)
    assert cached.launchers == Launchers(cxx=launch, cc=launch, cuda=launch)
    assert cached.compile_cache == sccache
    nvcc = cached.flag_sets[0].nvcc
    assert "--objdir-as-tempdir" not in nvcc  # sccache names the temporaries
    assert f"-ffile-prefix-map={matrix.root.resolve()}=." in nvcc
    assert nvcc.endswith(f"--threads {cached.nvcc_threads}")  # sccache drops the env's
    compilers = dataclasses.replace(inputs.settings.compilers, launchers=Launchers(cxx=("distcc",)))
    settings = dataclasses.replace(inputs.settings, compilers=compilers)
    named = dataclasses.replace(inputs, compile_cache=sccache, settings=settings)
    assert _plan(named, like).compile.launchers.cxx == ("distcc",)


def test_the_twin_is_planned_elsewhere_without_cache_or_launcher(
    project: Project, tmp_path: Path
) -> None:
    matrix = load_matrix(project())
    like = plan_for(matrix, tmp_path)
    ccache = CompileCache(tool="ccache", exe=Path("/bin/ccache"), base=tmp_path)
    given = plan_inputs(matrix, tmp_path)
    compilers = dataclasses.replace(given.settings.compilers, launchers=Launchers(cuda=("ccache",)))
    inputs = dataclasses.replace(
        given,
        compile_cache=ccache,
        settings=dataclasses.replace(given.settings, compilers=compilers),
    )
    twin = _plan(inputs.twin(tmp_path / "twin"), like)
    assert twin.compile.launchers == Launchers() and twin.compile.compile_cache is None
    assert twin.build_dir == (tmp_path / "twin" / "build" / like.variant.id).resolve()
    assert twin.out_dir == tmp_path / "twin" / "dist"
    # What the wheel is stays the first build's (paths differ: the twin's folder is another):
    # the same members, each shared object the twin's own build's.
    first = _plan(inputs, like)
    assert twin.compile.gencode == first.compile.gencode
    assert dataclasses.replace(twin.wheel, members=()) == dataclasses.replace(
        first.wheel, members=()
    )
    assert [(m.path, m.kind) for m in twin.wheel.members] == [
        (m.path, m.kind) for m in first.wheel.members
    ]
    assert [m for m in twin.wheel.members if m.kind != "binary"] == [
        m for m in first.wheel.members if m.kind != "binary"
    ]
    assert {m.source for m in twin.wheel.members if m.kind == "binary"} == {twin.links[0].library}
    assert twin.abi.abi_tag == first.abi.abi_tag


def test_an_sccache_twin_compiles_through_a_cache_of_its_own(
    project: Project, tmp_path: Path
) -> None:
    matrix = load_matrix(project())
    like = plan_for(matrix, tmp_path)
    dist = Dist(scheduler="http://127.0.0.1:10600", token="secret")
    sccache = CompileCache(tool="sccache", exe=Path("/bin/sccache"), base=tmp_path, dist=dist)
    inputs = dataclasses.replace(plan_inputs(matrix, tmp_path), compile_cache=sccache)
    twin = _plan(inputs.twin(tmp_path / "twin"), like)
    # The same split of nvcc (the same bytes), but nothing but its own compiles can answer it.
    assert twin.compile.compile_cache == dataclasses.replace(
        sccache, private=tmp_path / "twin" / "sccache", dist=None
    )
    assert twin.compile.launchers.cuda == ("/bin/sccache",)
    assert "secret" not in repr(sccache)
