#!/usr/bin/env bash
# The whole test suite: install what is needed (system packages, Python venv), then the Swift tests,
# then the Python interoperability tests in tools/tests (if any). Exits non-zero on any failure.
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
cd "$root"
tools/setup.sh
# The tree stays formatted (.swift-format: 120 columns); `swift-format format -i -r Sources Tests` applies it.
swift-format lint --strict --recursive Sources Tests Package.swift
# DDS tests (Swift and Python) discover each other on 127.0.0.1 only: no multicast needed, nothing leaves the host.
export CYCLONEDDS_URI="${CYCLONEDDS_URI:-file://$root/Pipelines/cyclonedds-loopback.xml}"
swift build --build-tests
swift test --skip-build
if compgen -G "tools/tests/test_*.py" >/dev/null; then
  # A test that hangs fails after 5 minutes instead of holding the run.
  tools/.venv/bin/python -m pytest -q -o timeout=300 tools/tests
fi
# The fuzz harnesses, 5 s each from their seeds and past crashes (a longer run: tools/fuzz.sh 600).
tools/fuzz.sh 5
