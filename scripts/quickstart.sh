#!/usr/bin/env bash
# The quickstart study, end to end: builds vitgraph (with libtorch, set up on
# first use), runs pipelines/quickstart.ron — a small ViT inference sweep,
# traced, analysed and reported with plots — writes the study's page
# (`vitgraph report`) and prints where the report and the page are.
# On a machine with an NVIDIA GPU the runs use it (with the GPU settings
# below); otherwise the CPU.
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
    # On a GPU the study as GPUs serve it: bf16, each batch resized on the
    # GPU, 400 images a configuration, repetitions until every paired ratio
    # is known within ±2 % (at most 10 processes). Then batch 1 and batch 8
    # both wait on the host's kernel launches, so the process's speed band
    # cancels in their ratio (book: "The quickstart on a GPU"); in f32 with
    # CPU preprocessing it does not.
    args+=(-p device=cuda -p dtype=bf16 -p preprocess=Gpu -p samples=400
        -p ci_rel=0.02 -p max_repeat=10)
fi
"$vitgraph" build quickstart "${args[@]}" "$@"
"$vitgraph" status quickstart "${args[@]}" "$@"
"$vitgraph" report quickstart "${args[@]}" "$@"
echo
echo "report: $(pwd)/out/quickstart_report/report.md"
echo "page:   $(pwd)/out/report.html (open it in a browser)"
