#!/usr/bin/env bash
# The quickstart study, end to end: builds vitgraph, runs pipelines/quickstart.ron
# (experiments, analyses and a report), and prints where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release $VITGRAPH_FEATURES
./target/release/vitgraph build quickstart "$@"
./target/release/vitgraph status quickstart
echo
echo "report: $(pwd)/out/quickstart_report/quickstart_report/"
