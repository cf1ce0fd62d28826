#!/usr/bin/env bash
# The GPU telemetry of `Vit` runs on a real GPU (book: "Telemetry and
# verdicts"): (1) a long batch-1 run's NVML readings against nvidia-smi
# sampled beside it; (2) a longer run with a bf16 matmul loop started on
# the same GPU while it runs — it must come out `intruded`; (3) the
# sampler's cost inside runs: `VITGRAPH_TELEMETRY_AB=25` pauses it in every
# other block of 25 batches, REPS forced builds; (4) the same between runs:
# PAIRS builds alternating with the sampler on and off.
#
#   scripts/gpu/telemetry.sh [PAIRS] [REPS]   # defaults 6 and 6
#
# Needs a release `vitgraph` and `vitgraph-torch` in .dev/bin (or $VITGRAPH)
# and PyTorch. Writes $OUT/telemetry.tar.gz; the summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
pairs="${1:-6}"
reps="${2:-6}"
out="${OUT:-/tmp/vitgraph-telemetry}"
work="${WORK:-$root/.repro-work/telemetry}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
results="$work/results"
rm -rf "$work"
mkdir -p "$out" "$results"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$results/host.txt" 2>&1
cat "$results/host.txt"

workspace() { # NAME PIPELINE
    rm -rf "$work/$1"
    mkdir -p "$work/$1/pipelines"
    cp "scripts/gpu/telemetry/$2" "$work/$1/pipelines/"
}
smi_start() { # FILE
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,clocks_event_reasons.active \
        --format=csv,noheader,nounits -lms 50 >"$1" 2>&1 &
    smi=$!
}

# 1. Alone, nvidia-smi beside it.
workspace alone one.ron
smi_start "$results/alone-smi.csv"
"$vitgraph" -C "$work/alone" build --json >"$results/alone.jsonl" 2>"$results/alone.err"
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
cp "$work/alone/out/long/results.json" "$results/alone.json"

# 2. An intruder: a bf16 matmul loop on the same GPU from 1.5 s after the start, for 4 s.
workspace intruded one.ron
smi_start "$results/intruded-smi.csv"
"$vitgraph" -C "$work/intruded" build --json -p samples=12000 >"$results/intruded.jsonl" 2>"$results/intruded.err" &
build=$!
sleep 1.5
python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 4
while time.time() < end:
    b = a @ a
torch.cuda.synchronize()
PY
intruder=$!
wait "$build"
wait "$intruder"
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
cp "$work/intruded/out/long/results.json" "$results/intruded.json"
"$vitgraph" -C "$work/intruded" status -p samples=12000 >"$results/intruded-status.txt" 2>&1

# 3. The sampler's cost inside runs: paused in every other block of 25 batches.
workspace ab pair.ron
for i in $(seq 1 "$reps"); do
    VITGRAPH_TELEMETRY_AB=25 "$vitgraph" -C "$work/ab" build --force -p samples=1000 >/dev/null 2>"$results/ab-$i.err"
    for g in none cuda; do
        cp "$work/ab/out/v/graph=$g/results.json" "$results/ab-$g-$i.json"
    done
done

# 4. The sampler's cost between runs: on and off, alternating, each build forced.
workspace on pair.ron
workspace off pair.ron
for i in $(seq 1 "$pairs"); do
    for cond in on off; do
        if [[ "$cond" == off ]]; then export VITGRAPH_TELEMETRY=0; else unset VITGRAPH_TELEMETRY; fi
        "$vitgraph" -C "$work/$cond" build --force >/dev/null 2>"$results/$cond-$i.err"
        for g in none cuda; do
            cp "$work/$cond/out/v/graph=$g/results.json" "$results/$cond-$g-$i.json"
        done
    done
done
unset VITGRAPH_TELEMETRY
tar -czf "$out/telemetry.tar.gz" -C "$work" results
python3 scripts/gpu/telemetry/summarize.py "$results" "$pairs" "$reps"
