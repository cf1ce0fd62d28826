#!/usr/bin/env bash
# Measured together against measured apart on one GPU (book: "Repetitions",
# "Measured together on an H100"): scripts/gpu/together/study.ron built from
# an empty workspace with a lean release vitgraph at $VITGRAPH (default
# .dev/bin/vitgraph; no libtorch needed: the stages are measuring
# `Command`s running examples/vit_together.py), then summarized.
#
#   scripts/gpu/together.sh [-p reps=10] [-p batches=300]
#   scripts/gpu/together.sh sweep [-p reps=10]
#
# Writes the build's events, both reports' tables and comparisons, every
# run's results and the summary into $OUT/together.tar.gz. With `sweep`,
# builds together/sweep.ron twice from empty workspaces (interleave seeds 1
# and 2) and summarizes both with summarize_sweep.py into $OUT/sweep.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/together-ws}"
setup() {
    mkdir -p "$1/pipelines" "$1/examples" "$1/python/vitgraph"
    cp "scripts/gpu/together/$2" "$1/pipelines/"
    cp examples/vit_together.py examples/vit_compile_bench.py "$1/examples/"
    cp python/vitgraph/*.py "$1/python/vitgraph/"
}
if [ "${1:-}" = sweep ]; then
    shift
    mkdir -p "$out"
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/host.txt"
    for k in 1 2; do
        setup "$ws-sweep$k" sweep.ron
        echo "[$(date -u +%H:%M:%S)] sweep build $k"
        timeout --signal=INT --kill-after=20 "${BUDGET_S:-250}" \
            "$vitgraph" -C "$ws-sweep$k" build -j 1 --json --interleave-seed "$k" "$@" \
            >"$ws-sweep$k/build.jsonl" 2>"$ws-sweep$k/build.err"
        echo "[$(date -u +%H:%M:%S)] build exited $?"; tail -n 3 "$ws-sweep$k/build.err"
    done
    python3 scripts/gpu/together/summarize_sweep.py "$ws-sweep1" "$ws-sweep2" | tee "$out/sweep.md"
    tar -czf "$out/sweep.tar.gz" -C / "${ws#/}-sweep1/out/together" "${ws#/}-sweep2/out/together" \
        "${ws#/}-sweep1/build.jsonl" "${ws#/}-sweep2/build.jsonl" 2>/dev/null
    exit 0
fi
mkdir -p "$out" "$ws/pipelines" "$ws/examples" "$ws/python/vitgraph"
cp scripts/gpu/together/study.ron "$ws/pipelines/"
cp examples/vit_together.py examples/vit_compile_bench.py "$ws/examples/"
cp python/vitgraph/*.py "$ws/python/vitgraph/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
    python3 -c 'import torch; print("torch", torch.__version__)'
} | tee "$ws/host.txt"
echo "[$(date -u +%H:%M:%S)] building"
start=$(date +%s)
# Stopped like a Ctrl-C after BUDGET_S seconds (default 500): what finished stays.
timeout --signal=INT --kill-after=20 "${BUDGET_S:-500}" \
    "$vitgraph" -C "$ws" build -j 1 --json "$@" >"$ws/build.jsonl" 2>"$ws/build.err"
echo "[$(date -u +%H:%M:%S)] build exited $? after $(( $(date +%s) - start )) s"
tail -n 5 "$ws/build.err"
"$vitgraph" -C "$ws" status 2>&1 | tail -n 5
for r in together_report apart_report; do
    echo "== $r"; cat "$ws/out/$r/compare.csv" 2>/dev/null
done
python3 scripts/gpu/together/summarize.py "$ws" "$ws/build.jsonl" | tee "$ws/summary.md"
tar -czf "$out/together.tar.gz" -C "$ws" host.txt build.jsonl build.err summary.md summary.json out/together_report out/apart_report out/together out/apart 2>/dev/null
