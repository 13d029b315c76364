"""``wheelforge check`` decides as the dynamic linker and pip do (issue 38), on released wheels
nobody here wrote, and ``--torch-from`` confirms by loading.

Released wheels main failed with exit 4 though they load (the gallery loaded each under the torch
it requires): torchvision 0.29.1 (unversioned dlopen/dlsym under manylinux_2_28), cuda-bindings
13.0.3 (the same, no torch), torch-tensorrt 2.14.0 (``torch>=2.14.0,<2.15.0``: a pin). And what
main missed: cuequivariance-ops-torch-cu12 0.13.0 needs libnvrtc.so.12 and requires
``torch>=2.11``, whose PyPI builds are CUDA 13 (importing it beside torch 2.14.0+cu130 fails:
"libnvrtc.so.12: cannot open shared object file"). The smallest wheels that show each."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import only_wheel, wheelforge
from tests.unit.fakes import with_record

ABI = Path(__file__).resolve().parents[1] / "data" / "abicheck"
_OFFLINE = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
            "Network is unreachable")  # fmt: skip


def download(dest: Path, requirement: str) -> Path:
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--python-version", "3.12",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
            "-d", str(dest), requirement]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        if any(marker in output for marker in _OFFLINE):
            pytest.skip(f"{requirement} can't be downloaded here (offline?)")
        pytest.fail(f"pip download {requirement} failed:\n{output[-3000:]}")
    return only_wheel(dest)


@pytest.mark.network
@pytest.mark.parametrize(
    "requirement",
    ["torchvision==0.29.1", "cuda-bindings==13.0.3", "torch-tensorrt==2.14.0"],
)
def test_released_wheels_that_load_pass(tmp_path: Path, requirement: str) -> None:
    wheel = download(tmp_path / "wheels", requirement)
    run = wheelforge("check", "--json", wheel, cwd=tmp_path)
    assert run.code == 0, run.err
    document = json.loads(run.out)
    [whole] = document["wheels"]
    assert whole["verdict"] in ("ok", "warning")
    errors = [v for b in document["binaries"] for v in b["violations"] if v["severity"] == "error"]
    assert errors == []
    if requirement.startswith("torch-tensorrt"):
        assert whole["requires"]["torch_pin"] == "2.14.*"  # >=2.14.0,<2.15.0
        assert {b["abi"] for b in document["binaries"]} == {"unstable"}
    if requirement.startswith("cuda-bindings"):
        # dlopen, dlsym unversioned (main: "nothing it loads defines"): they bind in libc.so.6
        # from glibc 2.34, in the libdl/libpthread its modules link before
        rules = {v["rule"] for b in document["binaries"] for v in b["violations"]}
        assert "unresolved-symbol" not in rules or whole["verdict"] == "warning"


@pytest.mark.network
def test_a_cuda_12_binary_required_beside_cuda_13_torches_fails(tmp_path: Path) -> None:
    wheel = download(tmp_path / "wheels", "cuequivariance-ops-torch-cu12==0.13.0")
    run = wheelforge("check", wheel, cwd=tmp_path)
    assert run.code == 4
    [line] = [e for e in run.err.splitlines() if e.startswith("error:")]
    assert "needs libnvrtc.so.12 (CUDA 12's runtime)" in line
    assert "its requirement torch>=2.11 admits no torch whose PyPI wheel is" in line


def small_wheel(tmp_path: Path, member: str, source: Path, requires: str) -> Path:
    path = tmp_path / "demo-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, source.read_bytes())
        zf.writestr(
            "demo-1.0.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: {requires}\n",
        )
    return with_record(path)


def test_torch_from_confirms_a_host_warning_by_loading(tmp_path: Path) -> None:
    """gomp_alone.so calls GOMP_parallel and links nothing that has it: statically a warning
    (only the libgomp torch loads globally has it); loaded with torch imported first it binds,
    and check says it loaded."""
    wheel = small_wheel(tmp_path, "demo/libops.so", ABI / "gomp_alone.so", "torch>=2.10")
    run = wheelforge("check", "--torch-from", sys.executable, "--json", wheel, cwd=tmp_path)
    assert run.code == 0, run.err
    [binary] = [b for b in json.loads(run.out)["binaries"] if b["path"].endswith("libops.so")]
    assert binary["load"].startswith("loads under torch")
    [warning] = [v for v in binary["violations"] if v["rule"] == "unresolved-symbol"]
    assert warning["severity"] == "warning" and "libtorch_global_deps.so" in warning["message"]


def test_torch_from_a_load_failure_is_an_error_whatever_the_static_verdict(
    tmp_path: Path,
) -> None:
    """cudart12_oplib.so needs libcudart.so.12 and requires torch>=2.10, which admits PyPI's
    CUDA 12 torch 2.10: statically fine. Beside this machine's torch (a CPU build, admitted)
    nothing brings libcudart.so.12: dlopen fails, and that is the verdict."""
    wheel = small_wheel(tmp_path, "demo/libops.so", ABI / "cudart12_oplib.so", "torch>=2.10")
    static = wheelforge("check", wheel, cwd=tmp_path)
    assert static.code == 0, static.err
    assert "with CUDA 12 (a cu12x build of torch" in static.out
    loaded = wheelforge("check", "--torch-from", sys.executable, wheel, cwd=tmp_path)
    assert loaded.code == 4
    [line] = [e for e in loaded.err.splitlines() if e.startswith("error:")]
    assert "libops.so fails to load under torch" in line
    assert "libcudart.so.12: cannot open shared object file" in line
    # A requirement that does not admit the torch at hand: nothing loaded, and it says so.
    pinned = small_wheel(tmp_path, "demo/libops.so", ABI / "cudart12_oplib.so", "torch==2.10.*")
    other = wheelforge("check", "--torch-from", sys.executable, pinned, cwd=tmp_path)
    assert other.code == 0, other.err
    assert "not loaded: torch" in other.out and "is not one its requirement" in other.out
