#!/bin/bash
# Capture what a person sees while a command runs: the command in a tmux pane of WIDTH columns,
# the pane saved every second as OUT/NNNN.txt (the last screen as OUT/last.txt, the whole
# scrollback as OUT/scrollback.txt), the pane widened to WIDTH2 after RESIZE_AFTER seconds
# when both are set. Used for docs/terminal-output.md.
#   tools/tmux_capture.sh OUT WIDTH 'wheelforge build --cache-dir /tmp/c'
#   RESIZE_AFTER=60 WIDTH2=100 tools/tmux_capture.sh OUT 80 '…'
set -euo pipefail
out=$1 width=$2 cmd=$3
session=cap$$
mkdir -p "$out"
tmux new-session -d -s "$session" -x "$width" -y "${HEIGHT:-40}"
tmux set-option -t "$session" history-limit 100000 >/dev/null
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
tmux send-keys -t "$session" "$cmd; echo __capture_done__ rc=\$?" Enter
start=$SECONDS n=0
while :; do
  sleep 1
  n=$((n + 1))
  tmux capture-pane -t "$session" -p > "$out/$(printf %04d "$n").txt"
  if [ -n "${RESIZE_AFTER:-}" ] && [ $((SECONDS - start)) -ge "$RESIZE_AFTER" ]; then
    tmux resize-window -t "$session" -x "$WIDTH2"
    echo "resized to $WIDTH2 at ${n}s" > "$out/resized.txt"
    RESIZE_AFTER=
  fi
  if tmux capture-pane -t "$session" -p -S - | grep -q '^__capture_done__ rc=[0-9]'; then break; fi
done
tmux capture-pane -t "$session" -p > "$out/last.txt"
tmux capture-pane -t "$session" -p -S - > "$out/scrollback.txt"
grep -o '__capture_done__ rc=[0-9]*' "$out/scrollback.txt" | tail -1
