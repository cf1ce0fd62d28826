#!/usr/bin/env bash
# Where between-run variance comes from (book: "Repetitions", section
# "Reproducibility on an H100"): `reproducibility/variance.ron` (6
# configurations × 5 interleaved runs) built from empty workspaces under
# several conditions, with the GPU's clocks, power and clock-event reasons
# sampled every 100 ms beside it.
#
#   scripts/gpu/variance.sh base pinned warm pinned-warm
#
# base: as the study runs today; pinned: vitgraph and its tasks bound to
# four cores of the GPU's NUMA node (`taskset`); warm: 200 warm-up batches
# instead of 20; pinned-warm: both. Results are packed into
# $OUT/variance.tar.gz; the last lines printed are each condition's
# half-widths. Needs what reproducibility.sh needs.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-variance}"
work="${WORK:-$root/.repro-work/variance}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
mkdir -p "$out" "$work/results"
results="$work/results"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f')"
node="$(cat "/sys/bus/pci/devices/0000${bus#00000000}/numa_node" 2>/dev/null || echo 0)"
[[ "$node" -lt 0 ]] && node=0
cpus="$(cat "/sys/devices/system/node/node$node/cpulist" 2>/dev/null || echo "0-$(( $(nproc) - 1 ))")"
first="${cpus%%[-,]*}"
pin="$((first + 2))-$((first + 5))"
{
    echo "GPU bus $bus, NUMA node $node, its cpus $cpus, pinned set $pin"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA|MHz"
} >"$results/host.txt" 2>&1
cat "$results/host.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 >"$results/smi.csv" 2>&1 &
smi=$!
for cond in "$@"; do
    ws="$work/$cond"
    rm -rf "$ws"
    mkdir -p "$ws/pipelines"
    cp scripts/gpu/reproducibility/variance.ron "$ws/pipelines/"
    params=()
    wrap=()
    case "$cond" in
        base) ;;
        pinned) wrap=(taskset -c "$pin") ;;
        warm) params=(-p warmup=200) ;;
        pinned-warm) wrap=(taskset -c "$pin"); params=(-p warmup=200) ;;
        *) echo "unknown condition $cond"; continue ;;
    esac
    echo "[$(date -u +%H:%M:%S.%N)] $cond: start" | tee -a "$results/marks.txt"
    "${wrap[@]}" "$vitgraph" -C "$ws" build -j 1 --json "${params[@]}" >"$results/$cond.jsonl" 2>"$results/$cond.err"
    echo "[$(date -u +%H:%M:%S.%N)] $cond: end, exit $?" | tee -a "$results/marks.txt"
    cp "$ws/out/v_report/table.csv" "$results/$cond-table.csv" 2>/dev/null
    python3 - "$ws" >"$results/$cond-runs.json" <<'PY'
import json, pathlib, sys
ws = pathlib.Path(sys.argv[1])
runs = []
for f in sorted((ws / "out" / "v").glob("*/results.json")):
    r = json.loads(f.read_text())
    runs.append({"node": f.parent.name, "median_ms": r["latency_ms"]["median"],
                 "forward_ms": r.get("stages_ms", {}).get("forward"),
                 "samples_ms": r.get("latency_samples_ms"),
                 "gpus": {k: v.get("gpus") for k, v in r.get("env", {}).get("record", {}).items()}})
json.dump(runs, sys.stdout, indent=1)
PY
    python3 - "$results/$cond-table.csv" "$cond" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    e = float(r["latency_ms.median"]); lo = float(r["latency_ms.median.ci95_low"]); hi = float(r["latency_ms.median.ci95_high"])
    print(f"{sys.argv[2]:12s} {r['model']:14s} graph={r['graph']:5s} {e:.4f} ms ±{100 * (hi - lo) / 2 / e:.1f} % ({r['reps']} runs)")
PY
done
kill "$smi" 2>/dev/null
tar czf "$out/variance.tar.gz" -C "$results" .
