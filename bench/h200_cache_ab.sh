#!/usr/bin/env bash
# Issue 22: does the compile cache cost FA3's cold build time? On one H200 machine, wheelforge's
# cold build (bench/bigbuild.py's wf-cold: empty build folder, empty cache) once per word of
# ORDER, each with WHEELFORGE_COMPILE_CACHE set to it (ccache, none, auto), alternating so that
# neither mode always has the machine's first (cold page cache) build. The word "own" is the
# project's own setup.py's cold build (bench/bigbuild.py's own-cold) instead, with its
# .ninja_log (every job's start and end) kept in $OUT/<n>-own/, so that the two builders can be
# alternated on one machine too: ORDER="own none none own".
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
    step=wf-cold
    cache=$mode
    [ "$mode" = own ] && step=own-cold cache=none
    OUT=$ROOT/$n-$mode WHEELFORGE_COMPILE_CACHE=$cache bash bench/h200_bigbuild.sh "$PROJECT" 560 $step \
        >"$ROOT/$n-$mode/stdout.txt" 2>&1
    if [ "$mode" = own ]; then
        find .bench/own -name .ninja_log -exec cp {} "$ROOT/$n-$mode/ninja_log.txt" \; 2>/dev/null
    fi
    cp .bench/results.json "$ROOT/$n-$mode/" 2>/dev/null
    python3 - "$ROOT/$n-$mode/results.json" "$n" "$mode" "$PROJECT" "$step" <<'PY'
import json, sys
path, n, mode, project, name = sys.argv[1:]
try:
    step = json.load(open(path))[project][name]
    print(n, mode, f"{step['seconds']:.1f} s", "complete" if step.get("complete") else "NOT complete")
except (OSError, KeyError, ValueError) as e:
    print(n, mode, "no result:", e)
PY
done
