"""vLLM 0.34.0's stable-ABI extensions adopted through the CMake door (issue 40 item 5):
``wheelforge init``'s matrix, cut to ``_C_stable_libtorch`` and ``_moe_C_stable_libtorch`` under
``abi: stable``, plans the compile commands vLLM's own CMake writes, source by source, but for
the differences docs/your-extension.md gives a reason for (the weak-shims header, torch's C++
frontend folder, the toolkit's ``include/cccl``).

Needs what a network step fetches, named by the environment (skipped without them):
$WHEELFORGE_VLLM_SDIST (``pip download vllm==0.34.0 --no-deps --no-binary :all:``),
$WHEELFORGE_VLLM_DEPS (a folder of CUTLASS and vLLM's other FetchContent sources, as
bench/vllm_cpu.sh names them), $WHEELFORGE_VLLM_PYTHON (a Python with a CUDA torch 2.14),
CMake >= 3.26 on the PATH and a C++ compiler vLLM takes ($CXX: GCC >= 13 or a clang), and
$WHEELFORGE_VLLM_CMAKE_ARGS for what this machine's toolkit lacks (``-DCUDA_nvrtc_LIBRARY=...``,
``-DCUDA_cuda_driver_LIBRARY=`` a libcuda.so stand-in from ``tools/gallery.py driver-stub``).
bench/vllm_cpu.sh runs it as it ran on the CPU machine."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import needs_nvcc, wheelforge

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import compile_commands_diff as diff

pytestmark = [needs_nvcc, pytest.mark.network, pytest.mark.slow]

TARGETS = ("_C_stable_libtorch", "_moe_C_stable_libtorch")
# The differences docs/your-extension.md's vLLM table gives a reason for.
REASONED = {
    ("flag", "", "-include gen/wheelforge_weak_shims.h"),
    ("include", "torch/csrc/api/include", ""),
    ("include", "torch/csrc/api/include", "include/cccl"),
    # the toolkit CMake found: nvcc adds its own toolkit's headers (the variant's), and the
    # matrix names no toolkit's folder (tests/integration/test_init_front_doors.py)
    ("include", "{toolkit}/include torch/csrc/api/include", ""),
}


def _cmake_ok() -> bool:
    cmake = shutil.which("cmake")
    if cmake is None or shutil.which("ninja") is None:
        return False
    out = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    return m is not None and (int(m[1]), int(m[2])) >= (3, 26)


def _short(row: tuple[str, ...]) -> tuple[str, str, str]:
    """A row's what and sides, torch's and the toolkit's folders by their tails."""

    def tail(text: str) -> str:
        return " ".join(
            "torch/csrc/api/include"
            if w.endswith("torch/csrc/api/include")
            else "include/cccl"
            if w.endswith("include/cccl")
            else "{toolkit}/include"
            if (Path(w) / "cuda_runtime_api.h").is_file()
            else w
            for w in text.split()
        )

    return (row[1], tail(row[2]), tail(row[3]))


def test_vllm_stable_extensions_compile_as_their_cmake_compiles_them(tmp_path: Path) -> None:
    sdist = os.environ.get("WHEELFORGE_VLLM_SDIST", "")
    deps = os.environ.get("WHEELFORGE_VLLM_DEPS", "")
    python = os.environ.get("WHEELFORGE_VLLM_PYTHON", "")
    if not (Path(sdist).is_file() and Path(deps).is_dir() and Path(python).is_file()):
        pytest.skip("set WHEELFORGE_VLLM_SDIST, WHEELFORGE_VLLM_DEPS and WHEELFORGE_VLLM_PYTHON")
    if not _cmake_ok():
        pytest.skip("vLLM's CMake needs CMake >= 3.26 and ninja on the PATH")
    probe = subprocess.run(
        [python, "-c", "import torch; print(torch.version.cuda or '')"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0 or not probe.stdout.strip():
        pytest.skip(f"{python} has no CUDA torch")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    project = next(tmp_path.glob("vllm-*"))
    pyproject = project / "pyproject.toml"  # its dynamic version is item 1's, not this one's
    pyproject.write_text(
        re.sub(r"^dynamic = \[.*\]$", 'version = "0.34.0"', pyproject.read_text(), flags=re.M)
    )
    d = Path(deps)
    args = [
        f"-DVLLM_PYTHON_EXECUTABLE={python}",
        "-DVLLM_TARGET_DEVICE=cuda",
        f"-DVLLM_CUTLASS_SRC_DIR={d / 'cutlass'}",
        f"-DVLLM_FLASH_ATTN_SRC_DIR={d / 'vllm-flash-attn'}",
        f"-DFLASH_MLA_SRC_DIR={d / 'flashmla'}",
        f"-DDEEPGEMM_SRC_DIR={d / 'deepgemm'}",
        f"-DDEEPSELECT_SRC_DIR={d / 'deepselect'}",
        f"-DFLASH_KDA_SRC_DIR={d / 'flashkda'}",
        f"-DFMHA_SM100_SRC_DIR={d / 'fmha_sm100'}",
        f"-DTML_FA4_SRC_DIR={d / 'tml_fa4'}",
        *(["-DCMAKE_CXX_COMPILER=" + os.environ["CXX"]] if os.environ.get("CXX") else []),
        *shlex.split(os.environ.get("WHEELFORGE_VLLM_CMAKE_ARGS", "")),
    ]
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "8.0"}
    own = tmp_path / "own"
    shutil.copytree(project, own)
    configured = subprocess.run(
        # Ninja, as init configures: the Makefile generator hides nvcc's include folders in a
        # response file (--options-file includes_CUDA.rsp) that compile_commands.json only names
        ["cmake", "-S", own, "-B", own / "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", "-DFETCHCONTENT_FULLY_DISCONNECTED=ON", *args],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert configured.returncode == 0, configured.stdout[-3000:] + configured.stderr[-3000:]
    commands = tmp_path / "compile_commands.json"
    commands.write_text(
        (own / "build" / "compile_commands.json").read_text().replace(str(own), str(project))
    )
    # in init's sandbox: its Marlin generator writes into csrc/, root's own since extractall
    # (tar as root keeps uid 1000, which the sandbox's root cannot write: init says so)
    run = wheelforge(
        "init", "--from", "cmake", "--python", python,
        *[f"--cmake-arg={a}" for a in args], cwd=project, env=env,
    )  # fmt: skip
    assert run.code == 0, run.err
    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    stable = [e for e in matrix["extensions"] if e["name"].rsplit(".", 1)[-1] in TARGETS]
    assert [e["limited-api"] for e in stable] == ["3", "3"]  # CMake's USE_SABI 3
    matrix["extensions"], matrix["abi"], matrix["torch"] = stable, "stable", ">=2.11"
    (project / "matrix.yaml").write_text(yaml.safe_dump(matrix, sort_keys=False))

    theirs = diff.cmake_compiles(commands, project.resolve(), list(TARGETS))
    ours = diff.wheelforge_compiles(project.resolve(), python)
    assert len(theirs) == 90 and set(theirs) == set(ours)
    rows = {_short(r) for r in diff.differences(theirs, ours)}
    assert rows <= REASONED, rows - REASONED
