#!/usr/bin/env python3
"""Summarizes a build of scripts/gpu/together/study.ron: for each
comparison, its ratio and 95 % half-width measured together (paired: the
t-interval of the per-process log-ratios) and apart (Welch's over the
repetitions, log scale), at the first 5 and at all processes; the
absolute medians and their spread between processes; and the GPU seconds
each design needs for ±2 %.

    python3 scripts/gpu/together/summarize.py WORKSPACE [build.jsonl]
"""

import json
import math
import os
import re
import statistics
import sys

# Two-sided 95 % critical values of Student's t, df 1..40.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
        2.040, 2.037, 2.035, 2.032, 2.030, 2.028, 2.026, 2.024, 2.023, 2.021]


def t975(df):
    if df < 1:
        return float("inf")
    return T975[min(int(round(df)), 40) - 1] if df <= 40 else 1.96


def paired(base, cand):
    d = [math.log(c / b) for b, c in zip(base, cand)]
    m, s = statistics.fmean(d), statistics.stdev(d)
    half = t975(len(d) - 1) * s / math.sqrt(len(d))
    return math.exp(m), math.exp(half) - 1, s


def welch(base, cand):
    mb, mc = statistics.fmean(base), statistics.fmean(cand)
    a = statistics.variance(base) / (len(base) * mb * mb)
    c = statistics.variance(cand) / (len(cand) * mc * mc)
    df = (a + c) ** 2 / (a * a / (len(base) - 1) + c * c / (len(cand) - 1))
    half = t975(df) * math.sqrt(a + c)
    return mc / mb, math.exp(half) - 1


def spread(values):
    m = statistics.fmean(values)
    return m, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) / m


def needed(rel_sd, target=0.02, apart=False):
    """Processes for a ±target half-width: a side's relative sd `rel_sd`
    (apart: two sides of that sd each, as many processes each)."""
    for n in range(2, 100000):
        k = math.sqrt(2.0) if apart else 1.0
        if t975(n - 1) * k * rel_sd / math.sqrt(n) <= target:
            return n
    return None


def main():
    ws = sys.argv[1]
    events = sys.argv[2] if len(sys.argv) > 2 else None
    durations = {}
    if events and os.path.exists(events):
        for line in open(events):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "finished":
                durations[e["node"]] = e["duration_ms"] / 1000.0
    together, apart = {}, {}
    tdir = os.path.join(ws, "out", "together")
    for name in sorted(os.listdir(tdir)):
        rep = int(re.fullmatch(r"rep=(\d+)", name).group(1))
        doc = json.load(open(os.path.join(tdir, name, "results.json")))
        together[rep] = {k: v["latency_ms"]["median"] for k, v in doc["members"].items()}
    adir = os.path.join(ws, "out", "apart")
    for name in sorted(os.listdir(adir)):
        m = re.fullmatch(r"model=(.+),rep=(\d+)", name)
        doc = json.load(open(os.path.join(adir, name, "results.json")))
        apart.setdefault(int(m.group(2)), {})[m.group(1)] = doc["latency_ms"]["median"]
    models = sorted(next(iter(together.values())))
    # Repetitions both designs finished (a build cut short stops mid-round).
    reps = sorted(r for r in set(together) & set(apart) if set(apart[r]) == set(models))
    base = "vit16x6x384"
    print(f"processes: {len(reps)} per design; models: {', '.join(models)}")
    print()
    print("| comparison | processes | together (paired) | apart (Welch) | apart / together width |")
    print("|---|---|---|---|---|")
    rows = []
    for cand in [m for m in models if m != base]:
        for n in sorted({5, len(reps)}):
            use = reps[:n]
            pr, ph, _ = paired([together[r][base] for r in use], [together[r][cand] for r in use])
            wr, wh = welch([apart[r][base] for r in use], [apart[r][cand] for r in use])
            print(f"| {cand} / {base} | {n} | {pr:.4f} ±{100 * ph:.2f} % | {wr:.4f} ±{100 * wh:.2f} % | {wh / ph:.1f}× |")
            rows.append((cand, n, pr, ph, wr, wh))
    print()
    print("| model | together: mean median over processes | ± between processes | apart | ± |")
    print("|---|---|---|---|---|")
    for m in models:
        tm, th = spread([together[r][m] for r in reps])
        am, ah = spread([apart[r][m] for r in reps])
        print(f"| {m} | {tm:.4f} ms | ±{100 * th:.1f} % | {am:.4f} ms | ±{100 * ah:.1f} % |")
    print()
    t_secs = [durations.get(f"together[rep={r}]") for r in reps]
    a_secs = {m: [durations.get(f"apart[model={m},rep={r}]") for r in reps] for m in models}
    if all(t_secs) and all(all(v) for v in a_secs.values()):
        per_block = statistics.fmean(t_secs)
        print("| comparison | together: processes for ±2 % | GPU s | apart: processes per side for ±2 % | GPU s |")
        print("|---|---|---|---|---|")
        for cand in [m for m in models if m != base]:
            _, _, sd = paired([together[r][base] for r in reps], [together[r][cand] for r in reps])
            n_t = needed(sd)
            logs = [math.log(apart[r][m]) for m in (base, cand) for r in reps]
            sd_a = statistics.fmean([statistics.stdev([math.log(apart[r][m]) for r in reps]) for m in (base, cand)])
            n_a = needed(sd_a, apart=True)
            per_side = statistics.fmean(a_secs[base]) + statistics.fmean(a_secs[cand])
            print(f"| {cand} / {base} | {n_t} | {n_t * per_block:.0f} | {n_a} | {n_a * per_side:.0f} |")
        print(f"(a together process, measuring {len(models)} models: {per_block:.1f} s; an apart process: "
              f"{statistics.fmean([x for v in a_secs.values() for x in v]):.1f} s)")
    json.dump({"together": together, "apart": apart, "rows": rows}, open(os.path.join(ws, "summary.json"), "w"))


if __name__ == "__main__":
    main()
