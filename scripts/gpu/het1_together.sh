#!/usr/bin/env bash
# HET1 (pipelines/night_sweep.ron) with its four patterns measured together,
# built from an empty workspace on one GPU: the report's paired ratios to
# `uniform` and each member's time. Needs a release vitgraph built with
# `--features torch` at $VITGRAPH_BIN_DIR (default .dev/bin) and PyTorch
# 2.11 (cu13) in python3. Extra arguments go to `vitgraph build`.
#
#   scripts/gpu/het1_together.sh [-p repeat=5 …]
#
# Writes het1.tar.gz (the report, every process's results.json) into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vitgraph-het1}"
bin="${VITGRAPH_BIN_DIR:-$(pwd)/.dev/bin}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
ws=/tmp/het1-together
rm -rf "$ws" && mkdir -p "$ws" "$out" && cp -r pipelines "$ws/"
start=$(date +%s.%N)
(cd "$ws" && "$bin/vitgraph" build night_het1_report "$@") 2>&1 | tail -n 5
echo "built in $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s"
echo "compare.csv:"
cat "$ws/out/night_het1_report/compare.csv"
tar -czf "$out/het1.tar.gz" -C "$ws/out" night_het1_report night_het1_hetero
