#!/usr/bin/env python3
"""Summarizes `scripts/gpu/reproducibility.sh`'s results (the unpacked
repro.tar.gz): for each configuration and each pair of builds from empty
workspaces (once-1/once-2: one run each; repeated-1/repeated-2: repetitions
with precision targets), both estimates of the median latency with their 95 %
intervals, and whether they agree within the combined half-width
sqrt(h1^2 + h2^2); then the half-widths reached, the repetitions spent and
the GPU time of each build.

    python3 scripts/gpu/reproducibility/summarize.py DIR > summary.md
"""
import csv
import json
import math
import pathlib
import sys

METRIC = "latency_ms.median"


def config(row):
    """A configuration's name, the same in both pipelines."""
    model = row["model"]
    if row.get("pipeline"):
        return f"{model} Cpu {row['pipeline']}"
    return f"{model} Gpu graph:{row['graph']}"


def table(d, phase):
    f = d / f"{phase}-table.csv"
    if not f.exists():
        return None
    out = {}
    for row in csv.DictReader(f.open()):
        e = float(row[METRIC])
        lo, hi = float(row[f"{METRIC}.ci95_low"]), float(row[f"{METRIC}.ci95_high"])
        out[config(row)] = {
            "e": e, "lo": lo, "hi": hi, "h": (hi - lo) / 2,
            "reps": int(row.get("reps") or 1), "interval": row.get("interval", ""),
        }
    return out


def gpu_seconds(d, phase):
    """Summed run time of the measuring nodes built, from the build events."""
    f = d / f"{phase}.jsonl"
    total, runs = 0.0, 0
    for line in f.read_text().splitlines() if f.exists() else []:
        ev = json.loads(line)
        if ev.get("event") == "finished" and not ev["node"].startswith("sweep_report"):
            total += ev["duration_ms"] / 1000
            runs += 1
    return total, runs


def pair(d, a, b, title):
    ta, tb = table(d, a), table(d, b)
    if ta is None or tb is None:
        print(f"\n{title}: {a} or {b} has no table (not built, or cut off)\n")
        return
    print(f"\n### {title}\n")
    print(f"| configuration | {a}: median ms [95 %] | ± | reps | {b}: median ms [95 %] | ± | reps | difference | combined ± | agree |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    agree = 0
    for c in sorted(ta):
        x, y = ta[c], tb.get(c)
        if y is None:
            continue
        diff = abs(x["e"] - y["e"])
        comb = math.hypot(x["h"], y["h"])
        ok = diff <= comb
        agree += ok
        rel = lambda r: f"{100 * r['h'] / r['e']:.1f} %"
        print(f"| {c} | {x['e']:.4f} [{x['lo']:.4f}, {x['hi']:.4f}] | {rel(x)} | {x['reps']} "
              f"| {y['e']:.4f} [{y['lo']:.4f}, {y['hi']:.4f}] | {rel(y)} | {y['reps']} "
              f"| {100 * diff / ((x['e'] + y['e']) / 2):.1f} % | {100 * comb / ((x['e'] + y['e']) / 2):.1f} % | {'yes' if ok else 'NO'} |")
    n = len([c for c in ta if c in tb])
    print(f"\n{agree} of {n} configurations agree between the two builds within their combined half-width.")
    for p in (a, b):
        s, runs = gpu_seconds(d, p)
        t = table(d, p)
        widths = sorted(100 * r["h"] / r["e"] for r in t.values())
        print(f"- {p}: {runs} runs, {s:.0f} s of runs; half-widths {widths[0]:.1f}–{widths[-1]:.1f} % "
              f"(median {widths[len(widths) // 2]:.1f} %)")


def fixed_n(d, phase):
    """The GPU time a fixed number of repetitions would take to give every
    configuration at least the repetitions the precision target gave it."""
    t = table(d, phase)
    f = d / f"{phase}-runs.json"
    if t is None or not f.exists():
        return
    s, runs = gpu_seconds(d, phase)
    if runs == 0:
        return
    per_run = s / runs
    n = max(r["reps"] for r in t.values())
    print(f"- {phase}: the precision target spent {runs} runs ({s:.0f} s); a fixed repeat: {n} "
          f"(the most any configuration needed) would spend {n * len(t)} runs (~{n * len(t) * per_run:.0f} s)")


def main():
    d = pathlib.Path(sys.argv[1])
    host = d / "host.txt"
    if host.exists():
        print("```\n" + host.read_text().strip() + "\n```")
    pair(d, "once-1", "once-2", "One run per configuration (before)")
    pair(d, "repeated-1", "repeated-2", "Repetitions with precision targets (after)")
    print()
    for p in ("repeated-1", "repeated-2"):
        fixed_n(d, p)


main()
