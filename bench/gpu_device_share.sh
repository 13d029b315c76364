#!/usr/bin/env bash
# Issue 41 item 2 on the GPU machine: the bundled kernels built with nvcc's steps shared between
# three arch sets ("8.0 9.0", "9.0 10.0", "8.0 10.0"), against each arch set built alone with
# one `nvcc -c` per source (WHEELFORGE_SPLIT_COMPILE=1 turns the steps off); then the wheels
# that carry this GPU's arch run the kernels' own tests on it.
#
#   bash bench/gpu_device_share.sh        (carry [".whl"]: bench/h200_bigbuild.sh's wheels)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SITE=${SITE:-/tmp/site}
WORK=${WORK:-/tmp/devshare}
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE:$REPO/src PATH=$SITE/bin:$PATH PYTHONUNBUFFERED=1 COLUMNS=120
unset TORCH_CUDA_ARCH_LIST  # the machine's would replace the matrix's arch sets
rm -rf "$WORK" && mkdir -p "$WORK"
git archive HEAD kernels matrix.yaml | tar -x -C "$WORK"
cd "$WORK"
# the four CCCL defines (docs/performance.md) and three arch sets
python3 - <<'PY'
import re, pathlib
p = pathlib.Path("matrix.yaml")
t = p.read_text()
t = t.replace("  include-dirs: [kernels/csrc]\n", "  include-dirs: [kernels/csrc]\n  nvcc-flags: [-DTHRUST_DISABLE_ABI_NAMESPACE, -DTHRUST_IGNORE_ABI_NAMESPACE_ERROR, -DCUB_DISABLE_NAMESPACE_MAGIC, -DCUB_IGNORE_NAMESPACE_MAGIC_ERROR]\n")
t = re.sub(r'arch-sets:\n(  .*\n)+', 'arch-sets:\n  a: "8.0 9.0"\n  b: "9.0 10.0"\n  c: "8.0 10.0"\n', t)
p.write_text(t)
PY
grep -A4 "^arch-sets" matrix.yaml
python3 -m wheelforge build --dry-run --compile-cache none | grep -i "nvcc's steps" | head -3
/usr/bin/time -f "shared steps: %e s wall, %U+%S s CPU" python3 -m wheelforge build --compile-cache none --out dist-shared 2>&1 | tail -4
for set in "8.0 9.0" "9.0 10.0" "8.0 10.0"; do
    rm -rf build
    WHEELFORGE_SPLIT_COMPILE=1 /usr/bin/time -f "alone nvcc -c ($set): %e s wall, %U+%S s CPU" \
        python3 -m wheelforge build --compile-cache none --archs "$set" --out dist-alone 2>&1 | tail -1
done
ls -l dist-shared dist-alone
for whl in dist-shared/*.whl; do
    python3 -m wheelforge inspect "$whl" 2>&1 | grep -i "sm_" | head -3
    case $whl in *+c.*) continue ;; esac  # "8.0 10.0": nothing for this GPU (sm_90)
    rm -rf "$WORK/site" && python3 -m pip install -q --no-deps --no-index --target "$WORK/site" "$whl"
    PYTHONPATH=$WORK/site:$SITE python3 -m pytest -q -p no:cacheprovider kernels/tests 2>&1 | tail -2
done
