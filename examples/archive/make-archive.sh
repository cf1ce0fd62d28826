#!/usr/bin/env bash
# Lays out an archive shaped like seed 001's (experiments/<rq>/<date>/<time>/
# nsys_reports/gpu<G>_numa<N>_<config>.<ext>) from the real traces in
# ../shared/external-traces, so the archive pipeline has something to adopt.
#
# The traces are stand-ins: recordings of other workloads (a video model on
# two H100s, a hash join, a fused softmax, a vector add, AlexNet and ResNet
# under the PyTorch profiler) under names of the seed's configurations. The
# workflow is the seed's; the numbers are those recordings', not the seed's.
#
# usage: examples/archive/make-archive.sh [TRACES_DIR [WORKSPACE]]
# (WORKSPACE defaults to this folder; the archive goes to WORKSPACE/experiments)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="${1:-$here/../../../shared/external-traces}"
dest="${2:-$here}"
if [ ! -d "$src" ]; then
    echo "make-archive.sh: no trace folder at $src; pass the external-traces folder as the argument" >&2
    exit 2
fi
put() { # SOURCE DEST
    mkdir -p "$dest/experiments/$(dirname "$2")"
    cp "$src/$1" "$dest/experiments/$2"
}
rq1=rq1_model_architecture_impact/2025-07-14/16-30-54/nsys_reports
rq2=rq2_resolution_scaling/2025-07-14/16-46-49/nsys_reports
rq3=rq3_compilation_optimization/2025-07-14/16-52-40/nsys_reports
rq4=rq4_numa_locality_effects/2025-07-14/17-03-11/nsys_reports
rq5=rq5_pipeline_design/2025-07-14/17-38-57/nsys_reports
put nsys-ai/h100_2gpu_1s.sqlite "$rq1/gpu0_numa0_vit16x12x1024.sqlite"
put test-cuda/report1.sqlite "$rq1/gpu0_numa0_vit32x6x384.sqlite"
put aws_gpu/report2.sqlite "$rq2/gpu0_numa0_vit32x12x768_512px.sqlite"
put test-cuda/report1.sqlite "$rq2/gpu0_numa0_vit32x12x768_1024px.sqlite"
put HolisticTraceAnalysis/benchmark_result_2869224_1695835535_trace.json.gz "$rq3/gpu0_numa0_vit16x12x768_compiled.json.gz"
put HolisticTraceAnalysis/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz "$rq3/gpu0_numa0_vit16x12x768_uncompiled.json.gz"
put Mordred-Deprecated/report1.sqlite "$rq4/gpu1_numa0_vit16x12x768_batch1.sqlite"
put Mordred-Deprecated/report1.sqlite "$rq4/gpu1_numa2_vit16x12x768_batch1.sqlite"
put aws_gpu/report2.sqlite "$rq5/gpu0_numa0_vit16x12x768_async_queue2.sqlite"
echo "archive: $(find "$dest/experiments" -type f | wc -l) traces under $dest/experiments"
