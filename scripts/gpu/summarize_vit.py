#!/usr/bin/env python3
"""Markdown tables from the runs of scripts/gpu/verify_vit.sh: medians over
the rounds, with the range in brackets."""
import json
import os
import statistics
import sys

runs = sys.argv[1]


def load(name):
    try:
        with open(os.path.join(runs, name, "results.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def rounds(prefix):
    names = sorted(n for n in os.listdir(runs) if n.startswith(prefix + "_r"))
    return [r for r in (load(n) for n in names) if r]


def med(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}–{max(xs):.3f}]"


def f(x, d=3):
    return "–" if x is None else f"{x:.{d}f}"


print("## Forward pass: vitgraph `Vit` vs timm eager (bf16, 224 px, inference mode)\n")
print("Forward ms: each run's median batch (vitgraph: `forward_samples_ms`; timm: CUDA-event time per call); medians over rounds [min–max]. Ratio = timm / vitgraph (throughput ratio).\n")
print("| model | batch | params vitgraph / timm | forward ms vitgraph | forward ms timm | throughput ratio | rounds |")
print("|---|---|---|---|---|---|---|")
for m in ["vit32x6x384", "vit16x12x768", "vit32x18x1024"]:
    for b in [1, 64]:
        ours = rounds(f"vit_{m}_b{b}")
        ref = rounds(f"timm_{m}_b{b}")
        fo = [statistics.median(r["forward_samples_ms"]) if r.get("forward_samples_ms") else r["stages_ms"]["forward"] for r in ours]
        ft = [r["forward_ms"]["median"] for r in ref]
        ratios = [t / o for o, t in zip(fo, ft)]
        params = f"{ours[0]['params'] if ours else '–'} / {ref[0]['params'] if ref else '–'}"
        print(f"| {m} | {b} | {params} | {med(fo)} | {med(ft)} | {med(ratios)} | {len(ratios)} |")

print("\n## CUPTI tracing (preprocess on the GPU)\n")
print("| config | kernels/forward CUPTI | torch.profiler (timm) | forward ms traced (median) | untraced | forward overhead | img/s traced | untraced | throughput overhead | records dropped |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cfg in ["vit32x6x384_b1", "vit16x12x768_b64"]:
    t, n = rounds(f"cupti_{cfg}"), rounds(f"notrace_{cfg}")
    p = load(f"profiler_{cfg}")
    kt = [r.get("trace", {}).get("kernels_per_forward") for r in t]
    fwd = lambda r: statistics.median(r["forward_samples_ms"]) if r.get("forward_samples_ms") else r["stages_ms"]["forward"]
    ft = [fwd(r) for r in t]
    fn = [fwd(r) for r in n]
    tt = [r["throughput_images_per_s"] for r in t]
    tn = [r["throughput_images_per_s"] for r in n]
    fo = [a / b - 1 for a, b in zip(ft, fn)]
    to = [1 - a / b for a, b in zip(tt, tn)]
    dropped = [r.get("trace", {}).get("dropped_records") for r in t]
    print(f"| {cfg} | {med(kt)} | {f(p and p.get('kernels_per_forward'), 1)} | {med(ft)} | {med(fn)} | {med(fo)} | "
          f"{med(tt)} | {med(tn)} | {med(to)} | {dropped} |")
