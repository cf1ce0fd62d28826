#!/usr/bin/env bash
# The quickstart's comparisons on one GPU, measured together by the `Vit`
# task and apart (book: "Repetitions", "A `Vit` stage measured together"):
# scripts/gpu/vit_together/study.ron built from an empty workspace, each
# stage timed on its own, and the quickstart itself (`-p device=cuda`, as
# scripts/quickstart.sh builds it on a GPU) for what a user gets today.
# Needs a release vitgraph built with `--features torch` at $VITGRAPH
# (default .dev/bin/vitgraph) and PyTorch 2.11 (cu13) in python3.
#
#   scripts/gpu/vit_together.sh [-p max_repeat=10] …
#   ONLY=together WORK=/tmp/ws2 scripts/gpu/vit_together.sh …   (the together build alone)
#
# Writes host.txt, each build's events and errors, the reports' tables and
# comparisons, every run's results and summary.md into $OUT/vit_together.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-vit-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/vit-together-ws}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out" "$ws/pipelines" "$ws-quickstart/pipelines"
cp scripts/gpu/vit_together/study.ron "$ws/pipelines/"
cp pipelines/quickstart.ron "$ws-quickstart/pipelines/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
} | tee "$ws/host.txt"
# build NAME DIR BUDGET TARGETS… -- ARGS…: one timed build, stopped like a
# Ctrl-C after BUDGET seconds (what finished stays).
build() {
    local name="$1" dir="$2" budget="$3"
    shift 3
    echo "[$(date -u +%H:%M:%S)] $name"
    local start
    start=$(date +%s.%N)
    timeout --signal=INT --kill-after=20 "$budget" "$vitgraph" -C "$dir" build -j 1 --json "$@" \
        >"$ws/$name.jsonl" 2>"$ws/$name.err"
    local rc=$?
    local took
    took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    echo "$name exit $rc after $took s" | tee -a "$ws/times.txt"
    tail -n 2 "$ws/$name.err"
}
build together "$ws" 240 together_batch together_model "$@"
if [ "${ONLY:-}" != together ]; then
    build apart "$ws" 300 apart_batch apart_model "$@"
    build quickstart "$ws-quickstart" 300 quickstart_report -p device=cuda
fi
cp -r "$ws-quickstart/out/quickstart_report" "$ws/out/" 2>/dev/null
python3 scripts/gpu/vit_together/summarize.py "$ws" | tee "$ws/summary.md"
tar -czf "$out/$(basename "$ws").tar.gz" -C "$ws" host.txt times.txt summary.md \
    together.jsonl together.err apart.jsonl apart.err quickstart.jsonl quickstart.err out 2>/dev/null
ls -la "$out"
