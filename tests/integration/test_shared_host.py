"""Two arch sets of one matrix with real nvcc: each wheel carries its own archs, the C++ and C
objects are compiled once for both in the shared folder (planning/hostshare.py), and a no-op,
an edited C++ source and an edited kernel each bring exactly what they should up to date."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.helpers import needs_nvcc, one_kernel_project, wheelforge

pytestmark = needs_nvcc

TWO_SETS = "arch-sets: '8.0'\n", "arch-sets:\n  a: '8.0'\n  b: '9.0'\n"


def ninja_log(folder: Path) -> list[str]:
    """The outputs of every job in *folder*'s .ninja_log, one per run of it."""
    lines = (folder / ".ninja_log").read_text().splitlines()
    return [ln.split("\t")[3] for ln in lines if not ln.startswith("#")]


def sass_of(wheel: Path, cwd: Path) -> list[str]:
    done = wheelforge("inspect", "--json", wheel, cwd=cwd)
    assert done.code == 0, done.err
    [binary] = json.loads(done.out)["files"]
    return sorted(e["arch"] for e in binary["fatbins"] if e["kind"] == "sass")


@pytest.fixture
def built(tmp_path: Path) -> Path:
    root = one_kernel_project(tmp_path / "p")
    matrix = root / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace(*TWO_SETS))
    done = wheelforge("build", "--compile-cache", "none", cwd=root)
    assert done.code == 0, done.err
    return root


def test_two_arch_sets_share_the_cpp_objects_and_keep_their_archs(built: Path) -> None:
    build = built / "build" / "wheelforge"
    [host] = sorted(build.glob("host-*"))
    variants = sorted(p for p in build.iterdir() if p.is_dir() and p != host)
    assert [v.name for v in variants] == ["a-cu130", "b-cu130"]
    # compiled once, in the shared folder; no variant compiled a C++ or C source
    assert sorted(ninja_log(host)) == ["obj/_C_module_init.c.o", "obj/csrc/ops.cpp.o"]
    for v in variants:
        assert sorted(ninja_log(v)) == ["_C.abi3.so", "obj/csrc/scale.cu.o"]
    # each wheel's binary carries its own arch set, read from its fatbin
    wheels = {w.name.split("+")[1].split(".")[0]: w for w in (built / "dist").glob("*.whl")}
    assert sass_of(wheels["a"], built) == ["sm_80"]
    assert sass_of(wheels["b"], built) == ["sm_90"]


def test_noop_and_edits_rebuild_what_they_should(built: Path) -> None:
    build = built / "build" / "wheelforge"
    [host] = sorted(build.glob("host-*"))
    a, b = build / "a-cu130", build / "b-cu130"
    again = wheelforge("build", "--compile-cache", "none", cwd=built)
    assert again.code == 0 and again.err.count("nothing to compile: up to date") == 2, again.err
    # an edited C++ source: compiled once (the shared folder), both variants relinked, no nvcc
    ops = built / "csrc" / "ops.cpp"
    ops.write_text(ops.read_text() + "int tiny_other() { return 7; }\n")
    libraries = {v: (v / "_C.abi3.so").stat().st_mtime_ns for v in (a, b)}
    edited = wheelforge("build", "--compile-cache", "none", cwd=built)
    assert edited.code == 0, edited.err
    assert ninja_log(host).count("obj/csrc/ops.cpp.o") == 2  # the first build, and this one
    for v in (a, b):
        assert ninja_log(v).count("obj/csrc/scale.cu.o") == 1
        assert ninja_log(v).count("_C.abi3.so") == 2
        assert (v / "_C.abi3.so").stat().st_mtime_ns > libraries[v]
    assert "NVCC" not in edited.err
    # an edited kernel: each variant compiles its own, the shared folder is up to date
    cu = built / "csrc" / "scale.cu"
    cu.write_text(cu.read_text() + "void launch_twice() {}\n")
    kernel = wheelforge("build", "--compile-cache", "none", cwd=built)
    assert kernel.code == 0, kernel.err
    assert ninja_log(host).count("obj/csrc/ops.cpp.o") == 2
    for v in (a, b):
        assert ninja_log(v).count("obj/csrc/scale.cu.o") == 2


def test_a_variant_that_fails_beside_another_is_its_own_failure(tmp_path: Path) -> None:
    """Variants built side by side (build/together.py): the one whose kernel does not
    compile for its arch set fails alone, its error named; the other's wheel is built, and each
    variant's lines come whole, in the matrix's order."""
    root = one_kernel_project(tmp_path / "p")
    matrix = root / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace(*TWO_SETS))
    cu = root / "csrc" / "scale.cu"
    cu.write_text(
        cu.read_text()
        + '#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900\n#error "no sm_90"\n#endif\n'
    )
    done = wheelforge("build", "--compile-cache", "none", "-j", "4", cwd=root)
    assert done.code != 0, done.err
    assert "variant b-cu130: compiling csrc/scale.cu failed" in done.err, done.err
    assert "variant a-cu130" not in done.err.replace("▸ a-cu130", ""), done.err
    wheels = [w.name for w in (root / "dist").glob("*.whl")]
    assert len(wheels) == 1 and "+a." in wheels[0], wheels
    a, b = done.err.index("▸ a-cu130: compile"), done.err.index("▸ b-cu130: compile")
    assert a < done.err.index("▸ a-cu130: pack") < b, done.err
