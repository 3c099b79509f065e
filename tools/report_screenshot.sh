#!/usr/bin/env bash
# Makes tools/screenshots/report.png, the picture in docs/watch-and-report.md of `fusion-node report`: a 120 s bag of the seeded
# simulator (figure-eights with hard iron) recorded by a pipeline, its report, rendered by headless Chromium.
# Also prints the report's size and the render time next to a blank page's (Chromium's start-up).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node="$(cd "$root" && swift build -c release --show-bin-path)/fusion-node"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/record.yaml" <<YAML
stages:
  sim:
    type: simulator
    scenario: default
    rate_hz: 100
    duration: 120
    realtime: false
    hard_iron_ut: [12, -20, 6]
  rec:
    type: record
    inputs: [sim]
    path: $work/sim.mcap
    topics: [imu/data_raw, imu/mag]
YAML
"$node" --config "$work/record.yaml" 2>/dev/null
"$node" report "$work/sim.mcap" -o "$work/report.html" 2>/dev/null
mkdir -p "$root/tools/screenshots"
started=$(date +%s.%N)
chromium --headless --no-sandbox --disable-gpu --window-size=1000,1500 \
  --screenshot="$root/tools/screenshots/report.png" "file://$work/report.html" >/dev/null 2>&1
ended=$(date +%s.%N)
chromium --headless --no-sandbox --disable-gpu --screenshot="$work/blank.png" "data:text/html,<p>x</p>" >/dev/null 2>&1
blank=$(date +%s.%N)
echo "report $(stat -c %s "$work/report.html") bytes; chromium render + screenshot $(echo "$ended - $started" | bc) s (blank page $(echo "$blank - $ended" | bc) s)"
