#!/usr/bin/env bash
# Set up .venv for building and testing the book on a fresh machine (Python 3.10+, CPU only).
# Installs the pinned versions of requirements-ci.txt (the CPU torch wheel among them), then
# the companion package itself, editable, and the browser the page test drives (Debian's chromium
# and chromium-driver, from apt when run as root). Safe to run again: pip and apt skip what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements-ci.txt
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -m pip check
if ! command -v chromedriver > /dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver > /dev/null
  else
    echo "tests/test_browser.py needs Chromium and its driver: sudo apt-get install chromium chromium-driver" >&2
  fi
fi
