#!/usr/bin/env bash
# Issue 40 item 5, the CPU side of vLLM 0.34.0's stable-ABI build on the GPU machine: init here
# (vLLM's CMake needs a CUDA torch 2.14 and network-fetched sources the GPU machine cannot have),
# then a bundle under .vllm/ that `run` carries with .whl/ (64 MiB in all): the adopted project
# (csrc, the vllm package, tests/kernels), CUTLASS's include folders, and the Python packages
# vLLM's kernel tests import that the GPU machine lacks. bench/vllm_gpu.sh builds and tests it there.
#
#     bash bench/vllm_gpu_bundle.sh WORK      # WORK as bench/vllm_cpu.sh leaves it, plus:
#
# WORK/args.sh sets ARGS (vLLM's -D arguments: its FetchContent folders, VLLM_PYTHON_EXECUTABLE,
# CMAKE_CXX_COMPILER=clang++-19, the CUDA library stand-ins) as bench/vllm_cpu.sh does, and
# TORCH_CUDA_ARCH_LIST=9.0a; FlashMLA, FlashKDA, DeepSelect, fmha_sm100 and tml-fa4 at the
# commits vLLM pins could not be had here: their folders hold empty files at the paths vLLM's
# cmake/external_projects/*.cmake name, enough to configure (their targets are not stable-ABI ones
# and are cut from the matrix). WORK/pydeps holds cp312 wheels of what the tests import beyond
# the GPU machine's packages (found by collecting the tests in a venv of those packages).
set -euo pipefail
PY=${PY:-python3} # a Python with wheelforge's dependencies
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=$(cd "${1:?the work folder}" && pwd)
. "$W/args.sh"
rm -rf "$W/gpu" && mkdir -p "$W/gpu" && tar --no-same-owner -xzf "$W/vllm-0.34.0.tar.gz" -C "$W/gpu"
cd "$W/gpu/vllm-0.34.0"
PYTHONPATH=$REPO/src "$PY" -m wheelforge init --from cmake --python "$W/venv/bin/python" \
    $(printf -- '--cmake-arg=%s ' "${ARGS[@]}") | tail -3
# the stable-ABI extensions only, under the stable ABI with vLLM's TORCH_TARGET_VERSION (2.11);
# the clang-only flag CMake added under clang dropped (nvcc's host g++ refuses it); libcuda from
# a folder the GPU script fills
"$PY" - <<'PY'
import yaml
m = yaml.safe_load(open("matrix.yaml"))
m["extensions"] = [e for e in m["extensions"] if e["name"].endswith("_stable_libtorch")]
m["abi"], m["torch"] = "stable", ">=2.11"
for e in m["extensions"]:
    e["library-dirs"] = ["../driver"]
    for key in ("cxx-flags", "nvcc-flags"):
        e[key] = [f for f in e.get(key, []) if "fclang-abi-compat" not in f]
m["header-libraries"] = [dict(h, path="../cutlass") for h in m["header-libraries"]]
yaml.safe_dump(m, open("matrix.yaml", "w"), sort_keys=False)
PY
rm -rf "$REPO/.vllm" && mkdir -p "$REPO/.vllm"
tar -cJf "$REPO/.vllm/project.tar.xz" matrix.yaml pyproject.toml setup.py PKG-INFO LICENSE README.md \
    requirements csrc vllm
# vLLM's tests (its conftest imports tests.models and more), less their media and weights
tar -cJf "$REPO/.vllm/tests.tar.xz" --exclude='*.png' --exclude='*.jpg' --exclude='*.wav' \
    --exclude='*.mp4' --exclude='*.npy' --exclude='*.pt' --exclude='*.safetensors' --exclude='*.gguf' \
    --exclude='*.bin' tests
tar -cJf "$REPO/.vllm/cutlass.tar.xz" -C "$W/deps/cutlass" include tools/util/include
cp "$W"/pydeps/*.whl "$REPO/.vllm/"
grep -qx '/.vllm/' "$REPO/.git/info/exclude" || echo /.vllm/ >>"$REPO/.git/info/exclude"
du -sh "$REPO/.vllm" "$REPO/.whl"
