#!/usr/bin/env bash
# Installs what GyroCompass needs on Debian 12, and nothing twice:
#   system   Debian's -dev packages for the C libraries (apt-get; run as root or with sudo)
#   python   tools/.venv with tools/requirements.txt (interop checks, peer filters, plots)
# Usage: tools/setup.sh [system] [python]    (no argument: both)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
want_system=0; want_python=0
[ $# -eq 0 ] && { want_system=1; want_python=1; }
for a in "$@"; do
  case "$a" in
    system) want_system=1 ;;
    python) want_python=1 ;;
    *) echo "setup.sh: unknown part '$a' (expected: system, python)" >&2; exit 2 ;;
  esac
done

# cyclonedds-dev: the ROS 2 wire (Cyclone DDS 0.10, as rmw_cyclonedds); libfastrtps-dev and g++: the Fast DDS
# peer the interop tests build; dpkg-dev, mmdebstrap and lintian: tools/package.sh and its test on a clean Debian root.
packages=(libzmq3-dev libyaml-dev libsqlite3-dev libzstd-dev liblz4-dev libncurses-dev cyclonedds-dev libsodium-dev pkg-config tmux
  chromium libfastrtps-dev g++ dpkg-dev mmdebstrap lintian zsh)

if [ "$want_system" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ! command -v python3 >/dev/null 2>&1; then missing+=(python3 python3-venv); fi
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  command -v swift >/dev/null 2>&1 || { echo "setup: the Swift toolchain (swift) is not on PATH" >&2; exit 1; }
fi

if [ "$want_python" = 1 ]; then
  venv="$here/.venv"
  stamp="$venv/.requirements.sha256"
  want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: preparing the Python venv in tools/.venv" >&2
    if ! python3 -m venv "$venv" 2>/dev/null; then
      # Debian's python3 ships venv separately.
      sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$here/requirements.txt"
    echo "$want" > "$stamp"
  fi
fi
