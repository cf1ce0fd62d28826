#!/usr/bin/env bash
# RQ3's torch.compile modes measured together (book: "RQ3: torch.compile"):
# pipelines/rq3.ron's `rq3_together_report` built from an empty workspace
# with a lean release vitgraph at $VITGRAPH (default .dev/bin/vitgraph; no
# libtorch needed: `rq3_together` is a measuring `Command` running
# examples/vit_together.py through the measurement helper).
#
#   scripts/gpu/rq3_together.sh -p together_models=[vit16x6x384] \
#       -p together_modes=[none,default,reduce-overhead] -p dtype=bf16
#
# Extra arguments go to `vitgraph build` and `status`. Stopped like a
# Ctrl-C after BUDGET_S seconds (default 520): what finished stays. Writes
# the report's files, `status`, each node's A/A line and the build's
# events into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-rq3-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/rq3-together-ws}"
mkdir -p "$out" "$ws/pipelines" "$ws/examples" "$ws/python/vitgraph"
cp pipelines/rq3.ron "$ws/pipelines/"
cp examples/vit_together.py examples/vit_compile_bench.py "$ws/examples/"
cp python/vitgraph/*.py "$ws/python/vitgraph/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv
    nproc
    python3 -c 'import torch; print("torch", torch.__version__)'
} | tee "$out/host.txt"
start=$(date +%s)
timeout --signal=INT --kill-after=20 "${BUDGET_S:-520}" \
    "$vitgraph" -C "$ws" build rq3_together_report -j 1 --json "$@" >"$ws/build.jsonl" 2>"$ws/build.err"
echo "build exited $? after $(( $(date +%s) - start )) s" | tee -a "$out/host.txt"
tail -n 5 "$ws/build.err"
"$vitgraph" -C "$ws" status rq3_together -v "$@" >"$out/status.txt" 2>&1
for id in $("$vitgraph" -C "$ws" status rq3_together --json "$@" | python3 -c 'import json,sys; print(" ".join(n["id"] for n in json.load(sys.stdin)["nodes"]))'); do
    "$vitgraph" -C "$ws" show "$id" "$@" | grep -E '^A/A check' | sed "s/^/$id  /"
done | tee "$out/aa.txt"
cp "$ws"/out/rq3_together_report/{compare.csv,table.csv,report.md} "$out/" 2>/dev/null
cp "$ws/build.jsonl" "$ws/build.err" "$out/" 2>/dev/null
cat "$out/compare.csv" 2>/dev/null
