"""Summarizes scripts/gpu/vit_together.sh: each comparison's ratio and
95 % half-width measured together and apart, the A/A checks, build times,
and the GPU seconds each design needs to reach ±2 %.

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
TARGET = 0.02


def rows(report):
    path = os.path.join(ws, "out", report, "compare.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def half(row):
    try:
        r, lo, hi = (float(row[k]) for k in ("ratio", "ci95_low", "ci95_high"))
    except (ValueError, KeyError):
        return None, None
    return r, (hi - lo) / 2 / r


def durations(name):
    out = {}
    path = os.path.join(ws, f"{name}.jsonl")
    if os.path.exists(path):
        for line in open(path):
            e = json.loads(line)
            if e.get("event") == "finished" and "duration_ms" in e and e["node"].startswith(f"{name}_runs["):
                out[e["node"]] = e["duration_ms"] / 1e3
    return out


def t975(df):
    table = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
             8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 14: 2.145, 19: 2.093}
    return table.get(df, 1.96 + 2.5 / df)


def apart_logs():
    """log latency_ms.median and throughput of each apart run, by (model, batch)."""
    by = {}
    for path in glob.glob(os.path.join(ws, "out", "apart_runs", "*", "results.json")):
        params = dict(p.split("=", 1) for p in os.path.basename(os.path.dirname(path)).split(","))
        d = json.load(open(path))
        key = (params["model"], params["batch"])
        by.setdefault(key, []).append(
            (math.log(d["latency_ms"]["median"]), math.log(d["throughput_images_per_s"])))
    return by


print(open(os.path.join(ws, "host.txt")).read())
print("## Build times\n")
print(open(os.path.join(ws, "times.txt")).read())
together_s = durations("together")
apart_s = durations("apart")
n_together = len(together_s)
print(f"together: {n_together} processes, {sum(together_s.values()):.1f} s of runs "
      f"({statistics.median(together_s.values()) if together_s else float('nan'):.1f} s median a process)")
print(f"apart: {len(apart_s)} processes, {sum(apart_s.values()):.1f} s of runs "
      f"({statistics.median(apart_s.values()) if apart_s else float('nan'):.1f} s median a process)\n")

logs = apart_logs()
per_apart_run = statistics.median(apart_s.values()) if apart_s else float("nan")
print("## Comparisons (ratio ±95 % half-width)\n")
print("| comparison | together | processes | apart | apart runs a side | apart/together width | apart runs a side for ±2 % | apart GPU s for ±2 % |")
print("|---|---|---|---|---|---|---|---|")
for report, other, metric_i in (("batch", "model", 1), ("model", "batch", 0)):
    t_rows = {(r[other], r[report]): r for r in rows(f"together_{report}")}
    a_rows = {(r[other], r[report]): r for r in rows(f"apart_{report}")}
    for key, t in sorted(t_rows.items()):
        if "#2" in key[0] + key[1]:
            continue
        a = a_rows.get(key, {})
        tr, th = half(t)
        ar, ah = half(a) if a else (None, None)
        # What apart needs: both sides' per-run log variance.
        base = t["baseline"]
        sides = [(key[0], key[1]) if report == "model" else (key[0], key[1]),
                 (base, key[1]) if report == "model" else (key[0], base)]
        if report == "batch":
            sides = [(key[0], key[1]), (key[0], base)]
        else:
            sides = [(key[1], key[0]), (base, key[0])]
        var = [statistics.variance([x[metric_i] for x in logs.get(s, [])]) if len(logs.get(s, [])) > 1 else None for s in sides]
        need = None
        if None not in var:
            need = math.ceil((1.96 ** 2) * (var[0] + var[1]) / math.log1p(TARGET) ** 2)
        label = f"{report} {key[1]} / {base} at {other} {key[0]}"
        fmt = lambda r, h: f"{r:.4f} ±{100 * h:.2f} %" if r is not None else "—"
        ratio = f"{ah / th:.1f}×" if th and ah else "—"
        gpu = f"{2 * need * per_apart_run:.0f}" if need else "—"
        print(f"| {label} | {fmt(tr, th)} | {t.get('reps_value', '')} | {fmt(ar, ah)} | {a.get('reps_value', '—')} | {ratio} | {need or '—'} | {gpu} |")

print("\n## A/A (second instance of the first model, per process)\n")
by_batch = {}
for path in sorted(glob.glob(os.path.join(ws, "out", "together_runs", "*", "results.json"))):
    m = json.load(open(path))["members"]
    for key, v in m.items():
        name, batch = key.split(",")
        if name.endswith("#2"):
            first = m.get(f"{name[:-2]},{batch}")
            if first:
                by_batch.setdefault(batch, []).append(
                    math.log(v["latency_ms"]["median"] / first["latency_ms"]["median"]))
for batch, xs in sorted(by_batch.items()):
    n = len(xs)
    mean = statistics.mean(xs)
    h = t975(n - 1) * statistics.stdev(xs) / math.sqrt(n) if n > 1 else float("nan")
    print(f"- batch {batch}: {math.exp(mean):.4f} ±{100 * (math.exp(h) - 1):.2f} % over {n} processes")

print("\n## The quickstart as built today (apart, traced, `-p device=cuda`)\n")
for r in rows("quickstart_report"):
    rr, hh = half(r)
    if rr is not None:
        print(f"- {r['model']} batch {r['batch']} / {r['baseline']}: {rr:.4f} ±{100 * hh:.2f} % ({r['reps_value']} runs a side, {r['verdict']})")
