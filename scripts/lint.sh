#!/usr/bin/env bash
# The lints CI runs before the tests: formatting, and clippy with every
# warning an error, over every target (with libtorch and S3, as the tests build).
# Usage: scripts/lint.sh   (from anywhere inside the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo fmt --all -- --check
cargo clippy --all-targets $VITGRAPH_TEST_FEATURES -- -D warnings
