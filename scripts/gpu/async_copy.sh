#!/usr/bin/env bash
# The Async pipeline's copy streams on a GPU: the same Vit spec through the
# Sync flow (copy, then forward, on one stream) and the Async flow (each
# worker copies on its own stream while the forward pass of the previous
# batch runs), in alternating rounds. Shapes where the copy is a large share
# of a batch: a small model at a large batch, raw uint8 images copied and
# preprocessed on the GPU, and f32 images preprocessed on the CPU.
# Prints throughput medians and where results.json says the copies ran.
#
#   RUN_TASK=.dev/bin/run_task OUT=/tmp/a scripts/gpu/async_copy.sh [ROUNDS]
set -uo pipefail
rounds="${1:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"

# Three flows: Sync; Async with its copy streams; Async copying on the
# compute stream (VITGRAPH_COPY_STREAMS=0), which isolates the streams' part.
run_flows() {
    local shape="$1" spec="$2" r="$3"
    task "${shape}_sync_r$r" vit "$spec, pipeline: Sync)"
    task "${shape}_async_r$r" vit "$spec, pipeline: Async(queue: 2, workers: 2))"
    VITGRAPH_COPY_STREAMS=0 task "${shape}_asyncnostream_r$r" vit "$spec, pipeline: Async(queue: 2, workers: 2))"
}
for r in $(seq 1 "$rounds"); do
    run_flows gpuprep "(model: \"vit32x6x384\", batch: 256, dtype: \"bf16\", warmup: 20, samples: 51200, preprocess: Gpu" "$r"
    run_flows cpuprep "(model: \"vit32x6x384\", batch: 64, dtype: \"f32\", source_size: 224, warmup: 10, samples: 12800, preprocess: Cpu" "$r"
done
tar -czf "$out/runs-async.tar.gz" -C "$out" runs
python3 - "$runs" <<'PY' | tee "$out/summary-async.md"
import json, os, statistics, sys
runs = sys.argv[1]
rows = {}
for name in sorted(os.listdir(runs)):
    p = os.path.join(runs, name, "results.json")
    if not os.path.exists(p):
        continue
    r = json.load(open(p))
    shape, flow, _ = name.split("_")
    rows.setdefault((shape, flow), []).append(r)
print("| shape | flow | runs | images/s (median) | h2d ms | forward ms | h2d_on |")
print("|---|---|---|---|---|---|---|")
for (shape, flow), rs in sorted(rows.items()):
    tp = statistics.median(r["throughput_images_per_s"] for r in rs)
    h2d = statistics.median(r["stages_ms"]["h2d"] for r in rs)
    fw = statistics.median(r["stages_ms"]["forward"] for r in rs)
    on = ",".join(sorted({str(r.get("h2d_on")) for r in rs}))
    print(f"| {shape} | {flow} | {len(rs)} | {tp:.0f} | {h2d:.2f} | {fw:.2f} | {on} |")
def tp(shape, flow):
    return statistics.median(r["throughput_images_per_s"] for r in rows[(shape, flow)])
for shape in sorted({s for s, _ in rows}):
    flows = {f for s, f in rows if s == shape}
    if {"sync", "async", "asyncnostream"} <= flows:
        print(f"\n{shape}: async / sync = {tp(shape, 'async') / tp(shape, 'sync'):.2f}; "
              f"async / async without copy streams = {tp(shape, 'async') / tp(shape, 'asyncnostream'):.2f}")
PY
