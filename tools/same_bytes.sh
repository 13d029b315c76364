#!/usr/bin/env bash
# Byte-identity of two commits' outputs (issue 42 item 1: a move must change no output).
# Builds the bundled kernels (matrix.yaml, --archs "8.0", -j2, no compile cache) with each
# commit's code on one copy of the project at one path, then runs check, inspect, matrix and a
# no-op rebuild, and diffs: the wheels by sha256, the JSON documents less their measured times,
# the screens less their durations.
#
#   tools/same_bytes.sh [BASE [HEAD]]    # default: main and HEAD; PYTHON picks the interpreter
#
# Prints "same bytes: ..." and exits 0 when everything matches, else the diff and exits 1.
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
base=${1:-main}
head=${2:-HEAD}
py=${PYTHON:-python}
work=${WORK:-${TMPDIR:-/tmp}/wheelforge-same-bytes}
rm -rf "$work"
mkdir -p "$work/project"
# One project, one path, for both sides: only the code differs.
git -C "$repo" archive "$base" kernels matrix.yaml | tar -x -C "$work/project"

# JSON less what a clock or the kernel measured (times, each compile's memory, what memory the
# machine had free); screens less durations ("12.3s", "1m02s", "450 ms") and the memory figures
# of the compile lines, their padding squeezed.
normalize_json='
import json, sys
MEASURED = ("seconds", "time", "elapsed", "duration", "started", "finished", "date", "largest",
            "peak", "memory")
def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if not any(t in k.lower() for t in MEASURED)}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value
print(json.dumps(strip(json.load(sys.stdin)), indent=1, sort_keys=True))
'
mask_times() {
    sed -E -e 's/[0-9]+m[0-9]+s|[0-9]+(\.[0-9]+)? ?(ms|s|min)\b/<t>/g' \
        -e '/CPU, |in use at once/s/[0-9]+(\.[0-9]+)? (KiB|MiB|GiB)/<m>/g' -e 's/  +/ /g'
}

for side in base head; do
    rev=$base
    [ "$side" = head ] && rev=$head
    code="$work/code-$side"
    out="$work/out-$side"
    mkdir -p "$code" "$out"
    git -C "$repo" archive "$rev" src | tar -x -C "$code"
    rm -rf "$work/project/build" "$work/project/dist"
    wf() { (cd "$work/project" && PYTHONPATH="$code/src" COLUMNS=120 NO_COLOR=1 \
        "$py" -m wheelforge "$@"); }
    common=(--cache-dir "$work/cache-$side")  # each its own: no side learns from the other's run
    # Each output with its command's exit code as its last line.
    run() { local file=$1; shift; set +e; wf "$@" >"$out/$file" 2>&1; echo "exit $?" >>"$out/$file"; set -e; }
    runjson() { local file=$1; shift; set +e; wf "$@" >"$out/$file" 2>/dev/null; set -e; }
    run build.screen build --archs "8.0" -j2 --compile-cache none "${common[@]}" \
        --report "$work/project/report.json"
    mv "$work/project/report.json" "$out/report.json"
    (cd "$work/project/dist" && sha256sum -- *.whl) >"$out/wheels.sha256"
    run noop.screen build --archs "8.0" -j2 --compile-cache none "${common[@]}"
    wheels=("$work/project/dist/"*.whl)
    run check.screen check "${wheels[@]}"
    runjson check.json check --json "${wheels[@]}"
    run inspect.screen inspect "${wheels[@]}"
    runjson inspect.json inspect --json "${wheels[@]}"
    run matrix.screen matrix --archs "8.0"
    runjson matrix.json matrix --archs "8.0" --json
    run version.screen --version
    run help.screen build --help
    for f in "$out"/*.json; do "$py" -c "$normalize_json" <"$f" >"$f.norm"; done
    for f in "$out"/*.screen; do mask_times <"$f" >"$f.norm"; done
    # -j2 finishes the compiles in either order: the build's lines compared as a set of lines,
    # less the [k/n] counters and the slowest-first order of the compile summary.
    sed -E 's/\[[0-9]+\/[0-9]+\] //' "$out/build.screen.norm" | sort >"$out/build.screen.sorted"
    mv "$out/build.screen.sorted" "$out/build.screen.norm"
done

status=0
for f in "$work"/out-base/*.norm "$work"/out-base/wheels.sha256; do
    name=$(basename "$f")
    if ! diff -u "$f" "$work/out-head/$name" >"$work/$name.diff"; then
        echo "differs: $name"
        cat "$work/$name.diff"
        status=1
    fi
done
raw=0
compared=0
for f in "$work"/out-base/*.screen "$work"/out-base/*.json; do
    compared=$((compared + 1))
    cmp -s "$f" "$work/out-head/$(basename "$f")" && raw=$((raw + 1))
done
if [ "$status" = 0 ]; then
    echo "same bytes ($base vs $head): $(wc -l <"$work/out-base/wheels.sha256") wheel(s) by sha256;" \
        "$compared outputs of build, no-op build, check, inspect, matrix, --version, build --help" \
        "the same less measured times and memory, $raw of them byte for byte"
    cat "$work/out-base/wheels.sha256"
fi
exit "$status"
