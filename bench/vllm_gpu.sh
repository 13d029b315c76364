#!/usr/bin/env bash
# Issue 40 item 5 on the GPU machine: vLLM 0.34.0's stable-ABI extensions (_C_stable_libtorch,
# _moe_C_stable_libtorch) built by wheelforge from the matrix init wrote (bench/vllm_gpu_bundle.sh,
# carried in .vllm/ with .whl/), against the machine's torch (2.11.0+cu130: vLLM's
# TORCH_TARGET_VERSION), for the arch set vLLM's CMake chose at TORCH_CUDA_ARCH_LIST=9.0a; then
# `wheelforge check` and vLLM's own kernel tests, run from the wheel. Safe to call again: the build
# folder stays in /tmp while the machine is warm, and ninja goes on where a call stopped.
#
#     run: bash bench/vllm_gpu.sh [BUILD_SECONDS]      carry: [".whl", ".vllm"]
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=/tmp/wheelforge-vllm
OUT=${OUT:-$W/out}
mkdir -p "$W/proj" "$W/cutlass" "$W/driver" "$OUT"
if [ ! -d /tmp/site/wheelforge_deps_done ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$REPO"/.whl/*.whl &&
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/pydeps" "$REPO"/.vllm/*.whl &&
        mkdir -p /tmp/site/wheelforge_deps_done
fi
if [ ! -f "$W/proj/matrix.yaml" ]; then
    tar --no-same-owner -xJf "$REPO/.vllm/project.tar.xz" -C "$W/proj"
    tar --no-same-owner -xJf "$REPO/.vllm/cutlass.tar.xz" -C "$W/cutlass"
fi
ln -sf "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')" "$W/driver/libcuda.so"
export PATH=/tmp/site/bin:$PATH
unset TORCH_CUDA_ARCH_LIST # the matrix's arch set: the one vLLM's CMake chose for 9.0a
cd "$W/proj"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
nproc; free -g | head -2
echo "== wheelforge build (cold the first time; a later call resumes)"
start=$SECONDS
PYTHONPATH=/tmp/site:$REPO/src timeout "${1:-540}" python3 -m wheelforge build --offline \
    --python python3 --report "$OUT/report.json" 2>&1 | tail -25
echo "build call: $((SECONDS - start)) s"
WHEEL=$(ls dist/*.whl 2>/dev/null | head -1)
[ -n "$WHEEL" ] || { echo "no wheel yet: call again"; exit 3; }
ls -la dist/
PYTHONPATH=/tmp/site:$REPO/src python3 -m wheelforge check "$WHEEL" 2>&1 | tail -15
PYTHONPATH=/tmp/site:$REPO/src python3 -m wheelforge inspect "$WHEEL" 2>&1 | head -30
echo "== vLLM's kernel tests, vllm imported from the wheel"
rm -rf "$W/site" "$W/t" && python3 -m pip install -q --no-index --no-deps --target "$W/site" "$WHEEL"
mkdir -p "$W/t" && cp -r tests "$W/t/" && cd "$W/t"
PYTHONPATH=$W/site:$W/pydeps python3 -c 'import vllm, vllm._custom_ops, torch
print(vllm.__file__, vllm.__version__); print(len(dir(torch.ops._C)), "ops in torch.ops._C;", len(dir(torch.ops._moe_C)), "in _moe_C")'
PYTHONPATH=$W/site:$W/pydeps timeout "${2:-400}" python3 -m pytest -q -p no:cacheprovider -n 8 \
    tests/kernels/core/test_activation.py tests/kernels/core/test_layernorm.py \
    tests/kernels/core/test_pos_encoding.py tests/kernels/moe/test_moe_align_block_size.py \
    tests/kernels/quantization/test_cutlass_scaled_mm.py tests/kernels/core/test_opcheck.py 2>&1 | tail -25
