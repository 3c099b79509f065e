#!/usr/bin/env bash
# Replays every shared BROAD and phone recording with two fusion-node builds and compares their CSVs
# byte for byte: the check that a refactor changed no output on real recordings (the golden replays,
# tools/golden_replays.py, are the same check on the simulator, run by the test suite).
#   BROAD:  default graph, --no-calibration, --smooth, --filter complementary; orientation and accuracy CSVs
#   phones: default graph on the raw topics; --mag-topic /imu/mag_own --no-calibration
# Usage: tools/replay_identity.sh OLD_BINARY NEW_BINARY [DATA_DIR]   (DATA_DIR: ../shared/data)
# Exit 0 when every CSV is identical, 1 when one differs (each named), 2 on a usage or replay error.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY [DATA_DIR]" >&2; exit 2; }
old="$1"; new="$2"; data="${3:-$here/../../shared/data}"
for b in "$old" "$new"; do [ -x "$b" ] || { echo "replay_identity: $b is not an executable" >&2; exit 2; }; done
[ -d "$data/broad/bags" ] && [ -d "$data/phones/bags" ] || { echo "replay_identity: no broad/bags or phones/bags under $data" >&2; exit 2; }
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
failed=0

# replay LABEL BAG NAME ARGS...: both builds, CSVs into $out/{old,new}/NAME*.csv
replay() {
  local label="$1" bag="$2" name="$3"; shift 3
  for side in old new; do
    local bin="$old"; [ "$side" = new ] && bin="$new"
    mkdir -p "$out/$side"
    if ! "$bin" replay "$bag" --csv "$out/$side/$name.csv" --accuracy-csv "$out/$side/$name.acc.csv" "$@" \
        > /dev/null 2> "$out/$side/$name.err"; then
      echo "replay_identity: $side build failed on $label $(basename "$bag"): $(tail -1 "$out/$side/$name.err")" >&2
      failed=1
    fi
  done
}

for bag in "$data"/broad/bags/*/; do
  n="$(basename "$bag")"
  replay broad "$bag" "$n.default"
  replay broad "$bag" "$n.nocal" --no-calibration
  replay broad "$bag" "$n.smooth" --smooth
  replay broad "$bag" "$n.complementary" --filter complementary
done
for bag in "$data"/phones/bags/*/; do
  n="$(basename "$bag")"
  replay phone "$bag" "$n.raw"
  replay phone "$bag" "$n.own" --mag-topic /imu/mag_own --no-calibration
done
[ "$failed" = 0 ] || exit 2

total=0; differ=0
for f in "$out"/old/*.csv; do
  name="$(basename "$f")"; total=$((total + 1))
  if ! cmp -s "$f" "$out/new/$name"; then differ=$((differ + 1)); echo "differs: $name"; fi
done
echo "replay_identity: $total CSVs, $differ differ"
[ "$differ" = 0 ]
