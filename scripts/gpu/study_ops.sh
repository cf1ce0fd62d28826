#!/usr/bin/env bash
# The operator studies `ops` (seed 003) and `night_sweep` (seed 004) on a GPU
# host with PyTorch 2.11 (cu130) installed, using a release vitgraph built with
# `--features torch` at .dev/bin/vitgraph (or $VITGRAPH). Runs at the reduced
# size of scripts/gpu/study_ops.params (61 OpBench configurations, two runs each)
# unless STUDY_OPS_FULL=1, in a scratch workspace holding only these two
# pipelines, then copies every report, every node's results.json and the logs
# of failed nodes into $OUT:
#
#   $OUT/reports/<report stage>/{report.md,table.csv,table.parquet,compare.csv,plots/*}
#   $OUT/results.tar.gz   out/<stage>/<node>/results.json of every OpBench node
#   $OUT/build.jsonl      the build's events (`build --json`), with per-node times
#   $OUT/logs/            logs of nodes that failed
#   $OUT/summary.txt      nodes per stage, built / failed, mean seconds per node
#
#   scripts/gpu/study_ops.sh                 # reduced size
#   STUDY_OPS_FULL=1 scripts/gpu/study_ops.sh  # the seeds' full configuration lists
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${VITGRAPH:-$repo/.dev/bin/vitgraph}"
out="${OUT:-/tmp/vitgraph-study-ops}"
limit="${STUDY_OPS_TIMEOUT:-540}"
if [[ ! -x "$bin" ]]; then
    echo "no vitgraph binary at $bin: build it with \`cargo build --release --features torch\` and copy it there, or set VITGRAPH" >&2
    exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
mkdir -p "$out"

torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')" || {
    echo "PyTorch is not importable by python3: the binary loads libtorch_cuda.so from its wheel" >&2
    exit 2
}
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
export VITGRAPH_NO_PROGRESS=1 NO_COLOR=1

params=()
# STUDY_OPS_GPUS=0,1 picks the GPUs (default: those `nvidia-smi -L` lists).
gpus=()
[[ -n "${STUDY_OPS_GPUS:-}" ]] && gpus=(--gpus "$STUDY_OPS_GPUS")
if [[ "${STUDY_OPS_FULL:-0}" != 1 ]]; then
    while IFS= read -r line; do
        line="${line%%#*}"
        line="$(echo "$line" | xargs)"
        [[ -n "$line" ]] && params+=(-p "$line")
    done <"$repo/scripts/gpu/study_ops.params"
fi

ws="$(mktemp -d /tmp/vitgraph-study-ops-ws.XXXXXX)"
mkdir -p "$ws/pipelines"
cp "$repo/pipelines/ops.ron" "$repo/pipelines/night_sweep.ron" "$ws/pipelines/"
cd "$ws" || exit 2

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv >"$out/nvidia-smi-before.csv" 2>&1
"$bin" ls ops night_sweep "${params[@]}" >"$out/nodes.txt"
echo "planned: $("$bin" build -n ops night_sweep "${params[@]}" 2>&1 | tail -n 1)"
start=$(date +%s)
# SIGINT on time-out: vitgraph stops scheduling, ends the running node and
# records what finished, so the reports of completed experiments still come out.
timeout -s INT "$limit" "$bin" build ops night_sweep -k --json "${gpus[@]}" "${params[@]}" >"$out/build.jsonl" 2>"$out/build.stderr"
status=$?
echo "build exited $status after $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv >"$out/nvidia-smi-after.csv" 2>&1

# Reports: every stage whose name ends in _report, and ops_by_*.
mkdir -p "$out/reports"
for dir in out/*_report out/ops_by_*; do
    [[ -d "$dir" ]] || continue
    stage="$(basename "$dir")"
    cp -rL "$dir/$stage" "$out/reports/$stage" 2>/dev/null || cp -rL "$dir" "$out/reports/$stage"
done
[[ -d out ]] && find -L out -name results.json -print0 | tar -czf "$out/results.tar.gz" --null -T - --dereference
if [[ -d cache/logs ]]; then
    python3 - "$out/build.jsonl" <<'EOF' | while IFS= read -r log; do
import json, sys
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == "failed" and e.get("log"):
        print(e["log"])
EOF
        mkdir -p "$out/logs"
        cp "$log" "$out/logs/$(echo "$log" | sed 's|.*/cache/logs/||; s|/|__|g')" 2>/dev/null
    done
fi

python3 - "$out/build.jsonl" <<'EOF' | tee "$out/summary.txt"
import collections, json, sys
stages = collections.defaultdict(lambda: {"built": 0, "failed": 0, "cached": 0, "skipped": 0, "ms": 0})
done = None
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    kind = e.get("event")
    if kind == "done":
        done = e
    if kind not in ("finished", "failed", "cached", "skipped"):
        continue
    s = stages[e["node"].split("[")[0]]
    s[{"finished": "built"}.get(kind, kind)] += 1
    s["ms"] += e.get("duration_ms") or 0
print(f"{'stage':28} {'built':>6} {'failed':>6} {'cached':>6} {'skipped':>7} {'s/node':>7}")
for name in sorted(stages):
    s = stages[name]
    ran = s["built"] + s["failed"]
    per = s["ms"] / ran / 1e3 if ran else 0.0
    print(f"{name:28} {s['built']:6} {s['failed']:6} {s['cached']:6} {s['skipped']:7} {per:7.2f}")
if done:
    print(f"done: {done.get('built')} built, {done.get('cached')} cached, {done.get('failed')} failed, "
          f"{done.get('skipped')} skipped in {done.get('duration_ms', 0) / 1e3:.1f} s")
EOF
echo "reports in $out/reports: $(ls "$out/reports" | tr '\n' ' ')"
exit "$status"
