#!/usr/bin/env bash
# Issue 40 item 5 on the CPU machine (no GPU, 2 cores), as it ran: vLLM 0.34.0's PyPI sdist, its
# FetchContent sources, a CUDA torch 2.14.0 venv; then tests/integration/test_vllm_compile_commands.py
# (init's matrix vs vLLM's own compile_commands.json for its stable-ABI targets, TORCH_CUDA_ARCH_LIST=8.0)
# and _moe_C_stable_libtorch (30 sources at 8.0) built by wheelforge, checked and loaded.
#
#     bash bench/vllm_cpu.sh /work/cache/vllm        # WORK: a folder with room for ~10 GB
#
# Needs: network (PyPI), CMake >= 3.26 (pip's cmake in the venv), ninja, clang++ (vLLM's CMake
# refuses GCC < 13: apt-get install clang-19), nvcc 13. The FetchContent sources come from git
# checkouts placed in WORK/deps/ by hand: cutlass (vLLM pins v4.7.1; v4.7.0 ran here),
# vllm-flash-attn, flashmla, deepgemm; deepselect, flashkda, fmha_sm100, tml_fa4 and
# triton_kernels empty folders (vLLM uses them only for sm90/sm100 archs).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=$(cd "${1:?the work folder}" && pwd)
cd "$W"
[ -f vllm-0.34.0.tar.gz ] || curl -sSfo vllm-0.34.0.tar.gz "$(curl -s https://pypi.org/simple/vllm/ |
    grep -o 'https://[^"#]*vllm-0.34.0.tar.gz' | head -1)" # pip download builds its metadata (torch)
[ -x venv/bin/python ] || { python3 -m venv venv && venv/bin/pip install -q torch==2.14.0 cmake; }
[ -f driver/libcuda.so ] || { mkdir -p driver && python3 "$REPO/tools/gallery.py" driver-stub driver &&
    ln -sf libcuda.so.1 driver/libcuda.so; } # CMake's CUDA::cuda_driver without a driver
SITE=$W/venv/lib/python3.11/site-packages
export WHEELFORGE_VLLM_SDIST=$W/vllm-0.34.0.tar.gz WHEELFORGE_VLLM_DEPS=$W/deps
export WHEELFORGE_VLLM_PYTHON=$W/venv/bin/python CXX=${CXX:-$(command -v clang++-19)}
export PATH=$W/venv/bin:$PATH TRITON_KERNELS_SRC_DIR=$W/deps/triton_kernels
export WHEELFORGE_VLLM_CMAKE_ARGS="-DCUDA_nvrtc_LIBRARY=$SITE/nvidia/cu13/lib/libnvrtc.so.13 \
-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCUDA_TOOLKIT_ROOT_DIR=/usr/local/cuda \
-DCUDA_cuda_driver_LIBRARY=$W/driver/libcuda.so"
cd "$REPO"
rm -rf "$W/pt"
time python -m pytest -p no:cacheprovider tests/integration/test_vllm_compile_commands.py \
    -m "network and slow" -q --basetemp="$W/pt"
# The test's adopted project, cut to _moe_C_stable_libtorch: built for 8.0 with the host's GCC
# (the clang-only -fclang-abi-compat flag CMake added under clang dropped), cuBLAS's headers from
# the torch venv (this machine's toolkit has none)
rm -rf "$W/moe" && cp -r "$W/pt/test_vllm_stable_extensions_co0/vllm-0.34.0" "$W/moe" && cd "$W/moe"
python - "$W/deps/cutlass" <<'PY'
import sys, yaml
m = yaml.safe_load(open("matrix.yaml"))
m["extensions"] = [e for e in m["extensions"] if e["name"] == "vllm._moe_C_stable_libtorch"]
m["header-libraries"] = [dict(h, path=sys.argv[1]) for h in m["header-libraries"]]
yaml.safe_dump(m, open("matrix.yaml", "w"), sort_keys=False)
PY
sed -i '/fclang-abi-compat/d' matrix.yaml
export PYTHONPATH=$REPO/src
time env CPATH="$SITE/nvidia/cu13/include" python -m wheelforge build --offline --archs 8.0 -j 2 \
    --python "$W/venv/bin/python"
WHEEL=$(ls dist/*.whl)
python -m wheelforge check "$WHEEL"
mkdir -p "$W/unpacked" && python -m zipfile -e "$WHEEL" "$W/unpacked"
LD_LIBRARY_PATH=$W/driver "$W/venv/bin/python" -c "import torch, glob
torch.ops.load_library(glob.glob('$W/unpacked/vllm/_moe_C_stable_libtorch*.so')[0])
print(sorted(n for n in dir(torch.ops._moe_C) if not n.startswith('_'))[:8])"
