#!/usr/bin/env bash
# Issue 40 item 5 on the GPU machine: vLLM 0.34.0's stable-ABI extensions (_C_stable_libtorch,
# _moe_C_stable_libtorch) built by wheelforge from the matrix init wrote (bench/vllm_gpu_bundle.sh,
# carried in .vllm/ with .whl/), against the machine's torch (2.11.0+cu130: vLLM's
# TORCH_TARGET_VERSION), for the arch set vLLM's CMake chose at TORCH_CUDA_ARCH_LIST=9.0a; then
# `wheelforge check` and vLLM's own kernel tests, run from the installed wheel.
#
# The build takes longer than one call (116 compiles; csrc/quantization/w8a8/cutlass/
# scaled_mm_c2x.cu alone runs over 8 minutes on the H100's cores), and a call's end would stop
# it: it runs detached, and each call waits for it up to WAIT seconds. Call again until it says
# the wheel is built; the machine must stay warm between calls (30 s).
#
#     run: bash bench/vllm_gpu.sh [WAIT] [TEST_SECONDS]      carry: [".whl", ".vllm"]
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=/tmp/wheelforge-vllm
OUT=${OUT:-$W/out}
mkdir -p "$W/proj" "$W/cutlass" "$W/driver" "$W/t" "$OUT"
if [ ! -d "$W/pydeps" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$REPO"/.whl/*.whl
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/pydeps" "$REPO"/.vllm/*.whl
    tar --no-same-owner -xJf "$REPO/.vllm/project.tar.xz" -C "$W/proj"
    tar --no-same-owner -xJf "$REPO/.vllm/cutlass.tar.xz" -C "$W/cutlass"
    tar --no-same-owner -xJf "$REPO/.vllm/tests.tar.xz" -C "$W/t"
fi
ln -sf "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')" "$W/driver/libcuda.so"
cd "$W/proj"
if [ ! -f "$W/build.pid" ]; then
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
    nproc
    echo "== wheelforge build, detached (log: $W/build.out)"
    # the matrix's arch set: the one vLLM's CMake chose for 9.0a
    env -u TORCH_CUDA_ARCH_LIST PATH=/tmp/site/bin:$PATH PYTHONPATH=/tmp/site:$REPO/src \
        setsid bash -c "start=\$(date +%s); python3 -m wheelforge build --offline --python python3 \
        --report $W/report.json >$W/build.out 2>&1; echo \$? >$W/build.rc; \
        echo \$((\$(date +%s) - start)) >$W/build.seconds" </dev/null >/dev/null 2>&1 &
    echo $! >"$W/build.pid"
fi
for _ in $(seq "${1:-560}"); do
    [ -f "$W/build.rc" ] && break
    sleep 1
done
tail -4 "$W/build.out"
cp "$W/build.out" "$OUT/" 2>/dev/null
[ -f "$W/build.rc" ] || { echo "still building: call again"; exit 3; }
echo "build: exit $(cat "$W/build.rc") after $(cat "$W/build.seconds") s"
cp "$W/report.json" "$OUT/" 2>/dev/null
WHEEL=$(ls dist/*.whl 2>/dev/null | head -1)
[ -n "$WHEEL" ] || exit 1
ls -la dist/
PYTHONPATH=/tmp/site:$REPO/src python3 -m wheelforge check "$WHEEL" 2>&1 | tail -15
PYTHONPATH=/tmp/site:$REPO/src python3 -m wheelforge inspect "$WHEEL" 2>&1 | head -30
echo "== vLLM's kernel tests, vllm imported from the installed wheel"
rm -rf "$W/site" && python3 -m pip install -q --no-index --no-deps --target "$W/site" "$WHEEL"
cd "$W/t"
PYTHONPATH=$W/site:$W/pydeps timeout "${2:-400}" python3 -m pytest -q -p no:cacheprovider -n 8 \
    tests/kernels/core/test_activation.py tests/kernels/core/test_layernorm.py \
    tests/kernels/moe/test_moe_align_block_size.py tests/kernels/moe/test_grouped_topk.py \
    tests/kernels/quantization/test_cutlass_scaled_mm.py tests/kernels/core/test_opcheck.py 2>&1 | tail -25
