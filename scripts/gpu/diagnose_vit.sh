#!/usr/bin/env bash
# Where the forward time of `Vit` and timm differ at batch 64 (GPU time per
# kernel, from a CUPTI trace and a torch.profiler trace), and what
# torch.profiler's own tracing costs timm at batch 1, for comparison with
# `trace: Cupti`. RUN_TASK=.dev/bin/run_task OUT=/tmp/d scripts/gpu/diagnose_vit.sh
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
mkdir -p "$out/d"
for m in vit16x12x768 vit32x18x1024; do
    d="$out/d/vit_$m"
    "$bin" vit "(model: \"$m\", batch: 64, dtype: \"bf16\", warmup: 30, samples: 1280, preprocess: Gpu, trace: Cupti)" "$d" >"$d.log" 2>&1 || tail -5 "$d.log"
    python3 "$here/timm_ref.py" --model "$m" --batch 64 --dtype bf16 --warmup 30 --iters 20 --profile "$out/d/timm_$m.json" --out "$out/d/timm_$m.results.json" >/dev/null 2>&1 || echo "timm $m failed"
    echo "### $m, batch 64"
    python3 "$here/kernel_diff.py" "$d/trace.sqlite" "$d/results.json" "$out/d/timm_$m.json" 5
done
echo "### torch.profiler overhead on timm eager, vit32x6x384 batch 1 (forward ms mean)"
for r in 1 2 3; do
    for p in "" "--profile-timed"; do
        python3 "$here/timm_ref.py" --model vit32x6x384 --batch 1 --dtype bf16 --warmup 30 --iters 400 $p --out "$out/d/prof_$r${p:+_on}.json" >/dev/null 2>&1
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('round $r', 'profiled' if r['profiled'] else 'plain   ', round(r['forward_ms']['mean'], 3), round(r['throughput_images_per_s'], 1))" "$out/d/prof_$r${p:+_on}.json"
    done
done
