"""init's --archs reaches CMake's configure (issue 40 item 4): torch's CMake files read
TORCH_CUDA_ARCH_LIST, a project's own CUDA targets CMAKE_CUDA_ARCHITECTURES; without it they
compile for CMake's default arch, and the compile commands init reads say so."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from wheelforge.adoption import adopt as init
from wheelforge.configuration.archs import parse_arch_list

PROJECT = """\
cmake_minimum_required(VERSION 3.18)
project(plain LANGUAGES CXX CUDA)
add_library(_plain MODULE csrc/k.cu csrc/module.cpp)
set_target_properties(_plain PROPERTIES PREFIX "")
"""


@pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("cmake") is None, reason="needs nvcc and cmake"
)
@pytest.mark.parametrize(("archs", "expected"), [("9.0", "9.0"), ("8.0 9.0a+PTX", "8.0 9.0a+PTX")])
def test_archs_become_cmake_cuda_architectures(tmp_path: Path, archs: str, expected: str) -> None:
    for name, text in {
        "CMakeLists.txt": PROJECT,
        "csrc/k.cu": "__global__ void k() {}\n",
        "csrc/module.cpp": "// module\n",
        "plain/__init__.py": "",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    request = init.InitRequest(root=tmp_path, python=Path(sys.executable), archs=archs)
    build = init.capture(request, "cmake", {})
    [ext] = build.extensions
    assert ext.archs == parse_arch_list(expected, source="test")
