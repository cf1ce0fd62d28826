#!/usr/bin/env bash
# The quickstart study, end to end: builds vitgraph (with libtorch, set up on
# first use), runs pipelines/quickstart.ron — a small ViT inference sweep,
# traced, analysed and reported with plots — writes the study's page
# (`vitgraph report`) and prints where the report and the page are.
# On a machine with an NVIDIA GPU the runs use it; otherwise the CPU.
# Extra arguments go to `vitgraph build` (e.g. `-p samples=200`).
# VITGRAPH_BIN_DIR=DIR runs the `vitgraph` (and `vitgraph-torch`) in DIR
# instead of building them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VITGRAPH_BIN_DIR:-}" ]; then
    vitgraph="$VITGRAPH_BIN_DIR/vitgraph"
else
    source scripts/env.sh
    # The dev profile builds dependencies optimized (Cargo.toml), and shares its
    # build with scripts/test.sh; use `cargo build --release` for large studies.
    build_vitgraph
    vitgraph="${CARGO_TARGET_DIR:-target}/debug/vitgraph"
fi
args=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    args+=(-p device=cuda)
fi
"$vitgraph" build quickstart "${args[@]}" "$@"
"$vitgraph" status quickstart "${args[@]}" "$@"
"$vitgraph" report quickstart "${args[@]}" "$@"
echo
echo "report: $(pwd)/out/quickstart_report/report.md"
echo "page:   $(pwd)/out/report.html (open it in a browser)"
