#!/usr/bin/env bash
# Makes docs/screenshots/report-1400.png and report-800.png, the pictures in docs/watch-and-report.md of
# `fusion-node report`: a 120 s bag of the seeded simulator (its default scenario, a sensor with hard
# iron) recorded with its true orientation, reported with that truth, rendered by headless Chromium in a
# window 1400 and 800 px wide. Also prints the report's size and the render time next to a blank
# page's (Chromium's start-up).
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
node="${FUSION_NODE:-$(cd "$root" && swift build -c release --show-bin-path)/fusion-node}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/record.yaml" <<YAML
stages:
  sim:
    type: simulator
    scenario: default
    rate_hz: 100
    duration_s: 120
    realtime: false
    hard_iron_ut: [12, -20, 6]
    truth_path: $work/truth.csv
  rec:
    type: record
    inputs: [sim]
    path: $work/sim.mcap
    topics: [imu/data_raw, imu/mag]
YAML
"$node" --config "$work/record.yaml" 2>/dev/null
"$node" report "$work/sim.mcap" -o "$work/report.html" --truth "$work/truth.csv" 2>/dev/null
mkdir -p "$root/docs/screenshots"
for width in 1400 800; do
  started=$(date +%s.%N)
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=$width,2600 \
    --screenshot="$root/docs/screenshots/report-$width.png" "file://$work/report.html" >/dev/null 2>&1
  ended=$(date +%s.%N)
  echo "report $(stat -c %s "$work/report.html") bytes; chromium at $width px: render + screenshot" \
    "$(echo "$ended - $started" | bc) s"
done
started=$(date +%s.%N)
chromium --headless --no-sandbox --disable-gpu --screenshot="$work/blank.png" "data:text/html,<p>x</p>" >/dev/null 2>&1
echo "blank page $(echo "$(date +%s.%N) - $started" | bc) s"
