#!/usr/bin/env bash
# A cold build of the bundled kernels, then fresh clones in other folders with the warm caches
# it filled (each wheel's sha256 printed: they must match), then no-op rebuilds; every cache
# private to this run. The short check behind docs/performance.md's "after kept repairs" line.
#
#   bash bench/warm_clone.sh ["7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX"]
#
# Needs wheelforge importable (PYTHONPATH=src works) and torch, nvcc, ninja.
set -euo pipefail
ARCHS=${1:-"7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX"}
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export XDG_CACHE_HOME=$W/xdg CCACHE_DIR=$W/ccache SCCACHE_DIR=$W/sccache COLUMNS=200
python3 -m compileall -q "$REPO/src" >/dev/null  # as pip install does
timed() {
    local start; start=$(date +%s.%N)
    "$@" >"$W/last.log" 2>&1 || { tail -20 "$W/last.log"; exit 1; }
    python3 -c "print(f'{$(date +%s.%N) - $start:.2f} s')"
}
copy() { mkdir -p "$1"; cp -r "$REPO/kernels" "$REPO/matrix.yaml" "$1/"; }
copy "$W/a"; cd "$W/a"
echo "cold:    $(timed python3 -m wheelforge build --archs "$ARCHS")  $(sha256sum dist/*.whl | cut -c1-16)"
for i in 1 2 3; do
    copy "$W/clone-$i"; cd "$W/clone-$i"
    echo "clone $i: $(timed python3 -m wheelforge build --archs "$ARCHS")  $(sha256sum dist/*.whl | cut -c1-16)"
done
cd "$W/a"
for i in 1 2 3 4 5 6 7; do echo "no-op:   $(timed python3 -m wheelforge build --archs "$ARCHS")"; done
