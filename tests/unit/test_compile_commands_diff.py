"""tools/compile_commands_diff.py: CMake's compile command and wheelforge's of one source read
the same way (plumbing and paths aside), and every difference is a row."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tests import REPO

_SPEC = importlib.util.spec_from_file_location(
    "compile_commands_diff", REPO / "tools" / "compile_commands_diff.py"
)
assert _SPEC is not None and _SPEC.loader is not None
diff = importlib.util.module_from_spec(_SPEC)
sys.modules["compile_commands_diff"] = diff  # dataclasses look their module up
_SPEC.loader.exec_module(diff)


def test_the_same_compile_written_by_cmake_and_by_wheelforge_has_no_difference(
    tmp_path: Path,
) -> None:
    (tmp_path / "csrc").mkdir()
    cmake = {
        "directory": str(tmp_path / "build"),
        "file": str(tmp_path / "csrc" / "k.cu"),
        "command": f"/usr/bin/nvcc -forward-unknown-to-host-compiler -DX=0x0AULL -I{tmp_path}/csrc "
        "--use_fast_math -O3 --generate-code=arch=compute_80,code=[compute_80,sm_80] "
        f"-Xcompiler=-fPIC -std=c++17 -MD -MT k.o -MF k.o.d -x cu -c {tmp_path}/csrc/k.cu -o k.o",
    }
    ours = {
        "directory": str(tmp_path / "wf"),
        "file": "../csrc/k.cu",
        "command": "cd / && LD_PRELOAD=/x.so /opt/nvcc --generate-dependencies-with-compile "
        "--dependency-output k.o.d -std=c++17 -O3 -ccbin=g++ --objdir-as-tempdir "
        "-Xcompiler=-fPIC -Xcompiler=-ffile-prefix-map=/p=. -DX=10 -I../csrc --use_fast_math "
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_80,code=compute_80 "
        "--frandom-seed=csrc/k.cu -c ../csrc/k.cu -o k.o",
    }
    a, b = diff._compile(cmake, tmp_path), diff._compile(ours, tmp_path)
    assert a == b
    assert a.codes == {"sm_80", "compute_80"} and a.includes == ("csrc",)
    assert diff.differences({"csrc/k.cu": a}, {"csrc/k.cu": b}) == []


def test_each_difference_is_a_row(tmp_path: Path) -> None:
    one = diff.Compile(frozenset({"-DA"}), frozenset({"-O3"}), ("csrc",), frozenset({"sm_80"}))
    two = diff.Compile(frozenset(), frozenset({"-O2"}), ("csrc", "x"), frozenset({"sm_90"}))
    rows = diff.differences({"a.cu": one, "b.cu": one}, {"a.cu": two, "c.cu": one})
    assert ("a.cu", "flag", "-O3", "-O2") in rows
    assert ("a.cu", "define", "-DA", "") in rows
    assert ("a.cu", "include", "", "x") in rows
    assert ("a.cu", "archs", "sm_80", "sm_90") in rows
    assert ("b.cu", "source", "compiled", "") in rows
    assert ("c.cu", "source", "", "compiled") in rows
