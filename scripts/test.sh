#!/usr/bin/env bash
# Runs vitgraph's whole test suite, installing what it needs first.
# Usage: scripts/test.sh            (from anywhere inside the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo test $VITGRAPH_FEATURES --no-fail-fast "$@"
