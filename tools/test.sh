#!/usr/bin/env bash
# The whole test suite: install what is needed (system packages, Python venv), then the Swift tests,
# then the Python interoperability tests in tools/tests (if any). Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools/setup.sh
swift build --build-tests
swift test --skip-build
if compgen -G "tools/tests/test_*.py" >/dev/null; then
  tools/.venv/bin/python -m pytest -q tools/tests
fi
