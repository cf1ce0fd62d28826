#!/usr/bin/env bash
# Where a `Vit` graph: Cuda forward pass stands against what CUDA-graph replay
# itself costs on this GPU (book/src/results.md, "CUDA graphs: the floor"):
# ROUNDS rounds of `Vit` with graph: Cuda (bf16, batches on the GPU side, 1, 8
# and 64, each traced apart for its kernel floor), then graph_floor.py (graphs
# of N small kernels; timm eager captured by hand with torch.cuda.CUDAGraph).
#
#   RUN_TASK=.dev/bin/run_task OUT=/tmp/f scripts/gpu/graph_floor.sh
#   python3 scripts/gpu/summarize_floor.py /tmp/f
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
rounds="${ROUNDS:-3}"
models=(vit32x6x384 vit16x12x768 vit32x18x1024)
batches=(1 8 64)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$out/nvidia-smi.csv" 2>&1
for r in $(seq 1 "$rounds"); do
    for m in "${models[@]}"; do
        for b in "${batches[@]}"; do
            n=$(iters "$b")
            task "vit_${m}_b${b}_Cuda_r$r" vit "(model: \"$m\", batch: $b, dtype: \"bf16\", warmup: 30, samples: $((b * n)), preprocess: Gpu, graph: Cuda, trace: Cupti, trace_batches: 30)"
        done
    done
    echo "vit round $r done at $(date +%T)"
done
for f in "$runs"/vit_*/results.json; do
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r.pop("latency_samples_ms",None); r.pop("env",None); r["run"]=sys.argv[2]; print(json.dumps(r))' "$f" "$(basename "$(dirname "$f")")"
done >"$out/vit.jsonl"
timeout 400 python3 "$here/graph_floor.py" --rounds "$rounds" --out "$out/floor.json" >"$out/floor.log" 2>&1 || { echo "graph_floor.py failed"; tail -20 "$out/floor.log"; }
grep fits "$out/floor.log"
ls -la "$out"
