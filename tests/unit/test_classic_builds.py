"""Classic (unstable-ABI) extensions as torch's cpp_extension builds them (issue 20): the C++
standard of the torch they compile against, the torch environment's CUDA headers, a CUDA build
of torch for .cu sources, torch's CUDA major matched by the variant's nvcc, and no pip where
an installed torch is named or --offline is given."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Flags, resolve
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.packaging import provenance, sbom
from wheelforge.planning import buildtorch, reproducible, variants
from wheelforge.planning.planner import make_plan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain import envs
from wheelforge.toolchain.choice import ToolkitChoice
from wheelforge.toolchain.torchprobe import TorchEnv

from . import fakes
from .conftest import GOOD_MATRIX

Project = Callable[[str], Path]
CLASSIC = GOOD_MATRIX.replace('torch: ">=2.10"', "abi: unstable\ntorch: ['2.10.0', '2.14.1']")


def _cuda_torch(tmp: Path, version: str, cuda: str, cxx_std: int) -> TorchEnv:
    site = tmp / f"site-{version}"
    return dataclasses.replace(
        fakes.torch_env(tmp, version),
        local="cu" + cuda.replace(".", ""),
        cuda=cuda,
        cxx_std=cxx_std,
        cuda_include_dirs=(site / "nvidia" / "cu13" / "include",),
    )


def _variant(tk_version: str, torch: str, tk: object = None) -> Variant:
    tk = fakes.toolkit(tk_version)
    arch_set = ArchSet("default", parse_arch_list("8.0", source="t"))
    return Variant(id=f"default-{tk.short}-torch{torch.replace('.', '')[:3]}", arch_set=arch_set,
                   choice=ToolkitChoice(toolkit=tk, recipe=None), local_label=None, torch=torch)  # fmt: skip


def test_the_standard_and_cuda_headers_come_from_the_torch_compiled_against(
    project: Project, tmp_path: Path
) -> None:
    matrix = load_matrix(project(CLASSIC))
    torch = _cuda_torch(tmp_path, "2.14.1", "13.0", 20)
    plan = make_plan(fakes.plan_inputs(matrix, tmp_path), _variant("13.0.88", "2.14.1"), torch,
                     weak_header="", nvcc_host="/usr/bin/g++")  # fmt: skip
    cxx, nvcc = (
        shlex.split(plan.compile.flag_sets[0].cxx),
        shlex.split(plan.compile.flag_sets[0].nvcc),
    )
    # torch 2.14's headers #error below C++20; its cpp_extension passes -std=c++20
    assert cxx[0] == "-std=c++20" and nvcc[0] == "-std=c++20" and "-std=c++17" not in cxx + nvcc
    for flags in (cxx, nvcc):
        # -isystem: after the toolkit's own headers (-I), so its cuda_runtime.h wins
        at = flags.index("-isystem")
        assert flags[at + 1].endswith("site-2.14.1/nvidia/cu13/include")
    # The stable ABI keeps C++17 and adds no torch-environment headers.
    stable = fakes.plan_for(load_matrix(project()), tmp_path)
    assert shlex.split(stable.compile.flag_sets[0].cxx)[0] == "-std=c++17"
    assert "-isystem" not in stable.compile.flag_sets[0].cxx


def test_a_standard_the_matrix_names_wins(project: Project, tmp_path: Path) -> None:
    text = CLASSIC.replace("  include-dirs: [csrc]\n", "  include-dirs: [csrc]\n  cxx-flags: [-std=c++23]\n  nvcc-flags: [-std=c++20]\n")  # fmt: skip
    plan = make_plan(fakes.plan_inputs(load_matrix(project(text)), tmp_path), _variant("13.0.88", "2.14.1"),
                     _cuda_torch(tmp_path, "2.14.1", "13.0", 20), weak_header="", nvcc_host="g++")  # fmt: skip
    assert shlex.split(plan.compile.flag_sets[0].cxx).count("-std=c++23") == 1
    assert [f for f in shlex.split(plan.compile.flag_sets[0].cxx) if f.startswith("-std=")] == [
        "-std=c++23"
    ]
    assert [f for f in shlex.split(plan.compile.flag_sets[0].nvcc) if f.startswith("-std=")] == [
        "-std=c++20"
    ]


def test_each_torch_is_built_with_the_release_of_its_cuda_major(tmp_path: Path) -> None:
    """cuda: ["12.4", "13.0"] × torch 2.10 (CUDA 12.8) and 2.14.1 (CUDA 13.0): two wheels, not
    four; a torch no listed release matches is refused, as cpp_extension refuses it."""
    chosen = [_variant(c, t) for t in ("2.10.0", "2.14.1") for c in ("12.4.131", "13.0.88")]
    probed = {
        ("2.10.0", None): _cuda_torch(tmp_path, "2.10.0", "12.8", 17),
        ("2.14.1", None): _cuda_torch(tmp_path, "2.14.1", "13.0", 20),
    }
    kept = buildtorch.pairs(chosen, probed)
    assert [(v.toolkit.release, v.torch) for v in kept] == [("12.4", "2.10.0"), ("13.0", "2.14.1")]
    with pytest.raises(
        EnvironmentProblem,
        match=r"torch 2\.10\.0\+cu128 was built with CUDA 12\.8, but its nvcc is CUDA 13\.0 \(another major\)",
    ):
        buildtorch.pairs([_variant("13.0.88", "2.10.0")], probed)
    cpu = {("2.10.0", None): fakes.torch_env(tmp_path, "2.10.0")}  # a CPU torch: no CUDA to match
    assert buildtorch.pairs([_variant("13.0.88", "2.10.0")], cpu)


def test_offline_or_without_an_index_the_build_names_the_installed_torch_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(
        EnvironmentProblem,
        match=r"not in the cache .*--offline runs no pip; .*--torch-from PY, or torch: installed",
    ):
        buildtorch.environment_torch("2.11.0", python=Path("/usr/bin/python3"), requires=(), cache=tmp_path, cuda=True, offline=True)  # fmt: skip

    def unavailable(spec: envs.EnvSpec, cache: Path) -> envs.TestEnv:
        raise envs.TorchUnavailable(
            "torch 2.11.0 can't be installed here: pip found no matching distribution"
        )

    monkeypatch.setattr(envs, "ensure_env", unavailable)
    with pytest.raises(
        EnvironmentProblem,
        match=r"no matching distribution \(is a package index reachable\?\); build against an installed torch: --torch-from PY",
    ):
        buildtorch.environment_torch(
            "2.11.0", python=Path("/usr/bin/python3"), requires=(), cache=tmp_path
        )


def test_an_installed_torch_makes_the_torch_dimension(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """--torch-from PY: one variant per arch set and release, for PY's torch, compiled against
    PY itself (no environment, no pip); a CPU build there is refused for .cu sources."""
    path = project(CLASSIC)
    py = Path("/opt/torch/.venv/bin/python3")
    listed = variants.expand(load_matrix(path), [fakes.toolkit()], installed=("2.11.0", py))
    assert [(v.id, v.torch, v.torch_from) for v in listed] == [
        ("default-cu130-torch211", "2.11.0", py)
    ]
    settings = resolve(Flags(matrix=path))
    monkeypatch.setattr(buildtorch.torchprobe, "probe_torch", lambda python, **k: fakes.torch_env(tmp_path, "2.11.0"))  # fmt: skip
    monkeypatch.setattr(envs, "ensure_env", lambda *a: pytest.fail("no environment for an installed torch"))  # fmt: skip
    with pytest.raises(
        EnvironmentProblem,
        match=r"the torch of /opt/torch/.venv/bin/python3 is 2\.11\.0\+cpu, a CPU build",
    ):
        buildtorch.build_torch(listed[0], settings, early=False)


def test_an_installed_torch_leaves_out_the_other_major_before_provisioning(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200's case: torch 2.11.0+cu130 installed, cuda: ["12.4", "13.0"], --offline: the
    12.4 variant is dropped while 12.4 is still a recipe, so nothing asks to provision it."""
    from wheelforge.build import prepare

    text = (
        CLASSIC.replace("torch: ['2.10.0', '2.14.1']", "torch: installed")
        + 'cuda: ["12.4", "13.0"]\n'
    )
    settings = resolve(Flags(matrix=project(text), offline=True))
    torch = dataclasses.replace(_cuda_torch(tmp_path, "2.11.0", "13.0", 17), python=settings.python)
    monkeypatch.setattr(prepare.torchprobe, "probe_torch", lambda python, **k: torch)
    [only] = prepare.selected(settings, [fakes.toolkit()])
    assert (only.id, only.choice.release, only.torch_from) == (
        "default-cu130-torch211",
        "13.0",
        settings.python,
    )


