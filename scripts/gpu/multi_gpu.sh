#!/usr/bin/env bash
# The study on a multi-GPU host (issue: "The study on a multi-GPU, two-socket
# host"): (1) the host as the tools see it; (2) isolation/sweep.ron (RQ1
# reduced: 12 configurations × 3 runs) built with `isolation: Host` and with
# `isolation: Gpu` — wall time, and whether each configuration's runs agree
# between the two; (3) where the host has two NUMA nodes, RQ4 reduced
# (3 models × batch {1, 32} × local/remote × 3 runs) with numactl binding.
#
#   scripts/gpu/multi_gpu.sh          # the above
#   scripts/gpu/multi_gpu.sh causes   # why Gpu runs differ: the sweep with
#       `isolation: Gpu` one at a time (pinned, alone), and Host against Gpu
#       with GPU preprocessing (no CPU-bound stage)
#
# Needs a release `vitgraph` and `vitgraph-torch` in .dev/bin, PyTorch, numactl.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-multi}"
work="${WORK:-$root/.repro-work/multi}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
rm -rf "$work"
mkdir -p "$out" "$work"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
{
    echo "== nproc $(nproc)"
    lscpu | grep -E "Model name|^CPU\(s\)|Socket|NUMA" || true
    for n in /sys/devices/system/node/node*; do echo "$(basename "$n"): $(cat "$n/cpulist")"; done
    nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader | while IFS=, read -r i name bus; do
        bus="$(echo "$bus" | tr -d ' ' | tr 'A-F' 'a-f')"
        echo "GPU $i $name bus $bus numa_node $(cat "/sys/bus/pci/devices/${bus: -12}/numa_node" 2>/dev/null)"
    done
    nvidia-smi topo -m 2>&1 | head -12
    command -v numactl >/dev/null && numactl --hardware
} 2>&1 | tee "$out/host.txt"

collect() { # WORKSPACE NAME
    python3 - "$1" >"$out/$2.json" <<'PY'
import json, pathlib, sys
runs = []
for f in sorted(pathlib.Path(sys.argv[1], "out").glob("*/*/results.json")):
    r = json.loads(f.read_text())
    c = r["config"]
    runs.append({"node": f.parent.name, "model": c["model"], "batch": c["batch"], "numa": c.get("numa"),
                 "median": r["latency_ms"]["median"], "throughput": r["throughput_images_per_s"],
                 "verdict": r["validity"]["verdict"], "cores": r["telemetry"]["host"]["cores"] if r["telemetry"].get("host") else None,
                 "gpu": r["env"]["record"]["before"].get("cuda_visible_devices")})
print(json.dumps(runs))
PY
}
sweep() { # NAME JOBS PARAMS…
    local name="$1" jobs="$2"
    shift 2
    local ws="$work/sweep-$name"
    mkdir -p "$ws/pipelines"
    cp scripts/gpu/isolation/sweep.ron "$ws/pipelines/"
    local start=$(date +%s%N)
    "$vitgraph" -C "$ws" build -j "$jobs" "$@" >"$out/sweep-$name.txt" 2>&1
    echo "sweep $name: exit $?, $(( ($(date +%s%N) - start) / 1000000 )) ms wall; $(tail -n 1 "$out/sweep-$name.txt")"
    collect "$ws" "sweep-$name"
}
if [[ "${1:-}" == causes ]]; then
    sweep Gpu-alone 1 -p isolation=Gpu
    sweep Host-gpupre 8 -p isolation=Host -p preprocess=Gpu
    sweep Gpu-gpupre 8 -p isolation=Gpu -p preprocess=Gpu
    # The Host sweep of the first call, as the book keeps it.
    [[ -f "$out/sweep-Host.json" ]] || cp book/results/multi-gpu-h100x2/sweep-Host.json "$out/" 2>/dev/null
    python3 scripts/gpu/isolation/summary.py "$out" Gpu-alone Host-gpupre Gpu-gpupre
    exit 0
fi
sweep Host 8 -p isolation=Host
sweep Gpu 8 -p isolation=Gpu

nodes=$(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)
if [[ "$nodes" -ge 2 ]]; then
    bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr -d ' ' | tr 'A-F' 'a-f')"
    local_node="$(cat "/sys/bus/pci/devices/${bus: -12}/numa_node" 2>/dev/null || echo 0)"
    [[ "$local_node" -lt 0 ]] && local_node=0
    remote_node=$(( local_node == 0 ? 1 : 0 ))
    ws="$work/rq4"
    mkdir -p "$ws/pipelines"
    cp pipelines/rq4.ron "$ws/pipelines/"
    start=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=0 "$vitgraph" -C "$ws" build rq4_runs -j 1 --gpus 0 \
        -p 'model=["vit32x6x384","vit16x12x768","vit32x18x1024"]' -p 'batch=[1,32]' \
        -p "numa=[$local_node,$remote_node]" -p "numa_local=$local_node" \
        -p repeat=3 -p max_repeat=3 -p samples=960 -p trace=None >"$out/rq4.txt" 2>&1
    echo "rq4 (local node $local_node, remote $remote_node): exit $?, $(( ($(date +%s%N) - start) / 1000000 )) ms wall; $(tail -n 1 "$out/rq4.txt")"
    collect "$ws" rq4
else
    echo "rq4: one NUMA node, no remote placement to measure"
fi
python3 scripts/gpu/isolation/summary.py "$out"
