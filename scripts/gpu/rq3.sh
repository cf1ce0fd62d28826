#!/usr/bin/env bash
# RQ3 (pipelines/rq3.ron) at a reduced size on a GPU host with PyTorch
# 2.11.0+cu130: the key models vit16x6x384 and vit32x12x768 in every mode,
# `graph: Cuda` included (vit32x18x1024's advanced-mode and eager runs come
# along: rq3.ron's `include` names them; `-p model=[…]` narrows the
# CUDA-graph runs too), 400 images per run at batch 4, warm-up 25 batches
# (100 for the CUDA-graph modes); 470 s on 2 H200s before the CUDA-graph
# runs; 2026-11-24 on one H100, 560 + 227 s in two calls (the second resumed):
# 4 `Vit` runs with CUPTI traces and 11 Python runs, their exports and
# analyses, and the three reports.
#
# Needs, run from the repository root:
#   - a vitgraph built with the torch feature (on any x86-64 Linux machine:
#     eval "$(scripts/setup-libtorch.sh)"; cargo build --release --features torch),
#     at target/release/vitgraph or named by $VITGRAPH;
#   - python3 with torch 2.11 (the GPU hosts have it; no timm needed).
#
# Time: each Rust run and each Python eager run takes seconds; compiling takes
# about 0.5-1 min per `default` and `reduce-overhead` run and 1-4 min per
# `max-autotune` run (GEMM autotuning), so 12-20 minutes in all, most of it
# compiling. The build is cut at $BUDGET seconds (default 540) so that it fits
# a 10-minute command: run the script again and it resumes where it stopped
# (finished nodes are kept in cache/), until it prints the reports.
#
#   scripts/gpu/rq3.sh                  # reduced size
#   SAMPLES=2000 scripts/gpu/rq3.sh     # the study's sample count
#
# Writes $OUT (default /tmp/vitgraph-rq3): the reports, every run's
# results.json and metrics.json, the build's JSON events, and rq3.tar.gz of it all.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="${VITGRAPH:-target/release/vitgraph}"
out="${OUT:-/tmp/vitgraph-rq3}"
budget="${BUDGET:-540}"
samples="${SAMPLES:-400}"
mkdir -p "$out"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')" || {
    echo "rq3.sh: python3 cannot import torch" >&2
    exit 1
}
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
params=(
    -p "samples=$samples" -p warmup=25 -p warmup_advanced=100
    -p models=[vit16x6x384,vit32x12x768] -p "model=[vit16x6x384,vit32x12x768]"
    -p repeat=2 -p max_repeat=2
)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv >"$out/nvidia-smi.csv" 2>&1
reports=(rq3_analysis rq3_report rq3_overhead)
"$bin" status "${reports[@]}" "${params[@]}" | tail -n 1
start=$(date +%s)
timeout --signal=INT "$budget" "$bin" build "${reports[@]}" -k --json "${params[@]}" >>"$out/build.jsonl" 2>>"$out/build.log"
status=$?
echo "rq3.sh: build exited $status after $(( $(date +%s) - start )) s"
"$bin" status "${reports[@]}" "${params[@]}" | tail -n 1
# Copy what exists so far: results, metrics, logs of failed nodes, reports.
for stage in rq3_eager rq3_graph rq3_compiled rq3_eager_analysis rq3_graph_analysis rq3_compiled_analysis "${reports[@]}"; do
    [[ -d "out/$stage" ]] || continue
    (cd out && find "$stage" -type f \( -name '*.json' ! -name 'trace.json' -o -name '*.md' -o -name '*.csv' -o -name '*.txt' -o -name '*.svg' \) -print0 |
        xargs -0 -r cp --parents -t "$out")
done
[[ -d cache/logs ]] && cp -r cache/logs "$out/" 2>/dev/null
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
for report in "${reports[@]}"; do
    [[ -f "out/$report/report.md" ]] && cat "out/$report/report.md"
done
if [[ $status -eq 124 || $status -eq 130 ]]; then
    echo "rq3.sh: cut at $budget s; run it again to resume"
fi
exit "$status"
