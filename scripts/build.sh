#!/usr/bin/env bash
# Build the book: set up, execute every chapter at quick scale (then the ledger page), write
# the HTML to _build/html/. Chapter wall times go to _build/timings.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m tools.book all "$@"
