#!/usr/bin/env bash
# Writes a copy of a bag as if its IMU and/or magnetometer had been mounted with the given rotations
# (test data for mounting: `fusion-node replay OUT --mag-rotation ROT` turns it back). The rotation is
# done by fusion-node's own mount stage (invert: true), so the tool and the product share one table.
# Usage: tools/rotate_bag.sh IN OUT.mcap [--mag ROTATION] [--imu ROTATION] [--imu-topic T] [--mag-topic T]
#   ROTATION: a name (yaw_90, roll_180_yaw_90, ...) or ROLL,PITCH,YAW in degrees (URDF convention).
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
node="${FUSION_NODE:-$root/.build/release/fusion-node}"
[ $# -ge 2 ] || { sed -n '2,6p' "$0" >&2; exit 2; }
in="$1" out="$2"; shift 2
mag=none imu=none imu_topic=/imu/data_raw mag_topic=/imu/mag
while [ $# -gt 0 ]; do
  case "$1" in
    --mag) mag="$2"; shift 2 ;;
    --imu) imu="$2"; shift 2 ;;
    --imu-topic) imu_topic="$2"; shift 2 ;;
    --mag-topic) mag_topic="$2"; shift 2 ;;
    *) echo "rotate_bag.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$node" ] || { echo "rotate_bag.sh: no $node (swift build -c release, or set FUSION_NODE)" >&2; exit 1; }
yaml_rotation() { case "$1" in *,*) echo "[$1]" ;; *) echo "$1" ;; esac; }
config="$(mktemp --suffix=.yaml)"
trap 'rm -f "$config"' EXIT
cat > "$config" <<YAML
name: rotate-bag
stages:
  bag: {type: bag, path: '$in', imu_topic: '$imu_topic', mag_topic: '$mag_topic', progress: false}
  mount: {type: mount, inputs: [bag], invert: true, imu_rotation: $(yaml_rotation "$imu"), mag_rotation: $(yaml_rotation "$mag")}
  record: {type: record, inputs: [mount], path: '$out', topics: [imu/data_raw, imu/mag]}
YAML
"$node" --config "$config"
