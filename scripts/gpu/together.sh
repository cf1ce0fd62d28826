#!/usr/bin/env bash
# Measured together against measured apart on one GPU (book: "Repetitions",
# "Measured together on an H100"): scripts/gpu/together/study.ron built from
# an empty workspace with a lean release vitgraph at $VITGRAPH (default
# .dev/bin/vitgraph; no libtorch needed: the stages are measuring
# `Command`s running examples/vit_together.py), then summarized.
#
#   scripts/gpu/together.sh [-p reps=10] [-p batches=300]
#
# Writes the build's events, both reports' tables and comparisons, every
# run's results and the summary into $OUT/together.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/together-ws}"
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
