#!/usr/bin/env bash
# Side-by-side GPU verification of the `Vit` task, in alternating rounds so
# that drift of the machine shows as spread rather than as a difference:
#   - forward time of vitgraph's `Vit` against timm's VisionTransformer
#     (eager, torch.inference_mode) for three shapes at batch 1 and 64, bf16;
#   - CUPTI tracing: traced against untraced runs of the same spec, and the
#     kernels per forward pass against torch.profiler's count for timm.
# Needs PyTorch 2.11 and timm on the host, and a `run_task` example built
# elsewhere (RUN_TASK). Writes results under $OUT and prints the summary.
#
#   RUN_TASK=.dev/bin/run_task OUT=/tmp/v scripts/gpu/verify_vit.sh [ROUNDS]
set -uo pipefail
rounds="${1:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
timm() {
    local name="$1"
    shift
    run_py "$name" "$here/timm_ref.py" "$@"
}
batches() { if [[ "$1" == 1 ]]; then echo 400; else echo 40; fi; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$out/nvidia-smi-before.csv"
for r in $(seq 1 "$rounds"); do
    for m in vit32x6x384 vit16x12x768 vit32x18x1024; do
        for b in 1 64; do
            n=$(batches "$b")
            # preprocess: Gpu, so that the forward pass is what the run is about.
            task "vit_${m}_b${b}_r$r" vit "(model: \"$m\", batch: $b, dtype: \"bf16\", warmup: 30, samples: $(( n * b )), preprocess: Gpu)"
            timm "timm_${m}_b${b}_r$r" --model "$m" --batch "$b" --dtype bf16 --mode eager --warmup 30 --iters "$n"
        done
    done
    for cfg in "vit32x6x384 1" "vit16x12x768 64"; do
        set -- $cfg
        n=$(batches "$2")
        spec="(model: \"$1\", batch: $2, dtype: \"bf16\", warmup: 30, samples: $(( n * $2 )), preprocess: Gpu"
        task "notrace_${1}_b${2}_r$r" vit "$spec)"
        task "cupti_${1}_b${2}_r$r" vit "$spec, trace: Cupti)"
    done
done
for cfg in "vit32x6x384 1" "vit16x12x768 64"; do
    set -- $cfg
    timm "profiler_${1}_b${2}" --model "$1" --batch "$2" --dtype bf16 --mode eager --warmup 10 --iters 10 --profile "$runs/profiler_${1}_b${2}.trace.json"
    rm -f "$runs/profiler_${1}_b${2}.trace.json"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$out/nvidia-smi-after.csv"
find "$runs" -name trace.sqlite -delete
tar -czf "$out/runs-vit.tar.gz" -C "$out" runs
python3 "$here/summarize_vit.py" "$runs" | tee "$out/summary-vit.md"
