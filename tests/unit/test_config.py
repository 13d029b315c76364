from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.settings import Flags, resolve
from wheelforge.foundation.errors import ConfigError

Project = Callable[..., Path]
ENV = {"PATH": "/usr/bin:/bin"}


def test_matrix_archs_by_default(project: Project) -> None:
    s = resolve(Flags(matrix=project()), ENV)
    assert [str(a) for a in s.matrix.arch_sets] == ["8.0 9.0+PTX"]
    assert s.arch_source.endswith("matrix.yaml")
    assert s.out_dir == project().parent.resolve() / "dist"
    assert s.jobs is None and s.nvcc_threads is None


def test_env_overrides_matrix_and_flag_overrides_env(project: Project) -> None:
    env = {**ENV, "TORCH_CUDA_ARCH_LIST": "7.5;8.6"}
    s = resolve(Flags(matrix=project()), env)
    assert s.arch_source == "TORCH_CUDA_ARCH_LIST"
    assert [(a.name, str(a)) for a in s.matrix.arch_sets] == [("sm75-86", "7.5 8.6")]
    s = resolve(Flags(matrix=project(), archs="9.0a 7.5 10.0f+PTX"), env)
    assert s.arch_source == "--archs"
    assert [(a.name, str(a)) for a in s.matrix.arch_sets] == [
        ("sm75-90a-100fptx", "7.5 9.0a 10.0f+PTX")
    ]


def test_bad_env_arch_list_names_the_variable(project: Project) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^TORCH_CUDA_ARCH_LIST: 'sm_80' is not a CUDA arch; did you mean '8.0'\?",
    ):
        resolve(Flags(matrix=project()), {**ENV, "TORCH_CUDA_ARCH_LIST": "sm_80"})


def test_jobs_precedence_and_validation(project: Project) -> None:
    assert resolve(Flags(matrix=project()), {**ENV, "MAX_JOBS": "3"}).jobs == 3
    assert resolve(Flags(matrix=project(), jobs=5), {**ENV, "MAX_JOBS": "3"}).jobs == 5
    assert resolve(Flags(matrix=project()), {**ENV, "NVCC_THREADS": "2"}).nvcc_threads == 2
    with pytest.raises(ConfigError, match="MAX_JOBS='many' must be a positive whole number"):
        resolve(Flags(matrix=project()), {**ENV, "MAX_JOBS": "many"})
    with pytest.raises(ConfigError, match="NVCC_THREADS='0'"):
        resolve(Flags(matrix=project()), {**ENV, "NVCC_THREADS": "0"})


def test_missing_compiler(project: Project) -> None:
    with pytest.raises(
        ConfigError, match="the C/C\\+\\+ compiler 'no-such-cxx' \\(\\$CXX\\) was not found"
    ):
        resolve(Flags(matrix=project()), {**ENV, "CXX": "no-such-cxx"})
