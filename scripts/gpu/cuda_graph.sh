#!/usr/bin/env bash
# `Vit` with and without `graph: Cuda` beside timm (eager, torch.compile
# default and reduce-overhead), bf16, batches already preprocessed on the GPU
# side, for vit32x6x384, vit16x12x768 and vit32x18x1024 at batch 1, 8 and 64.
# Each `Vit` run is traced (`trace: Cupti`, 30 batches apart from the timed
# ones), so its kernel-time floor comes from the same run.
#
# PART says what one call does (each fits a 10-minute device command):
#   vit       the GPU tests of the CUDA-graph shim, then ROUNDS alternating
#             rounds of every `Vit` run (graph None, then Cuda) and timm eager
#   default   timm under torch.compile(mode="default"), every model and batch
#   reduce-overhead   likewise with mode="reduce-overhead"
#
#   RUN_TASK=.dev/bin/run_task VIT_TORCH_TEST=.dev/bin/vit_torch OUT=/tmp/g \
#       PART=vit scripts/gpu/cuda_graph.sh
#   python3 scripts/gpu/summarize_graph.py /tmp/g      # the table
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
part="${PART:-vit}"
rounds="${ROUNDS:-3}"
models=(vit32x6x384 vit16x12x768 vit32x18x1024)
batches=(1 8 64)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$out/nvidia-smi-$part.csv" 2>&1

# jsonl FILE…: each JSON file on one line.
jsonl() { python3 -c 'import json, sys; [print(json.dumps(json.load(open(f)))) for f in sys.argv[1:]]' "$@"; }


if [[ "$part" == vit ]]; then
    if [[ -n "${VIT_TORCH_TEST:-}" ]]; then
        echo "### GPU tests of graph: Cuda"
        VITGRAPH_REQUIRE_GPU=1 "$VIT_TORCH_TEST" --test-threads 1 --nocapture cuda_graph graph_cuda 2>&1 | tee "$out/gpu-tests.txt" | grep -E "^test |relative error|test result|panicked"
    fi
    for r in $(seq 1 "$rounds"); do
        for m in "${models[@]}"; do
            for b in "${batches[@]}"; do
                n=$(iters "$b")
                for g in None Cuda; do
                    name="vit_${m}_b${b}_${g}_r$r"
                    task "$name" vit "(model: \"$m\", batch: $b, dtype: \"bf16\", warmup: 30, samples: $((b * n)), preprocess: Gpu, graph: $g, trace: Cupti, trace_batches: 30)"
                done
            done
        done
        for m in "${models[@]}"; do
            timeout 300 python3 "$here/graph_ref.py" --model "$m" --mode eager --rounds 1 --out "$runs/timm_${m}_eager_r$r.json" >>"$out/timm.log" 2>&1 || echo "timm eager $m round $r failed"
        done
        echo "round $r done at $(date +%T)"
    done
    # Results back: one folder per run is too many files; one JSON lines file.
    for f in "$runs"/vit_*/results.json; do
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r.pop("latency_samples_ms",None); r["run"]=sys.argv[2]; print(json.dumps(r))' "$f" "$(basename "$(dirname "$f")")"
    done >"$out/vit.jsonl"
    grep -h "" "$runs"/vit_*/log.txt | grep -iE "error|fail" | sort | uniq -c | head -20
    jsonl "$runs"/timm_*_eager_r*.json >"$out/timm-eager.jsonl"
else
    for m in "${models[@]}"; do
        timeout 280 python3 "$here/graph_ref.py" --model "$m" --mode "$part" --rounds "$rounds" --out "$runs/timm_${m}_$part.json" >>"$out/timm-$part.log" 2>&1 || echo "timm $part $m failed"
        echo "$m done at $(date +%T)"
    done
    jsonl "$runs"/timm_*_"$part".json >"$out/timm-$part.jsonl"
fi
ls -la "$out"
