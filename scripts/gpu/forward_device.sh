#!/usr/bin/env bash
# The forward pass timed on the device (`forward_device_ms`) against the
# host-timed numbers, over separate processes (book: "Metrics"): the `Vit`
# task eager and with `graph: Cuda`, and the eager PyTorch reference
# (graph_ref.py) timed by CUDA events, five processes. Needs a release
# vitgraph with `--features torch` at $VITGRAPH (default .dev/bin/vitgraph)
# and PyTorch 2.11 with timm in python3.
#
#   OUT=/tmp/out scripts/gpu/forward_device.sh [-p reps=10]
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-forward-device}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/forward_device}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
rm -rf "$ws"
mkdir -p "$out" "$ws/pipelines" "$ws/ref"
cp scripts/gpu/forward_device/study.ron "$ws/pipelines/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
} | tee "$ws/host.txt"
start=$(date +%s)
timeout --signal=INT --kill-after=20 "${BUDGET:-300}" "$vitgraph" -C "$ws" build runs -j 1 --json "$@" \
    >"$ws/build.jsonl" 2>"$ws/build.err"
echo "build exit $? after $(( $(date +%s) - start )) s" | tee "$ws/times.txt"
for i in 1 2 3 4 5; do
    for m in vit16x6x384 vit32x12x768; do
        timeout 120 python3 scripts/gpu/graph_ref.py --model "$m" --mode eager --batches 1 --rounds 1 \
            --iters 400 --warmup 50 --out "$ws/ref/${m}_$i.json" >/dev/null 2>>"$ws/ref.err"
    done
done
python3 scripts/gpu/forward_device/summarize.py "$ws" | tee "$ws/summary.md"
tar -czf "$out/forward_device.tar.gz" -C "$ws" host.txt times.txt summary.md build.jsonl build.err ref ref.err 2>/dev/null
ls -la "$out"
