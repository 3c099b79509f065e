#!/usr/bin/env bash
# Captures what `fusion-node --watch` shows after a few seconds of the built-in simulator: as text (tmux
# capture-pane) on stdout, and as docs/screenshots/watch.png (that text on a dark terminal-like page,
# rendered by headless Chromium) for the README and docs/watch-and-report.md. Usage: tools/watch_screen.sh [SECONDS]   (default 6)
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
node="$(cd "$root" && swift build --show-bin-path)/fusion-node"
session="gc-screen-$$"
tmux new-session -d -s "$session" -x 100 -y 24 "\"$node\" --watch"
sleep "${1:-6}"
screen="$(tmux capture-pane -p -t "$session")"
tmux send-keys -t "$session" q
sleep 0.5
tmux kill-session -t "$session" 2>/dev/null || true
printf '%s\n' "$screen"
page="$(mktemp --suffix=.html)"
escaped="$(printf '%s' "$screen" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g')"
printf '<html><body style="margin:0;background:#111"><pre style="color:#ddd;font:15px monospace;padding:12px">%s</pre></body></html>' \
  "$escaped" > "$page"
mkdir -p "$root/docs/screenshots"
chromium --headless --no-sandbox --disable-gpu --window-size=960,480 --screenshot="$root/docs/screenshots/watch.png" \
  "file://$page" >/dev/null 2>&1
rm -f "$page"