def test_the_torch_environments_cuda_headers_have_a_path_free_name(
    project: Project, tmp_path: Path
) -> None:
    """pip's CUDA headers beside a CUDA torch (site-packages/nvidia/cu13/include) are an input
    folder of their own: mapped in the binaries and named "nvidia" in the build info's flags and
    inputs list. Without it the user's cache path (…/envs/torch-2.12.0+cu130-…/) was in
    grouped_gemm's wheelforge-build.json (15 times) and in its inputs digest."""
    matrix = load_matrix(project(CLASSIC))
    torch = _cuda_torch(tmp_path, "2.14.1", "13.0", 20)
    plan = make_plan(fakes.plan_inputs(matrix, tmp_path), _variant("13.0.88", "2.14.1"), torch,
                     weak_header="", nvcc_host="/usr/bin/g++")  # fmt: skip
    nvidia = tmp_path / "site-2.14.1" / "nvidia"
    assert (nvidia, "nvidia") in plan.compile.input_folders
    maps = [f for f in shlex.split(plan.compile.flag_sets[0].cxx) if "-ffile-prefix-map=" in f]
    assert any(m.endswith("site-2.14.1/nvidia=nvidia") for m in maps), maps
    free = provenance._path_free(plan)(plan.compile.flag_sets[0].nvcc)  # as build info has it
    assert "-isystem nvidia/cu13/include" in free and "site-2.14.1" not in free, free
    name = reproducible.path_namer(plan.compile.input_folders)
    assert name(nvidia / "cu13" / "include" / "cusparse.h") == "nvidia/cu13/include/cusparse.h"
    # …and the SBOM does not take them for the project's own files.
    own = sbom._project_files({"nvidia/cu13/include/cusparse.h": "0" * 64, "csrc/ops.cu": "1" * 64})
    assert [c.name for c in own] == ["csrc/ops.cu"]
