#!/usr/bin/env bash
# Issue 22: does the compile cache cost FA3's cold build time? On one H200 machine, wheelforge's
# cold build (bench/bigbuild.py's wf-cold: empty build folder, empty cache) once per word of
# ORDER, each with WHEELFORGE_COMPILE_CACHE set to it (ccache, none, auto), alternating so that
# neither mode always has the machine's first (cold page cache) build.
#
#   bash bench/h200_cache_ab.sh [PROJECT] [ORDER]        # fa3, "ccache none"
#
# Carry [".whl", ".bench/fa3.tar.gz"] (as bench/h200_bigbuild.sh). Each build's results are in
# $OUT/<n>-<mode>/ and one line per build is printed: "<n> <mode> <seconds> s".
set -uo pipefail
cd "$(dirname "$0")/.."
PROJECT=${1:-fa3}
ORDER=${2:-ccache none}
ROOT=${OUT:-$PWD/.bench/out}
n=0
for mode in $ORDER; do
    n=$((n + 1))
    rm -f .bench/results.json  # a fresh wf-cold, not "done before"
    mkdir -p "$ROOT/$n-$mode"
    OUT=$ROOT/$n-$mode WHEELFORGE_COMPILE_CACHE=$mode bash bench/h200_bigbuild.sh "$PROJECT" 560 wf-cold \
        >"$ROOT/$n-$mode/stdout.txt" 2>&1
    cp .bench/results.json "$ROOT/$n-$mode/" 2>/dev/null
    python3 - "$ROOT/$n-$mode/results.json" "$n" "$mode" "$PROJECT" <<'PY'
import json, sys
path, n, mode, project = sys.argv[1:]
try:
    step = json.load(open(path))[project]["wf-cold"]
    print(n, mode, f"{step['seconds']:.1f} s", "complete" if step.get("complete") else "NOT complete")
except (OSError, KeyError, ValueError) as e:
    print(n, mode, "no result:", e)
PY
done
