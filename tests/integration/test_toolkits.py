"""Several toolkits and arch sets, fan-out, per-source arch limits and the seed command
`wheelforge build --archs "7.0 8.0 9.0+PTX"` with real nvccs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import copy_kernels, needs_local_torch_wheel, needs_nvcc, wheelforge

pytestmark = needs_nvcc

KERNEL = """\
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""


def tiny_project(root: Path, sources: str, extra: str = "") -> Path:
    """A small CUDA extension: compiles in seconds for any arch set."""
    (root / "pkg" / "tiny").mkdir(parents=True)
    (root / "pkg" / "tiny" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "common.cu").write_text(KERNEL)
    (root / "csrc" / "hopper.cu").write_text(KERNEL.replace("scale", "scale_h"))
    (root / "matrix.yaml").write_text(
        "package: {name: tiny, version: '1.0', packages: [pkg/tiny]}\n"
        f"extension: {{name: tiny._C, sources: {sources}}}\n"
        "torch: '>=2.10'\n" + extra
    )
    return root


@pytest.fixture
def cache(shared_cache: Path) -> Path:
    """The session's cache: CUDA 13.1 is provisioned once, the torch 2.13 environment (of the
    unstable-ABI builds and of `wheelforge test`) made once."""
    return shared_cache


# CUDA 13.1 from PyPI (about 110 MB): two real toolkits, each compiling its own wheels; the
# provisioning itself runs offline in test_provision_index.py, from a package index it builds.
@pytest.mark.network
def test_two_toolkits_two_arch_sets_make_four_distinct_wheels(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(
        tmp_path,
        "[csrc/common.cu]",
        "cuda: ['13.0', '13.1']\narch-sets: {small: '8.0', big: '9.0+PTX'}\n",
    )
    listed = wheelforge("matrix", "--json", "--cache-dir", cache, cwd=root)
    assert listed.code == 0, listed.err
    ids = [v["id"] for v in json.loads(listed.out)["variants"]]
    assert ids == ["small-cu130", "small-cu131", "big-cu130", "big-cu131"]
    github = json.loads(wheelforge("matrix", "--github", "--cache-dir", cache, cwd=root).out)
    assert [job["variant"] for job in github["include"]] == ids

    run = wheelforge("build", "--cache-dir", cache, cwd=root)  # provisions CUDA 13.1 from PyPI
    assert run.code == 0, run.err
    names = sorted(p.name for p in (root / "dist").glob("*.whl"))
    assert len(names) == 4 and len(set(names)) == 4, names
    for vid in ids:
        label = vid.replace("-", ".")
        assert any(n.startswith(f"tiny-1.0+{label}-cp310-abi3-manylinux_") for n in names), (
            vid,
            names,
        )
    assert "CUDA 13.1." in run.err and "CUDA 13.0." in run.err

    only = wheelforge(
        "build", "--only", "big-cu131", "--cache-dir", cache, "--out", tmp_path / "one", cwd=root
    )
    assert only.code == 0, only.err
    [one] = (tmp_path / "one").glob("*.whl")
    assert one.name.startswith("tiny-1.0+big.cu131-")
    inspected = json.loads(wheelforge("inspect", "--json", one, cwd=root).out)
    archs = {e["arch"] for f in inspected["files"] for e in f["fatbins"]}
    assert archs == {"sm_90", "compute_90"}


def test_source_limited_to_9_0a_gets_only_sm_90a(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(
        tmp_path,
        "[csrc/common.cu, {files: csrc/hopper.cu, archs: 9.0a}]",
        "arch-sets: '8.0 9.0+PTX'\n",
    )
    run = wheelforge("build", "--cache-dir", cache, cwd=root)
    assert run.code == 0, run.err
    # auto: the newest toolkit found, which may be one an earlier test provisioned
    [objects] = (root / "build" / "wheelforge").glob("default-cu*/obj/csrc")
    inspected = json.loads(wheelforge("inspect", "--json", objects, cwd=root).out)
    archs = {
        Path(f["path"]).name: sorted({e["arch"] for e in f["fatbins"]}) for f in inspected["files"]
    }
    assert archs == {"common.cu.o": ["compute_90", "sm_80", "sm_90"], "hopper.cu.o": ["sm_90a"]}
    # The wheel carries both; sm_90a is owed too (the shared object owes the archs its nvcc
    # steps compiled for: verify.link_archs), so it is no extra and nothing is missing.
    [row] = [ln for ln in run.out.splitlines() if "sm_90a" in ln]
    assert "ok" in row and "extra" not in run.out and "missing" not in run.out


def test_a_source_limited_below_the_set_runs_there_through_its_ptx(
    tmp_path: Path, cache: Path
) -> None:
    """vLLM's Marlin kernels are limited to 8.0+PTX; in a 9.0a build (TORCH_CUDA_ARCH_LIST=9.0a,
    the GPU machine's) CMake compiles them for 8.0+PTX, whose PTX the driver compiles for the
    H100. They were left out: the extension then lacked them."""
    root = tiny_project(
        tmp_path, "[csrc/common.cu, {files: csrc/hopper.cu, archs: 8.0+PTX}]", "arch-sets: '8.0'\n"
    )
    run = wheelforge("build", "--cache-dir", cache, cwd=root, env={"TORCH_CUDA_ARCH_LIST": "9.0a"})
    assert run.code == 0, run.err
    [objects] = (root / "build" / "wheelforge").glob("*-cu*/obj/csrc")
    inspected = json.loads(wheelforge("inspect", "--json", objects, cwd=root).out)
    archs = {
        Path(f["path"]).name: sorted({e["arch"] for e in f["fatbins"]}) for f in inspected["files"]
    }
    assert archs == {"common.cu.o": ["sm_90a"], "hopper.cu.o": ["compute_80", "sm_80"]}
    assert "missing" not in run.out and "extra" not in run.out


def test_a_source_with_no_arch_in_common_is_left_out(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(
        tmp_path, "[csrc/common.cu, {files: csrc/hopper.cu, archs: 9.0a}]", "arch-sets: '8.0'\n"
    )
    run = wheelforge("build", "--cache-dir", cache, cwd=root)
    assert run.code == 0, run.err
    assert not (
        root / "build" / "wheelforge" / "default-cu130" / "obj" / "csrc" / "hopper.cu.o"
    ).exists()


def test_sm70_on_cuda_13_fails_before_compiling(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(tmp_path, "[csrc/common.cu]", "cuda: ['13.0']\narch-sets: '8.0'\n")
    run = wheelforge("build", "--archs", "7.0 8.0 9.0+PTX", "--cache-dir", cache, cwd=root)
    assert run.code == 2
    assert re.search(r"CUDA 13\.0\.\d+ at \S+ can't build 7\.0 \(sm_70\)", run.err)
    assert "CUDA 12.4 builds it: run 'wheelforge toolkit install 12.4'" in run.err
    assert not (root / "build").exists()


def test_arch_newer_than_the_toolkit_fails_before_compiling(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(tmp_path, "[csrc/common.cu]", "cuda: ['11.8']\narch-sets: '9.0 10.0'\n")
    run = wheelforge("build", "--offline", "--cache-dir", cache, cwd=root)
    assert run.code == 2
    assert "can't build 10.0 (sm_100)" in run.err and re.search(
        r"CUDA 13\.\d+\.\d+ at \S+ builds it", run.err
    )


def test_offline_seed_command_says_how_to_get_a_toolkit(tmp_path: Path, cache: Path) -> None:
    root = tiny_project(tmp_path, "[csrc/common.cu]", "arch-sets: '8.0'\n")
    run = wheelforge(
        "build", "--archs", "7.0 8.0 9.0+PTX", "--offline", "--cache-dir", cache, cwd=root
    )
    assert run.code == 5  # an environment problem: install the toolkit
    assert "needs CUDA 12.4, which is not installed (found: CUDA 13." in run.err
    assert "run 'wheelforge toolkit install 12.4'" in run.err


@pytest.mark.network  # CUDA 11.8 from Debian: about 900 MB on first use
@pytest.mark.skipif(
    shutil.which("apt-get") is None, reason="provisioning CUDA 12.4 needs Debian's apt-get"
)
def test_seed_command_builds_sm70_with_a_provisioned_toolkit(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`wheelforge build --archs "7.0 8.0 9.0+PTX"` on the bundled kernels: CUDA 13 can't build
    sm_70, so wheelforge provisions CUDA 12.4, the newest release that does (into the default
    per-user cache, reused later), or takes another CUDA 12 that builds sm_70 when one is there."""
    root = copy_kernels(tmp_path_factory.mktemp("seed"))
    run = wheelforge("build", "--archs", "7.0 8.0 9.0+PTX", cwd=root)
    assert run.code == 0, run.err
    [wheel] = (root / "dist").glob("*.whl")
    inspected = json.loads(wheelforge("inspect", "--json", wheel, cwd=root).out)
    entries = {(e["kind"], e["arch"]) for f in inspected["files"] for e in f["fatbins"]}
    assert entries == {
        ("sass", "sm_70"),
        ("sass", "sm_80"),
        ("sass", "sm_90"),
        ("ptx", "compute_90"),
    }
    assert re.search(r"compile for 7\.0 8\.0 9\.0\+PTX with CUDA (11\.8|12\.\d+)\.", run.err), (
        run.err
    )


LEGACY_OP = """\
#include <torch/extension.h>
at::Tensor twice(const at::Tensor& x) { return x * 2; }
TORCH_LIBRARY(legacy_ops, m) { m.def("twice(Tensor x) -> Tensor", &twice); }
"""
LEGACY_TEST = """\
import torch
import tiny._C  # noqa: F401


def test_twice():
    assert torch.equal(torch.ops.legacy_ops.twice(torch.arange(3)), torch.tensor([0, 2, 4]))
"""


@pytest.mark.slow  # compiles against a torch 2.13 environment (made once: shared_cache)
@needs_local_torch_wheel
def test_unstable_abi_builds_one_pinned_wheel_per_torch(tmp_path: Path, cache: Path) -> None:
    # No .cu source: one would need a CUDA build of torch (issue 20), gigabytes from PyPI;
    # test_classic.py builds CUDA sources against one.
    root = tiny_project(
        tmp_path,
        "[csrc/legacy.cpp]",
        "abi: unstable\narch-sets: '8.0'\ntests: {path: tests, torch: ['2.13.0']}\n",
    )
    (root / "matrix.yaml").write_text(
        (root / "matrix.yaml").read_text().replace("torch: '>=2.10'", "torch: ['2.13.0']")
    )
    (root / "csrc" / "legacy.cpp").write_text(LEGACY_OP)
    (root / "tests").mkdir()
    (root / "tests" / "test_legacy.py").write_text(LEGACY_TEST)
    listed = json.loads(wheelforge("matrix", "--json", "--cache-dir", cache, cwd=root).out)
    [variant] = listed["variants"]
    assert variant["id"].endswith("-torch213")
    run = wheelforge("build", "--cache-dir", cache, cwd=root)
    assert run.code == 0, run.err
    [wheel] = (root / "dist").glob("*.whl")
    assert re.match(r"tiny-1\.0-cp311-cp311-manylinux_\d+_\d+_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        assert "tiny/_C.cpython-311-x86_64-linux-gnu.so" in zf.namelist()
        assert "Requires-Dist: torch==2.13.*" in zf.read("tiny-1.0.dist-info/METADATA").decode()
    tested = wheelforge("test", "--json", "--cache-dir", cache, cwd=root)
    assert tested.code == 0, tested.err
    [outcome] = json.loads(tested.out)["runs"]
    assert outcome["status"] == "passed" and outcome["passed"] == 1


# Hangs the compile of hold.cpp while the file named by $WF_HOLD exists: a build in progress.
HOLDING_CXX = """\
#!/bin/sh
case "$*" in
  *hold.cpp*) if [ -e "$WF_HOLD" ]; then : > "$WF_HOLD.started"; while [ -e "$WF_HOLD" ]; do sleep 0.1; done; fi ;;
esac
exec "$@"
"""


@pytest.mark.slow  # compiles against a torch 2.13 environment (made once: shared_cache)
@pytest.mark.network  # CUDA 13.1 from PyPI, unless the test above provisioned it this session
@needs_local_torch_wheel
def test_cache_prune_all_skips_the_toolkit_and_env_a_running_build_uses(
    tmp_path: Path, cache: Path
) -> None:
    """A build compiling with a provisioned CUDA 13.1 and a cached torch 2.13 environment (the
    unstable ABI) holds both shared: `cache prune --all`, run meanwhile, skips them and removes
    the rest, and the build completes."""
    # Unstable ABI: the build compiles against a cached torch environment (the one of the
    # tests above: same torch, same test requirements), which it holds while compiling.
    root = tiny_project(
        tmp_path / "project",
        "[csrc/hold.cpp]",  # no .cu: it would need a CUDA build of torch (issue 20)
        "abi: unstable\ncuda: ['13.1']\narch-sets: '8.0'\ntests: {path: tests, torch: ['2.13.0']}\n",
    )
    (root / "matrix.yaml").write_text(
        (root / "matrix.yaml").read_text().replace("torch: '>=2.10'", "torch: ['2.13.0']")
    )
    (root / "tests").mkdir()
    (root / "csrc" / "hold.cpp").write_text("int held() { return 3; }\n")
    stale = cache / "envs" / "torch-2.10.0-0000000000"  # not in use: prune takes it
    stale.mkdir(parents=True, exist_ok=True)
    (stale / "wheelforge-env.json").write_text('{"torch": "2.10.0", "python": "3.11"}')
    launcher, hold = tmp_path / "holdcxx", tmp_path / "hold"
    launcher.write_text(HOLDING_CXX)
    launcher.chmod(0o755)
    hold.touch()
    env = {**os.environ, "CXX": f"{launcher} c++", "WF_HOLD": str(hold)}
    build = subprocess.Popen(
        [sys.executable, "-m", "wheelforge", "build", "--cache-dir", cache], cwd=root, env=env,
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 900  # may provision CUDA 13.1 and torch 2.13 first
        while not Path(f"{hold}.started").exists():
            assert build.poll() is None and time.monotonic() < deadline, build.communicate()
            time.sleep(0.2)
        pruned = wheelforge("cache", "prune", "--all", "--cache-dir", cache, cwd=tmp_path)
    finally:
        hold.unlink()
    _, err = build.communicate(timeout=600)
    assert build.returncode == 0, err
    assert pruned.code == 0, pruned.err
    skipped = [line for line in pruned.out.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 2, pruned.out
    assert any("CUDA 13.1 from pypi" in line for line in skipped), pruned.out
    assert any("torch 2.13.0" in line for line in skipped), pruned.out
    assert (cache / "toolkits").is_dir() and list((cache / "toolkits").glob("*/toolkit.json"))
    # named by the build it holds (issue 20): torch-2.13.0+cpu-<digest>
    assert list((cache / "envs").glob("torch-2.13.0+*/wheelforge-env.json"))
    assert not stale.exists() and "torch-2.10.0-0000000000" in pruned.out


def test_the_release_table_matches_the_nvcc_on_the_path(tmp_path: Path) -> None:
    """The release table's entry for this nvcc (configuration/releases.py) says what the nvcc
    says: its --list-gpu-code, its --list-gpu-arch and the PTX ISA its PTX declares."""
    from wheelforge.configuration import releases
    from wheelforge.configuration.archs import Arch
    from wheelforge.toolchain import toolkits as toolkit

    nvcc = Path(shutil.which("nvcc") or "nvcc")
    found = toolkit.probe_toolkit(nvcc)
    entry = releases.release(found.version)
    if entry is None:
        pytest.skip(f"CUDA {found.release} is not in the release table (a newer nvcc)")
    assert found.sass == entry.sass
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True)
    ptx = {a.sm for c in listed.stdout.split() if (a := Arch.from_code(c)) is not None}
    assert ptx == entry.ptx
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    newest = Arch.from_sm(max(entry.ptx))
    out = tmp_path / "k.ptx"
    subprocess.run([nvcc, "-ptx", f"-arch={newest.ptx}", source, "-o", out], check=True)
    assert re.search(r"^\.version (\S+)$", out.read_text(), re.MULTILINE)[1] == entry.ptx_isa  # type: ignore[index]
