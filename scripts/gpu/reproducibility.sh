#!/usr/bin/env bash
# The reproducibility benchmark (book: "Repetitions", section
# "Reproducibility on an H100"): the same 12-configuration sweep of `Vit` at
# batch 1 built from empty workspaces, as it was (one run per configuration,
# `reproducibility/sweep.ron`) and with repetitions and precision targets
# (`reproducibility/repeated.ron`), twice each.
#
#   scripts/gpu/reproducibility.sh once-1 once-2 repeated-1 repeated-2
#
# Each phase builds in $WORK/<phase> (default .repro-work/, kept between
# device calls while the machine is warm). A phase cut off by the time
# budget (BUDGET_S seconds for the whole call, default 560) is interrupted
# like a Ctrl-C and resumes where it stopped when named again. What each
# phase recorded (build events, status, the report's table, every run's
# median) is packed into $OUT/repro.tar.gz for
# `scripts/gpu/reproducibility/summarize.py`.
#
# Needs a vitgraph built with `--features torch` at $VITGRAPH (default
# .dev/bin/vitgraph, vitgraph-torch beside it) and PyTorch 2.11 (cu13) in
# python3, whose libraries are libtorch.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-repro}"
work="${WORK:-$root/.repro-work}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
deadline=$(( $(date +%s) + ${BUDGET_S:-560} ))
mkdir -p "$out" "$work/results"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
results="$work/results"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
} >>"$results/host.txt" 2>&1

for phase in "$@"; do
    case "$phase" in
        once-*) file=sweep.ron ;;
        repeated-*) file=repeated.ron ;;
        *) echo "unknown phase $phase (once-N or repeated-N)"; exit 2 ;;
    esac
    seed="${phase##*-}"
    ws="$work/$phase"
    mkdir -p "$ws/pipelines"
    cp "scripts/gpu/reproducibility/$file" "$ws/pipelines/"
    left=$(( deadline - $(date +%s) ))
    if (( left < 30 )); then
        echo "$phase: no time left in this call"
        break
    fi
    echo "[$(date -u +%H:%M:%S)] $phase: building (at most ${left} s)"
    timeout --signal=INT --kill-after=20 "$left" \
        "$vitgraph" -C "$ws" build -j 1 --json --interleave-seed "$seed" \
        >>"$results/$phase.jsonl" 2>>"$results/$phase.err"
    echo "[$(date -u +%H:%M:%S)] $phase: build exited $?"
    "$vitgraph" -C "$ws" status --json >"$results/$phase-status.json" 2>>"$results/$phase.err"
    "$vitgraph" -C "$ws" status 2>&1 | tail -n 25 | tee "$results/$phase-status.txt"
    cp "$ws/out/sweep_report/table.csv" "$results/$phase-table.csv" 2>/dev/null
    python3 - "$ws" >"$results/$phase-runs.json" <<'PY'
import json, pathlib, sys
ws = pathlib.Path(sys.argv[1])
runs = []
for f in sorted((ws / "out").glob("*/*/results.json")):
    r = json.loads(f.read_text())
    runs.append({"stage": f.parent.parent.name, "node": f.parent.name,
                 "median_ms": r["latency_ms"]["median"],
                 "throughput": r.get("throughput_images_per_s")})
json.dump(runs, sys.stdout, indent=1)
PY
done
tar czf "$out/repro.tar.gz" -C "$results" .
ls -la "$results"
