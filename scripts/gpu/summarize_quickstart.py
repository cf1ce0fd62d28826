#!/usr/bin/env python3
"""Per-process paired ratios of the quickstart's blocks, by metric.

Reads the `quickstart_runs` folders scripts/gpu/quickstart_gpu.sh keeps
(one results.json per process, each with every member) under the given
folders and prints, for each build and each comparison the quickstart's
report makes (batch 8 over batch 1, per model), the ratio and its 95 %
half-width over processes (t on the log scale, as vitgraph's paired
estimate) for the end-to-end throughput, the median latency, the
host-timed forward stage and the forward timed on the device.

With both builds of a design under one DIR, it also prints each
configuration's absolute throughput per build and whether the two agree.

    python3 scripts/gpu/summarize_quickstart.py DIR…
"""
import glob
import json
import math
import os
import statistics
import sys

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
       8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145}

METRICS = {
    "throughput": lambda m: m["throughput_images_per_s"],
    "latency median": lambda m: 1.0 / m["latency_ms"]["median"],
    "forward (host)": lambda m: 1.0 / m["stages_ms"]["forward"],
    "forward (device)": lambda m: 1.0 / (m.get("forward_device_ms") or {}).get("median", float("nan")),
}


def paired(logs):
    n = len(logs)
    if n < 2:
        return float("nan"), float("nan")
    mean = statistics.fmean(logs)
    h = T95.get(n - 1, 1.96) * statistics.stdev(logs) / math.sqrt(n)
    return math.exp(mean), 100 * (math.exp(h) - 1)


def build(folder):
    files = sorted(glob.glob(os.path.join(folder, "**", "results.json"), recursive=True))
    docs = [json.load(open(f)) for f in files]
    docs = [d["members"] for d in docs if "members" in d]
    if not docs:
        return
    models = sorted({k.split(",")[0] for k in docs[0]})
    print(f"{folder}: {len(docs)} processes")
    for model in models:
        a, b = f"{model},1", f"{model},8"
        cells = []
        for name, get in METRICS.items():
            logs = []
            for d in docs:
                try:
                    logs.append(math.log(8 * get(d[b]) / get(d[a]) if name != "throughput"
                                         else get(d[b]) / get(d[a])))
                except (KeyError, ValueError, ZeroDivisionError, TypeError):
                    pass
            r, h = paired([x for x in logs if math.isfinite(x)])
            cells.append(f"{name} {r:.3f} ±{h:.2f} %")
        print(f"  {model} batch 8 / 1: " + "; ".join(cells))


def absolutes(folder):
    """Each configuration's throughput: exp(mean log) over processes, and
    the 95 % half-width of that mean (t on the log scale)."""
    out = {}
    for f in glob.glob(os.path.join(folder, "**", "results.json"), recursive=True):
        members = json.load(open(f)).get("members", {})
        for key, m in members.items():
            if "#2" in key or not m.get("throughput_images_per_s"):
                continue
            out.setdefault(key, []).append(math.log(m["throughput_images_per_s"]))
    return {k: (math.exp(statistics.fmean(v)), paired(v)[1] / 100, len(v)) for k, v in out.items()}


def agreement(first, second):
    """Whether two builds' absolute throughputs agree: |Δ log| within
    √(h₁² + h₂²), configuration by configuration."""
    a, b = absolutes(first), absolutes(second)
    agree = 0
    for key in sorted(set(a) & set(b)):
        (x, hx, nx), (y, hy, ny) = a[key], b[key]
        lx, ly = math.log1p(hx), math.log1p(hy)
        ok = abs(math.log(x / y)) <= math.hypot(lx, ly)
        agree += ok
        print(f"  {key}: {x:.1f} ±{100 * hx:.1f} % ({nx}) and {y:.1f} ±{100 * hy:.1f} % ({ny}) images/s: "
              f"{'agree' if ok else 'differ'}")
    print(f"  absolutes agree for {agree} of {len(set(a) & set(b))} configurations")


for top in sys.argv[1:]:
    folders = sorted(glob.glob(os.path.join(top, "**", "quickstart_runs"), recursive=True))
    for folder in folders:
        build(folder)
    # Two builds of one design (…/build1/… and …/build2/…): their absolutes.
    for folder in folders:
        if "/build1/" in folder + "/" and os.path.isdir(folder.replace("build1", "build2")):
            print(f"{os.path.dirname(os.path.dirname(folder))}: absolute throughput, build 1 and build 2")
            agreement(folder, folder.replace("build1", "build2"))
