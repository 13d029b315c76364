#!/usr/bin/env bash
# On a GPU machine: `pip wheel ./kernels` without TORCH_CUDA_ARCH_LIST builds for the local GPU
# (wheelforge.build_meta asks the build environment's torch, else nvidia-smi), and that wheel's
# tests pass on the GPU. One command from the repository root, with the venv of the README:
#
#     bash bench/gpu_backend.sh
#
# Prints the capability found, the build's arch line, the wheel's fatbin entries (SASS for the
# local GPU only) and the `wheelforge test` table.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=$(mktemp -d /tmp/wheelforge-gpu-backend.XXXXXX)

echo "== local GPU, as the backend sees it"
"$PY" -c 'import sys; from pathlib import Path; from wheelforge.toolchain.gpu import local_capabilities; print(local_capabilities(Path(sys.executable)))'

echo "== pip wheel --no-build-isolation ./kernels (no TORCH_CUDA_ARCH_LIST)"
env -u TORCH_CUDA_ARCH_LIST "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$OUT" ./kernels 2>&1 \
    | grep -E "wheelforge.build_meta|compile for|Created wheel" || true

echo "== what the wheel carries"
"$PY" -m wheelforge inspect "$OUT"/*.whl

echo "== its tests under this torch"
"$PY" -m wheelforge test --matrix kernels/matrix.yaml --wheel "$OUT"/*.whl --torch-from "$PY"
