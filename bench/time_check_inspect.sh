#!/bin/bash
# Time and peak memory of `wheelforge check` and `wheelforge inspect` on one wheel, for two
# wheelforge installs side by side (main before a change, this tree after), alternating, three
# rounds; each line: wall clock, user and system CPU, peak RSS (/usr/bin/time -v) and the load
# average, which on a shared machine explains the wall clock.
#
#   bench/time_check_inspect.sh WHEEL BEFORE_WHEELFORGE AFTER_WHEELFORGE
#   bench/time_check_inspect.sh vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl \
#       /work/scratch/audit/before/.venv/bin/wheelforge .venv/bin/wheelforge
set -u
wheel=$1 before=$2 after=$3
out=$(mktemp)
for round in 1 2 3; do
  for tree in before after; do
    if [ "$tree" = before ]; then wf=$before; else wf=$after; fi
    for cmd in check inspect; do
      /usr/bin/time -v "$wf" "$cmd" "$wheel" > /dev/null 2> "$out"
      rc=$?
      printf '%s %s %s rc=%s wall=%s user=%s sys=%s maxrss_kb=%s load=%s\n' "$round" "$tree" "$cmd" "$rc" \
        "$(awk '/Elapsed/ {print $NF}' "$out")" "$(awk '/User time/ {print $NF}' "$out")" \
        "$(awk '/System time/ {print $NF}' "$out")" "$(awk '/Maximum resident/ {print $NF}' "$out")" \
        "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
rm -f "$out"
