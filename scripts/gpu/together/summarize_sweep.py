#!/usr/bin/env python3
"""Summarizes scripts/gpu/together/sweep.ron built twice: for every
comparison of its members (model against model and A/A at equal settings,
batch 8 against batch 1, a CUDA graph against eager), each build's paired
ratio and 95 % half-width at 5 and 10 processes, whether the two builds
agree (|difference of the log-ratios| <= sqrt(h1^2 + h2^2)), and the
interaction check: the spread of the comparison's per-process log-ratios
against the A/A's at the same settings (F = var / var_AA; above the
F(9, 9) 99th percentile, 5.35, the process's band acts on the two members
unequally and pairing cannot cancel it). Also the absolute medians'
spread between processes.

    python3 scripts/gpu/together/summarize_sweep.py WS1 WS2
"""

import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import t975  # noqa: E402

A, AA, B = "vit16x6x384", "vit16x6x384#2", "vit32x12x768"
F99_9_9 = 5.35


def load(ws):
    d = os.path.join(ws, "out", "together")
    reps = {}
    for name in os.listdir(d):
        rep = int(name.split("=")[1])
        doc = json.load(open(os.path.join(d, name, "results.json")))
        reps[rep] = {k: v["latency_ms"]["median"] for k, v in doc["members"].items()}
    return [reps[r] for r in sorted(reps)]


def logs(runs, base, cand):
    return [math.log(r[cand] / r[base]) for r in runs]


def interval(d):
    m = statistics.fmean(d)
    h = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return m, h


def comparisons():
    out = []
    for b in (1, 8):
        for g in ("none", "cuda"):
            out.append((f"{B} / {A}, batch {b}, {g}", f"{A},{b},{g}", f"{B},{b},{g}", f"{A},{b},{g}", f"{AA},{b},{g}"))
            out.append((f"A/A, batch {b}, {g}", f"{A},{b},{g}", f"{AA},{b},{g}", None, None))
    for m in (A, B):
        for g in ("none", "cuda"):
            out.append((f"{m} batch 8 / batch 1, {g}", f"{m},1,{g}", f"{m},8,{g}", None, None))
        for b in (1, 8):
            out.append((f"{m} cuda / none, batch {b}", f"{m},{b},none", f"{m},{b},cuda", f"{A},{b},none", f"{AA},{b},none"))
    return out


def main():
    builds = [load(ws) for ws in sys.argv[1:3]]
    n_all = min(len(b) for b in builds)
    print(f"processes per build: {', '.join(str(len(b)) for b in builds)}")
    print()
    print("| comparison | build 1: 5 | build 1: 10 | build 2: 5 | build 2: 10 | agree (10) | F vs A/A |")
    print("|---|---|---|---|---|---|---|")
    agree_count, total = 0, 0
    for label, base, cand, aa_base, aa_cand in comparisons():
        cells, ests = [], []
        for runs in builds:
            for n in (5, n_all):
                m, h = interval(logs(runs[:n], base, cand))
                cells.append(f"{math.exp(m):.4f} ±{100 * (math.exp(h) - 1):.2f} %")
            ests.append(interval(logs(runs[:n_all], base, cand)))
        (m1, h1), (m2, h2) = ests
        agree = abs(m1 - m2) <= math.sqrt(h1 * h1 + h2 * h2)
        agree_count += agree
        total += 1
        f = ""
        if aa_base:
            var = statistics.variance(logs(builds[0][:n_all], base, cand))
            var_aa = statistics.variance(logs(builds[0][:n_all], aa_base, aa_cand))
            ratio = var / var_aa if var_aa > 0 else float("inf")
            f = f"{ratio:.1f}" + (" **unequal**" if ratio > F99_9_9 else "")
        print(f"| {label} | {' | '.join(cells)} | {'yes' if agree else '**no**'} | {f} |")
    print(f"\nagreement between the builds: {agree_count} of {total} comparisons")
    # The A/A check per process: a process whose A/A log-ratio lies more
    # than 3 robust standard deviations (1.4826 MAD) from the builds' median.
    for b in (1, 8):
        for g in ("none", "cuda"):
            for k, runs in enumerate(builds, 1):
                d = logs(runs[:n_all], f"{A},{b},{g}", f"{AA},{b},{g}")
                med = statistics.median(d)
                mad = 1.4826 * statistics.median(abs(x - med) for x in d)
                flagged = [i + 1 for i, x in enumerate(d) if mad > 0 and abs(x - med) > 3 * mad]
                print(f"A/A batch {b} {g}, build {k}: per-process ratios "
                      + " ".join(f"{math.exp(x):.3f}" for x in d)
                      + (f"; flagged: processes {flagged}" if flagged else "; none flagged"))
    print()
    print("| member | build 1: median over processes | ± (5) | ± (10) | build 2 | ± (5) | ± (10) |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(builds[0][0]):
        cells = []
        for runs in builds:
            vals = [r[key] for r in runs]
            m = statistics.fmean(vals[:n_all])
            cells.append(f"{m:.4f} ms")
            for n in (5, n_all):
                v = vals[:n]
                cells.append(f"±{100 * t975(n - 1) * statistics.stdev(v) / math.sqrt(n) / statistics.fmean(v):.1f} %")
        print(f"| {key} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
