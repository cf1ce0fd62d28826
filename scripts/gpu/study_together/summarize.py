"""Summarizes scripts/gpu/study_together.sh: for each comparison, the
ratio and its 95 % half-width measured together and apart (from the
reports' compare.csv), the agreement of the two, the A/A checks of the
together blocks, and the build times.

    python3 summarize.py WORKSPACE
"""
import csv
import glob
import json
import math
import os
import statistics
import sys

ws = sys.argv[1]
TAIL = {"baseline", "metric_baseline", "metric_value", "ratio", "ci95_low", "ci95_high",
        "n_baseline", "n_value", "reps_baseline", "reps_value", "interval", "verdict",
        "env_group", "note"}
T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def rows(report):
    path = os.path.join(ws, "out", report, "compare.csv")
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            key = ",".join(f"{k}={v}" for k, v in r.items() if k not in TAIL)
            out[key] = r
    return out


def half(row):
    try:
        r, lo, hi = (float(row[k]) for k in ("ratio", "ci95_low", "ci95_high"))
    except (ValueError, KeyError, TypeError):
        return None, None
    return r, (hi - lo) / 2 / r


def fmt(r, h):
    return f"{r:.4f} ±{100 * h:.2f} %" if r is not None and h is not None else "—"


print(open(os.path.join(ws, "host.txt")).read())
print("## Build times\n")
print(open(os.path.join(ws, "times.txt")).read())
print("## Comparisons (ratio ±95 % half-width over processes)\n")
print("| comparison | together | interval | apart | interval | apart / together width | agree |")
print("|---|---|---|---|---|---|---|")
agree, total = 0, 0
for exp in ("s2", "g3", "p1", "rq5", "rq2"):
    t_rows, a_rows = rows(f"{exp}_together_report"), rows(f"{exp}_apart_report")
    for key, t in sorted(t_rows.items()):
        if "#2" in key:
            continue
        a = a_rows.get(key, {})
        tr, th = half(t)
        ar, ah = half(a)
        ok = "—"
        if None not in (tr, th, ar, ah):
            total += 1
            good = abs(math.log(tr) - math.log(ar)) <= math.hypot(th, ah)
            agree += good
            ok = "yes" if good else "no"
        width = f"{ah / th:.1f}×" if th and ah else "—"
        print(f"| {exp} {key} / {t['baseline']} | {fmt(tr, th)} | {t.get('interval', '')} | "
              f"{fmt(ar, ah)} | {a.get('interval', '—')} | {width} | {ok} |")
print(f"\nTogether and apart agree (|Δ log-ratio| ≤ √(h₁² + h₂²)) for {agree} of {total} comparisons.\n")

print("## A/A (the first member's second instance, per process)\n")
for stage, metric in (("s2_together", "time_ms"), ("g3_together", "time_ms"), ("p1_together", "time_ms"),
                      ("rq5_together", "latency_ms"), ("rq2_together", "latency_ms")):
    by = {}
    for path in sorted(glob.glob(os.path.join(ws, "out", stage, "*", "results.json"))):
        group = ",".join(p for p in os.path.basename(os.path.dirname(path)).split(",") if not p.startswith("rep="))
        m = json.load(open(path))["members"]
        for key, v in m.items():
            if key.endswith("#2") and key[:-2] in m:
                try:
                    by.setdefault(group, []).append(
                        math.log(v[metric]["median"] / m[key[:-2]][metric]["median"]))
                except (KeyError, TypeError, ZeroDivisionError):
                    pass
    for group, xs in sorted(by.items()):
        n = len(xs)
        h = T975.get(n - 1, 2.0) * statistics.stdev(xs) / math.sqrt(n) if n > 1 else float("nan")
        print(f"- {stage} {group or '(one block)'}: {math.exp(statistics.mean(xs)):.4f} "
              f"±{100 * (math.exp(h) - 1):.2f} % over {n} processes")
