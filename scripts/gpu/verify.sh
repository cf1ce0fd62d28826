#!/usr/bin/env bash
# GPU verification of the `Vit` and `OpBench` tasks on a host with PyTorch
# (2.11.0+cu130) installed, a release `run_task` example built elsewhere, and
# this folder's helpers beside it. Writes every run's results.json into
# $OUT/runs (packed as runs.tar.gz) and prints a summary table last.
#
#   scripts/gpu/verify.sh rust     # Vit sweep, CUPTI traces, OpBench, eager PyTorch
#   scripts/gpu/verify.sh compile  # torch.compile(mode="reduce-overhead") for the same shapes
set -uo pipefail
mode="${1:-rust}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
bench="$here/vit_compile_bench.py"
[[ -f "$bench" ]] || bench="$here/../../examples/vit_compile_bench.py"
py() {
    local name="$1"
    shift
    run_py "$name" "$bench" "$@"
}

models=(vit32x6x384 vit16x12x768 vit32x18x1024)
samples() { if [[ "$1" == 1 ]]; then echo 200; else echo $(( $1 * 20 )); fi; }

case "$mode" in
rust)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv >"$out/nvidia-smi-before.csv"
    task calibrate opbench '(op: Calibrate)'
    for m in "${models[@]}"; do
        for b in 1 64; do
            task "vit_${m}_b${b}" vit "(model: \"$m\", batch: $b, dtype: \"bf16\", warmup: 20, samples: $(samples $b))"
            py "eager_${m}_b${b}" --model "$m" --batch "$b" --dtype bf16 --compile none --warmup 20 --samples $(( 100 * b ))
        done
    done
    # CUPTI: kernels per forward against torch.profiler, and tracing overhead.
    for cfg in "vit32x6x384 1" "vit16x12x768 64"; do
        set -- $cfg
        task "cupti_${1}_b${2}" vit "(model: \"$1\", batch: $2, dtype: \"bf16\", warmup: 20, samples: $(samples $2), trace: Cupti)"
        task "notrace_${1}_b${2}" vit "(model: \"$1\", batch: $2, dtype: \"bf16\", warmup: 20, samples: $(samples $2))"
        py "profiler_${1}_b${2}" --model "$1" --batch "$2" --dtype bf16 --compile none --warmup 20 --samples $(( 20 * $2 )) --trace "$runs/profiler_${1}_b${2}.trace.json"
    done
    task async_vit16x12x768_b64 vit '(model: "vit16x12x768", batch: 64, dtype: "bf16", warmup: 10, samples: 1280, pipeline: Async(queue: 4, workers: 4))'
    task gpupre_vit16x12x768_b64 vit '(model: "vit16x12x768", batch: 64, dtype: "bf16", warmup: 10, samples: 1280, preprocess: Gpu)'
    cal="$runs/calibrate"
    task gemm_bf16_8192 opbench '(op: Gemm(m: 8192, n: 8192, k: 8192), dtype: "bf16", repeats: 50)' "$cal"
    task gemm_f16_8192 opbench '(op: Gemm(m: 8192, n: 8192, k: 8192), dtype: "f16", repeats: 50)' "$cal"
    for op in LayerNorm Gelu Swish Mse; do
        task "op_${op}" opbench "(op: $op(batch: 32, seq: 2048, dim: 1024), dtype: \"bf16\")" "$cal"
    done
    task op_CrossEntropy opbench '(op: CrossEntropy(batch: 32, seq: 512, dim: 32000), dtype: "bf16")' "$cal"
    for hd in 64 107 128; do
        for be in Auto Flash MemEfficient Math Cudnn; do
            task "sdpa_${be}_hd${hd}" opbench "(op: Sdpa(batch: 4, heads: 32, seq: 2048, head_dim: $hd, backend: $be), dtype: \"bf16\", repeats: 30)" "$cal"
        done
    done
    for pad in 107 112 128; do
        task "pad_sdpa_${pad}" opbench "(op: Sdpa(batch: 4, heads: 32, seq: 2048, head_dim: 107, pad_to: Some($pad)), dtype: \"bf16\", repeats: 30)" "$cal"
        task "pad_gemm_${pad}" opbench "(op: Gemm(m: 16384, n: 4096, k: 107, pad_to: Some($pad)), dtype: \"bf16\")" "$cal"
    done
    task het_uniform opbench '(op: Hetero(heads: 32, head_dim: 128, seqs: [1024, 1024, 1024, 1024]), dtype: "bf16")' "$cal"
    task het_severe opbench '(op: Hetero(heads: 32, head_dim: 128, seqs: [256, 256, 512, 3072]), dtype: "bf16")' "$cal"
    python3 "$here/torch_ref.py" "$runs/torch_ref.json" >"$runs/torch_ref.log" 2>&1 || echo "FAILED torch_ref"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv >"$out/nvidia-smi-after.csv"
    ;;
trace)
    # Tracing overhead, alternating untraced and traced runs to see the spread.
    for r in 1 2 3; do
        for cfg in "vit32x6x384 1" "vit16x12x768 64"; do
            set -- $cfg
            task "notrace_${1}_b${2}_r$r" vit "(model: \"$1\", batch: $2, dtype: \"bf16\", warmup: 20, samples: $(samples $2))"
            task "cupti_${1}_b${2}_r$r" vit "(model: \"$1\", batch: $2, dtype: \"bf16\", warmup: 20, samples: $(samples $2), trace: Cupti)"
        done
    done
    for cfg in "vit32x6x384 1" "vit16x12x768 64"; do
        set -- $cfg
        py "profiler_${1}_b${2}" --model "$1" --batch "$2" --dtype bf16 --compile none --warmup 20 --samples $(( 20 * $2 )) --trace "$runs/profiler_${1}_b${2}.trace.json"
    done
    task calibrate opbench '(op: Calibrate)'
    task gemm_bf16_8192 opbench '(op: Gemm(m: 8192, n: 8192, k: 8192), dtype: "bf16", repeats: 50)' "$runs/calibrate"
    python3 "$here/torch_ref.py" "$runs/torch_ref.json" >"$runs/torch_ref.log" 2>&1 || echo "FAILED torch_ref"
    ;;
compile)
    for m in "${models[@]}"; do
        for b in 1 64; do
            py "compiled_${m}_b${b}" --model "$m" --batch "$b" --dtype bf16 --compile reduce-overhead --warmup 20 --samples $(( 100 * b ))
        done
    done
    ;;
esac
tar -czf "$out/runs-$mode.tar.gz" -C "$out" runs
python3 "$here/summarize.py" "$runs" | tee "$out/summary-$mode.md"
