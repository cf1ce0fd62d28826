#!/usr/bin/env bash
# The quickstart as a user runs it on a GPU host (scripts/quickstart.sh,
# which adds its GPU settings), built twice from empty workspaces, each
# build timed; then each build's report comparison and the paired
# half-widths. Needs a release vitgraph built with `--features torch` at
# $VITGRAPH_BIN_DIR (default .dev/bin) and PyTorch 2.11 (cu13) in python3.
#
#   scripts/gpu/quickstart_gpu.sh [extra `vitgraph build` arguments]
#
# Writes quickstart-gpu.tar.gz (each build's output, report and page) into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-quickstart-gpu}"
bin="${VITGRAPH_BIN_DIR:-$root/.dev/bin}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/host.txt"
for k in 1 2; do
    ws="/tmp/quickstart-gpu-$k"
    rm -rf "$ws" && mkdir -p "$ws/scripts" && cp -r pipelines "$ws/" && cp scripts/quickstart.sh "$ws/scripts/"
    start=$(date +%s.%N)
    (cd "$ws" && VITGRAPH_BIN_DIR="$bin" bash scripts/quickstart.sh "$@") >"$out/build$k.txt" 2>&1
    rc=$?
    echo "build $k: exit $rc after $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s" | tee -a "$out/times.txt"
    grep -E "built, |precision |fresh, " "$out/build$k.txt"
    python3 - "$ws/out/quickstart_report/compare.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    try:
        ratio, lo, hi = float(r["ratio"]), float(r["ci95_low"]), float(r["ci95_high"])
    except ValueError:
        continue
    print(f"  {r['model']} batch {r['batch']} / {r['baseline']}: {ratio:.4f} ±{100 * (hi - lo) / 2 / ratio:.2f} % "
          f"({r['reps_value']} processes, {r['interval']}, {r['verdict']}) {r['note']}")
PY
    mkdir -p "$out/build$k" && cp -r "$ws/out/quickstart_report" "$ws/out/quickstart_runs" "$ws/out/report.html" "$out/build$k/" 2>/dev/null
done
tar -czf "$out/quickstart-gpu.tar.gz" -C "$out" host.txt times.txt build1.txt build2.txt build1 build2
