#!/usr/bin/env bash
# bench/nvcc_steps.py on the GPU machine (issue 41): nvcc's steps as separate jobs against one
# `nvcc -c`, in one device command.
#
#   bash bench/gpu_nvcc_steps.sh
#
# 1. the bundled kernels: CPU of the matrix "8.0 9.0", "9.0 10.0", "8.0 10.0" against their
#    union, both ways, with the byte checks; then --gpu: a CUDA test program linked from the
#    split objects (the fatbin by reference) and from one-job objects, loaded and run, the
#    results compared ("gpu": {"same": true} is the pass);
# 2. where .bench/fa3.tar.gz was carried: one FA3 kernel (sm_90a) both ways, wall seconds.
#
# Here, in the repository root, before the device call (needs /work/.mirror's clones):
#     python3 bench/bigbuild.py prepare fa3 --work .bench --tar
# and carry [".whl", ".bench/fa3.tar.gz"] (.whl: bench/h200_bigbuild.sh's wheels, for
# wheelforge's --dry-run, which gives the FA3 flags).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SITE=${SITE:-/tmp/site}
OUT=${OUT:-$REPO/.bench/out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE:$REPO/src PYTHONUNBUFFERED=1
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
{
    nproc
    nvcc --version | tail -1
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
} 2>&1 | tee "$OUT/machine.txt"
python3 bench/nvcc_steps.py --work /tmp/nvcc_steps --gpu 2>&1 | tee "$OUT/nvcc_steps.json"
if [ -f .bench/fa3.tar.gz ]; then
    mkdir -p .bench/fa3 && tar -xzf .bench/fa3.tar.gz -C .bench/fa3
    tree=$(dirname "$(find .bench/fa3 -name matrix.yaml -path '*flash-attention*' | head -1)")
    python3 bench/nvcc_steps.py --work /tmp/nvcc_steps_fa3 --fa3 "$tree" 2>&1 |
        tee "$OUT/nvcc_steps_fa3.json"
fi
