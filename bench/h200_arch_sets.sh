#!/usr/bin/env bash
# Issue 33 on the H200 machine (16 cores, python3: torch 2.11.0+cu130, nvcc 13.0, no network):
# bench/bench_build.py's arch-sets case (arch sets 8.0, 9.0, 10.0 as a matrix against their
# union, cold builds) beside a baseline wheelforge, without a compile cache and with ccache;
# its no-op case; then the bundled kernels built for 9.0 and tested on the GPU. One device call.
#
#   bash bench/h200_arch_sets.sh BASELINE_SRC [REPEAT]
#
# BASELINE_SRC: a folder holding the baseline's src/wheelforge/ (the device has no git history of
# its own: `git archive COMMIT src | tar -x -C .bench/base-COMMIT` here, and `echo COMMIT >
# .bench/base-COMMIT/COMMIT`, which the tables name it by; carried). The commit
# the tables name for this tree is $WHEELFORGE_BENCH_COMMIT (set it: the device's copy has
# another .git). Here, before the device call: the dependency wheels in .whl/ (the device
# README's `pip download` command; see bench/h200_bigbuild.sh), and carry [".whl", BASELINE_SRC].
# The tables go to stdout and to $OUT (arch-none.md, arch-auto.md, noop.md).
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?name the baseline folder (it holds src/wheelforge or wheelforge/)}
REPEAT=${2:-2}
OUT=${OUT:-.bench/out}
SITE=${SITE:-/root/site}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl || exit 1
export PYTHONPATH=$SITE:$PWD/src PATH=$SITE/bin:$PATH PYTHONUNBUFFERED=1 COLUMNS=160
# the machine's memory grows as it is used (bench/h200_bigbuild.sh says why)
export WHEELFORGE_MEMORY_LIMIT=${WHEELFORGE_MEMORY_LIMIT:-120GiB}
python3 -m compileall -q "$SITE" src "$BASE" >/dev/null
echo "$(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
python3 bench/bench_build.py --cases arch-sets --baseline "$BASE" --repeat "$REPEAT" \
    --compile-cache none --work /tmp/bench-arch-none --out "$OUT/arch-none.md" 2>&1 | tail -22
python3 bench/bench_build.py --cases arch-sets --baseline "$BASE" --repeat "$REPEAT" \
    --work /tmp/bench-arch-auto --out "$OUT/arch-auto.md" 2>&1 | tail -22
python3 bench/bench_build.py --cases noop --baseline "$BASE" --archs 9.0 \
    --work /tmp/bench-noop --out "$OUT/noop.md" 2>&1 | tail -12
echo "== the bundled kernels: build --archs 9.0, then their tests on the GPU"
python3 -m wheelforge build --archs "9.0" --out "$OUT/dist" 2>&1 | tail -6
python3 -m wheelforge test --wheel "$OUT"/dist/*.whl --torch-from python3 2>&1 | tail -8
