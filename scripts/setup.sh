#!/usr/bin/env bash
# Set up .venv for building and testing the book on a fresh machine (Python 3.10+, CPU only).
# Installs the pinned versions of requirements-ci.txt (the CPU torch wheel among them), then
# the companion package itself, editable. Safe to run again: pip skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements-ci.txt
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -m pip check
