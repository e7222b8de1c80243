#!/usr/bin/env bash
# Run every test: set up, unit tests of the companion package, every chapter executed at
# quick scale (one test each), the ledger page, the Colab-notebook sync and nbval checks,
# and the book built with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest "$@"
