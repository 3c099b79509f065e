#!/usr/bin/env bash
# The main job: install what is needed, build fusion-node (release) and run the default pipeline
# (the seeded simulator through online calibration and fusion) for a few seconds.
# Usage: tools/run.sh [SECONDS]   (default 5)
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
cd "$root"
tools/setup.sh system
swift build -c release --product fusion-node >&2
exec "$(swift build -c release --show-bin-path)/fusion-node" --duration "${1:-5}"
