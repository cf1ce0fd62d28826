"""Summarizes scripts/gpu/forward_device.sh: for each (model, graph), the
spread between processes of the forward pass timed on the device
(`forward_device_ms.median`), of the host-timed forward stage
(`stages_ms.forward`) and of the end-to-end batch latency
(`latency_ms.median`), as the 95 % half-width of the mean over processes
(t, on the log scale), beside the eager PyTorch reference's CUDA-event
forward (scripts/gpu/graph_ref.py, one process each).

    python3 summarize.py WORKSPACE
"""
import glob
import json
import math
import os
import statistics
import sys

ws = sys.argv[1]
T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def spread(xs):
    logs = [math.log(x) for x in xs if x and x > 0]
    if len(logs) < 2:
        return "—"
    h = T975.get(len(logs) - 1, 2.0) * statistics.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(statistics.mean(logs)):.4f} ms ±{100 * (math.exp(h) - 1):.2f} % (n={len(logs)})"


print(open(os.path.join(ws, "host.txt")).read())
by = {}
for path in glob.glob(os.path.join(ws, "out", "runs", "*", "results.json")):
    params = dict(p.split("=", 1) for p in os.path.basename(os.path.dirname(path)).split(","))
    d = json.load(open(path))
    by.setdefault((params["model"], params["graph"]), []).append(d)
print("| model | graph | forward on the device (CUDA events) | forward stage (host clock) | batch latency (end to end) |")
print("|---|---|---|---|---|")
for (model, graph), runs in sorted(by.items()):
    dev = [(r.get("forward_device_ms") or {}).get("median") for r in runs]
    host = [r["stages_ms"]["forward"] for r in runs]
    lat = [r["latency_ms"]["median"] for r in runs]
    print(f"| {model} | {graph} | {spread(dev)} | {spread(host)} | {spread(lat)} |")
refs = {}
for path in glob.glob(os.path.join(ws, "ref", "*.json")):
    d = json.load(open(path))
    for row in d.get("rows", d if isinstance(d, list) else []):
        if isinstance(row, dict) and "event_ms_median" in row:
            refs.setdefault(d.get("model", os.path.basename(path).split("_")[0]), []).append(row["event_ms_median"])
print("\nReference (timm eager, CUDA events around each forward, one process each):\n")
for model, xs in sorted(refs.items()):
    print(f"- {model}: {spread(xs)}")
