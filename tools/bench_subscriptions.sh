#!/usr/bin/env bash
# What a peer flooding a publish endpoint with subscriptions costs fusion-node's resident memory.
#
# Runs the default pipeline (simulator, publish sink on tcp) for 25 s per case. After 4 s a pyzmq
# subscriber (send queue unlimited) asks for N random 100-byte prefixes and holds them for 8 s; the
# case prints the process's resident size before and after, and the publish sink's refusal line.
# N=0 is the baseline (the same run, no peer). Cases alternate between the binaries given.
#
# Usage: tools/bench_subscriptions.sh [-n N] [-r ROUNDS] NODE [NODE ...]
#   e.g. tools/bench_subscriptions.sh -n 20000 -r 3 /tmp/old/fusion-node .build/release/fusion-node
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
n=20000 rounds=1
while getopts "n:r:" o; do
  case $o in
    n) n=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) echo "usage: $0 [-n N] [-r ROUNDS] NODE [NODE ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n N] [-r ROUNDS] NODE [NODE ...]" >&2; exit 2; }
python="$root/tools/.venv/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

one_case() {  # NODE COUNT
  local node=$1 count=$2 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  PUBLISH=tcp://127.0.0.1:$port DURATION=25 "$node" --config "$root/Pipelines/default.yaml" \
    >/dev/null 2>"$work/err" &
  local pid=$!
  sleep 4
  local before after
  before=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  "$python" - "$port" "$count" <<'PY'
import os, sys, time, zmq
port, count = sys.argv[1], int(sys.argv[2])
s = zmq.Context().socket(zmq.SUB)
s.setsockopt(zmq.SNDHWM, 0)  # every subscription leaves; none dropped at the sender
s.connect(f"tcp://127.0.0.1:{port}")
time.sleep(0.5)
for _ in range(count):
    s.setsockopt(zmq.SUBSCRIBE, os.urandom(100))
time.sleep(8)
PY
  after=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  wait "$pid" || true
  local refused
  refused=$(grep -o "[0-9]* subscription(s) refused and [0-9]* connection(s) cut" "$work/err" || echo "none refused")
  printf '%s\tN=%s\tRSS %s -> %s kB (+%s kB)\t%s\n' "$node" "$count" "$before" "$after" $((after - before)) "$refused"
}

for _ in $(seq "$rounds"); do
  for node in "$@"; do
    one_case "$node" 0
    one_case "$node" "$n"
  done
done
