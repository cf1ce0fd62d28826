#!/usr/bin/env python3
"""The table of scripts/gpu/cuda_graph.sh's results: per model and batch, the
forward-pass time (median of each run's per-batch medians, then the median
over rounds, with the rounds' spread) of `Vit` without and with `graph:
Cuda`, and of timm eager, compiled (default) and reduce-overhead; the kernel
floor of the same `Vit` runs (summed GPU time of one forward pass's kernels,
from their traces); and the ratios the targets name.

    python3 scripts/gpu/summarize_graph.py DIR [DIR…] > table.md

DIR holds vit.jsonl and timm-*.jsonl (several DIRs: one per device call).
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spread(values):
    """(max − min) / median, in percent."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / statistics.median(values) * 100


def fmt(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}"


def main(dirs):
    vit = defaultdict(list)          # (model, batch, graph) -> [forward median per round]
    floor = defaultdict(list)        # (model, batch, graph) -> [kernel ms per forward]
    span = defaultdict(list)         # first kernel start to last kernel end, ms
    kernels = defaultdict(list)
    capture = defaultdict(list)
    timm = defaultdict(list)         # (model, batch, mode) -> [host ms median per round]
    timm_kernels = {}
    for d in map(Path, dirs):
        for r in lines(d / "vit.jsonl"):
            c = r["config"]
            key = (c["model"], c["batch"], c.get("graph", "None"))
            vit[key].append(statistics.median(r["forward_samples_ms"]))
            t = r.get("trace") or {}
            if t.get("kernel_ms_per_forward") is not None:
                floor[key].append(t["kernel_ms_per_forward"])
                kernels[key].append(t["kernels_per_forward"])
            if t.get("kernel_span_ms_per_forward") is not None:
                span[key].append(t["kernel_span_ms_per_forward"])
            if r.get("cuda_graph"):
                capture[key].append(r["cuda_graph"]["capture_ms"])
        for f in sorted(d.glob("timm-*.jsonl")):
            for r in lines(f):
                for row in r["rows"]:
                    timm[(r["model"], row["batch"], r["mode"])].append(row["host_ms_median"])
                for b, k in r.get("kernels_per_forward", {}).items():
                    timm_kernels[(r["model"], int(b), r["mode"])] = (k, r["kernel_ms_per_forward"][b])
    models = sorted({k[0] for k in vit} | {k[0] for k in timm}, key=lambda m: (int(m.split("x")[1]) * int(m.split("x")[2])))
    batches = sorted({k[1] for k in vit} | {k[1] for k in timm})
    med = lambda xs: statistics.median(xs) if xs else None
    print("Forward pass, ms (median over rounds of each run's median; spread = (max − min) / median over rounds).\n")
    print("| model | batch | Vit | Vit graph: Cuda | graph spread | kernel floor (graph run) | timm eager | timm compile | timm reduce-overhead | graph vs reduce-overhead (throughput ×) | graph / floor | capture ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        for b in batches:
            plain, graph = med(vit[(m, b, "None")]), med(vit[(m, b, "Cuda")])
            fl = med(floor[(m, b, "Cuda")])
            eager, default, ro = (med(timm[(m, b, mode)]) for mode in ("eager", "default", "reduce-overhead"))
            sp = spread(vit[(m, b, "Cuda")])
            print(
                f"| {m} | {b} | {fmt(plain)} | {fmt(graph)} | {fmt(sp, 1)}% ({len(vit[(m, b, 'Cuda')])}) | {fmt(fl)} | "
                f"{fmt(eager)} | {fmt(default)} | {fmt(ro)} | "
                f"{fmt(ro / graph if ro and graph else None, 2)} | {fmt(graph / fl if graph and fl else None, 2)} | "
                f"{fmt(med(capture[(m, b, 'Cuda')]), 1)} |"
            )
    print("\nKernels per forward pass and their summed GPU time (ms), from the traces:\n")
    print("| model | batch | Vit | Vit graph: Cuda | timm eager | timm compile | timm reduce-overhead |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        for b in batches:
            cells = []
            for g in ("None", "Cuda"):
                k, f = med(kernels[(m, b, g)]), med(floor[(m, b, g)])
                cells.append(f"{fmt(k, 0)} / {fmt(f)}")
            for mode in ("eager", "default", "reduce-overhead"):
                k, f = timm_kernels.get((m, b, mode), (None, None))
                cells.append(f"{fmt(k, 0)} / {fmt(f)}")
            print(f"| {m} | {b} | " + " | ".join(cells) + " |")
    print("\nWhat a `Vit` graph: Cuda forward pass spends beyond its kernels (ms): the untraced forward pass less its kernels' summed GPU time "
          "(the gaps between the graph's kernels, its launch and the synchronization), per kernel in µs; and, from the traced batches, the span from "
          "the first kernel's start to the last one's end (CUPTI's records widen the gaps there, so the span can exceed the untraced forward pass):\n")
    print("| model | batch | forward | kernels | beyond the kernels | per kernel (µs) | traced span |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        for b in batches:
            key = (m, b, "Cuda")
            f, k, s_, n = med(vit[key]), med(floor[key]), med(span[key]), med(kernels[key])
            if None in (f, k, s_, n):
                continue
            print(f"| {m} | {b} | {f:.3f} | {k:.3f} | {f - k:.3f} | {(f - k) * 1e3 / n:.2f} | {s_:.3f} |")
    print("\nPer-round `Vit` forward medians (ms):\n")
    for key in sorted(vit):
        print(f"- {key[0]} b{key[1]} {key[2]}: " + ", ".join(f"{v:.3f}" for v in vit[key]))


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
