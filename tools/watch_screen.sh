#!/usr/bin/env bash
# Captures what `fusion-node --watch` shows after a few seconds of the built-in simulator, as text (tmux
# capture-pane), for the README. Usage: tools/watch_screen.sh [SECONDS] > screen.txt   (default 6)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node="$(cd "$root" && swift build --show-bin-path)/fusion-node"
session="gc-screen-$$"
tmux new-session -d -s "$session" -x 100 -y 24 "\"$node\" --watch"
sleep "${1:-6}"
tmux capture-pane -p -t "$session"
tmux send-keys -t "$session" q
sleep 0.5
tmux kill-session -t "$session" 2>/dev/null || true
