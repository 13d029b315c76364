"""nvcc's steps shared between arch sets, with real nvcc (planning/devshare.py): arch sets "8.0"
and "8.0 9.0" compile sm_80 and the kernel's host side once, each wheel carries its own archs,
and each arch set built alone in another folder gives the matrix's wheel, byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from tests.integration.helpers import needs_nvcc, one_kernel_project, wheelforge
from wheelforge.planning import devshare

pytestmark = needs_nvcc

SETS = "arch-sets:\n  a: '8.0'\n  b: '8.0 9.0'\n"
CCCL = "  nvcc-flags: [" + ", ".join(devshare.CCCL_OFF) + "]\n"


def project(root: Path) -> Path:
    one_kernel_project(root)
    matrix = root / "matrix.yaml"
    text = matrix.read_text().replace("arch-sets: '8.0'\n", SETS)
    extension = "extension: {name: tiny._C, sources: [csrc/*.cpp, csrc/*.cu]}\n"
    shared = "extension:\n  name: tiny._C\n  sources: [csrc/*.cpp, csrc/*.cu]\n" + CCCL
    matrix.write_text(text.replace(extension, shared))
    return root


def wheels(root: Path) -> dict[str, str]:
    return {
        w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in (root / "dist").glob("*.whl")
    }


def sass_of(wheel: Path, cwd: Path) -> list[str]:
    done = wheelforge("inspect", "--json", wheel, cwd=cwd)
    assert done.code == 0, done.err
    [binary] = json.loads(done.out)["files"]
    return sorted(e["arch"] for e in binary["fatbins"] if e["kind"] == "sass")


def test_each_arch_once_and_each_arch_set_alone_the_same_wheel(tmp_path: Path) -> None:
    root = project(tmp_path / "matrix")
    report = tmp_path / "report.json"
    done = wheelforge("build", "--compile-cache", "none", "--report", report, cwd=root)
    assert done.code == 0, done.err
    [shared] = sorted((root / "build" / "wheelforge").glob("host-*"))
    log = [
        ln.split("\t")[3]
        for ln in (shared / ".ninja_log").read_text().splitlines()
        if not ln.startswith("#")
    ]
    cu = [o for o in log if "scale.cu" in o]
    # sm_80 once for both arch sets, sm_90 once, the host object once
    assert sorted(cu) == [
        "dev/obj/csrc/scale.cu.sm_80.cubin",
        "dev/obj/csrc/scale.cu.sm_90.cubin",
        "obj/csrc/scale.cu.o",
    ]
    for variant in json.loads(report.read_text())["variants"]:
        assert variant["compile"]["device_share"]["on"] is True
    built = wheels(root)
    by_set = {name.split("+")[1].split(".")[0]: root / "dist" / name for name in built}
    assert sass_of(by_set["a"], root) == ["sm_80"]
    assert sass_of(by_set["b"], root) == ["sm_80", "sm_90"]
    for name in ("a", "b"):  # each alone, in a folder of its own
        alone = project(tmp_path / f"alone-{name}")
        one = wheelforge("build", "--compile-cache", "none", "--only", f"{name}-cu130", cwd=alone)
        assert one.code == 0, one.err
        [(wheel, sha)] = wheels(alone).items()
        assert built[wheel] == sha, wheel
    shutil.rmtree(tmp_path / "alone-a")
    # a new kernel: only the first arch set rebuilt, then both, each from the source's stub
    cu = root / "csrc" / "scale.cu"
    cu.write_text(cu.read_text() + "__global__ void twice(float* x) { x[0] *= 2; }\n")
    first = wheelforge("build", "--compile-cache", "none", "--only", "b-cu130", cwd=root)
    assert first.code == 0, first.err
    again = wheelforge("build", "--compile-cache", "none", cwd=root)
    assert again.code == 0, again.err
    assert all(built[w] != sha for w, sha in wheels(root).items())


def test_host_code_that_reads_the_arch_list_is_refused(tmp_path: Path) -> None:
    """CUB's dispatch picks its policies from __CUDA_ARCH_LIST__: a host object made for one
    list would launch kernels the fatbin of another does not hold."""
    root = project(tmp_path / "p")
    (root / "csrc" / "red.cu").write_text(
        "#include <cub/device/device_reduce.cuh>\n"
        "void reduce(const float* in, float* out, int n, void* tmp, size_t bytes) {\n"
        "  cub::DeviceReduce::Sum(tmp, bytes, in, out, n);\n}\n"
    )
    done = wheelforge("build", "--compile-cache", "none", "--only", "a-cu130", cwd=root)
    assert done.code != 0
    assert "csrc/red.cu: its host code reads __CUDA_ARCH_LIST__" in done.err, done.err
    way_out = {"WHEELFORGE_SPLIT_COMPILE": "1"}
    again = wheelforge(
        "build", "--compile-cache", "none", "--only", "a-cu130", cwd=root, env=way_out
    )
    assert again.code == 0, again.err


def test_dry_run_says_why_not_without_the_cccl_defines(tmp_path: Path) -> None:
    root = one_kernel_project(tmp_path / "p")
    done = wheelforge("build", "--dry-run", cwd=root)
    assert done.code == 0, done.err
    assert "nvcc's steps: off: one arch set: nothing for nvcc's steps to share" in done.out
    matrix = root / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace("arch-sets: '8.0'\n", SETS))
    done = wheelforge("build", "--dry-run", cwd=root)
    assert done.code == 0, done.err
    assert (
        "nvcc's steps: off: tiny._C's nvcc-flags leave CCCL's arch-list namespaces on" in done.out
    )
    shared = project(tmp_path / "q")
    on = wheelforge("build", "--dry-run", cwd=shared)
    assert on.code == 0 and "nvcc's steps: on: each (source, arch)" in on.out, on.out
    assert "nvccsplit device" in on.out and "nvccsplit fatbin" in on.out
