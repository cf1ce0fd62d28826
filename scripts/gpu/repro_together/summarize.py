"""Summarizes scripts/gpu/repro_together.sh over one or more workspaces
(each a build from empty): for every comparison of the reproducibility
sweep, the ratio of median latencies and its 95 % half-width measured
together (paired over processes, t on the log-ratios) at the first 5 and
at all 10 processes, and apart (Welch on the logs), the agreement between
builds, and the GPU seconds each design needs for ±2 %.

    python3 summarize.py WORKSPACE [WORKSPACE…]
"""
import glob
import json
import math
import os
import statistics
import sys

T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086}


def t975(df):
    return T975.get(df, 1.96 + 2.5 / max(df, 1))


def params_of(path):
    return dict(p.split("=", 1) for p in os.path.basename(os.path.dirname(path)).split(","))


def together(ws, stage):
    """{rep: {member key: latency median}} and process seconds."""
    out, seconds = {}, []
    for path in glob.glob(os.path.join(ws, "out", stage, "*", "results.json")):
        rep = int(params_of(path)["rep"])
        out[rep] = {k: m["latency_ms"]["median"] for k, m in json.load(open(path))["members"].items()}
    for line in open(os.path.join(ws, "build.jsonl")):
        e = json.loads(line)
        if e.get("event") == "finished" and e.get("node", "").startswith(stage + "[") and "duration_ms" in e:
            seconds.append(e["duration_ms"] / 1e3)
    return out, seconds


def apart(ws, stage, axis):
    out, seconds = {}, []
    for path in glob.glob(os.path.join(ws, "out", stage, "*", "results.json")):
        p = params_of(path)
        out.setdefault(f"{p['model']},{p[axis]}", []).append(json.load(open(path))["latency_ms"]["median"])
    for line in open(os.path.join(ws, "build.jsonl")):
        e = json.loads(line)
        if e.get("event") == "finished" and e.get("node", "").startswith(stage + "[") and "duration_ms" in e:
            seconds.append(e["duration_ms"] / 1e3)
    return out, seconds


def paired(blocks, a, b, n):
    d = [math.log(blocks[r][a] / blocks[r][b]) for r in sorted(blocks)[:n] if a in blocks[r] and b in blocks[r]]
    if len(d) < 2:
        return None
    h = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return math.exp(statistics.mean(d)), math.exp(h) - 1, statistics.stdev(d), len(d)


def welch(xa, xb):
    la, lb = [math.log(x) for x in xa], [math.log(x) for x in xb]
    if len(la) < 2 or len(lb) < 2:
        return None
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    df = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    h = t975(round(df)) * math.sqrt(va + vb)
    return math.exp(statistics.mean(la) - statistics.mean(lb)), math.exp(h) - 1, (statistics.variance(la), statistics.variance(lb))


COMPARISONS = []
for m in ("vit16x6x384", "vit32x12x768", "vit32x18x1024"):
    COMPARISONS.append(("gpu", f"{m},Cuda", f"{m},None", f"{m}: graph / eager"))
for g in ("None", "Cuda"):
    COMPARISONS.append(("gpu", f"vit32x12x768,{g}", f"vit16x6x384,{g}", f"vit32x12x768 / vit16x6x384 ({g})"))
    COMPARISONS.append(("gpu", f"vit32x18x1024,{g}", f"vit16x6x384,{g}", f"vit32x18x1024 / vit16x6x384 ({g})"))
for m in ("vit32x6x384", "vit16x12x768"):
    for p in ("async:2", "async:4"):
        COMPARISONS.append(("cpu", f"{m},{p}", f"{m},sync", f"{m}: {p} / sync"))
COMPARISONS.append(("cpu", "vit16x12x768,sync", "vit32x6x384,sync", "vit16x12x768 / vit32x6x384 (sync)"))
AA = [("gpu", "vit16x6x384#2,None", "vit16x6x384,None", "A/A vit16x6x384 eager"),
      ("gpu", "vit16x6x384#2,Cuda", "vit16x6x384,Cuda", "A/A vit16x6x384 graph"),
      ("cpu", "vit32x6x384#2,sync", "vit32x6x384,sync", "A/A vit32x6x384 sync"),
      ("cpu", "vit32x6x384#2,async:2", "vit32x6x384,async:2", "A/A vit32x6x384 async:2")]

wss = sys.argv[1:]
for ws in wss:
    host = os.path.join(ws, "host.txt")
    if os.path.exists(host):
        print(f"### {ws}\n\n```\n{open(host).read().strip()}\n```\n")
data = []
for ws in wss:
    t = {k: together(ws, f"{k}_together") for k in ("gpu", "cpu")}
    a = {"gpu": apart(ws, "gpu_apart", "graph"), "cpu": apart(ws, "cpu_apart", "pipeline")}
    data.append((t, a))
print("| comparison | together, 5 processes | together, 10 | apart (build 1) | apart / together-10 width | builds agree |")
print("|---|---|---|---|---|---|")
agree = total = 0
for kind, x, y, label in COMPARISONS + AA:
    cells = []
    per_build = []
    for t, a in data:
        blocks = t[kind][0]
        per_build.append(paired(blocks, x, y, 10))
    t1, a1 = data[0]
    p5, p10 = paired(t1[kind][0], x, y, 5), paired(t1[kind][0], x, y, 10)
    fmt = lambda r: f"{r[0]:.4f} ±{100 * r[1]:.2f} %" if r else "—"
    w = welch(a1[kind][0].get(x, []), a1[kind][0].get(y, [])) if "#2" not in x else None
    ratio = f"{w[1] / p10[1]:.1f}×" if w and p10 and p10[1] > 0 else "—"
    ok = "—"
    if len(per_build) > 1 and all(per_build):
        total += 1
        good = abs(math.log(per_build[0][0]) - math.log(per_build[1][0])) <= math.hypot(per_build[0][1], per_build[1][1])
        agree += good
        ok = f"{'yes' if good else 'no'} ({per_build[1][0]:.4f} ±{100 * per_build[1][1]:.2f} %)"
    print(f"| {label} | {fmt(p5)} | {fmt(p10)} | {fmt(w)} | {ratio} | {ok} |")
if total:
    print(f"\nThe two together builds agree (|Δ log-ratio| ≤ √(h₁² + h₂²)) for {agree} of {total} comparisons.")

print("\n## GPU seconds to ±2 %\n")
print("| comparison | together: processes, s | apart: processes a side, s |")
print("|---|---|---|")
target = math.log1p(0.02)
for kind, x, y, label in COMPARISONS:
    t1, a1 = data[0]
    p10 = paired(t1[kind][0], x, y, 10)
    sec_t = statistics.median(t1[kind][1]) if t1[kind][1] else float("nan")
    sec_a = statistics.median(a1[kind][1]) if a1[kind][1] else float("nan")
    w = welch(a1[kind][0].get(x, []), a1[kind][0].get(y, []))
    need_t = math.ceil((1.96 * p10[2] / target) ** 2) if p10 else None
    need_a = math.ceil(1.96 ** 2 * (w[2][0] + w[2][1]) / target ** 2) if w else None
    ct = f"{max(need_t, 2)}, {max(need_t, 2) * sec_t:.0f}" if need_t is not None else "—"
    ca = f"{max(need_a, 2)}, {2 * max(need_a, 2) * sec_a:.0f}" if need_a is not None else "—"
    print(f"| {label} | {ct} | {ca} |")
print("\n(Together, one process measures all six members of its block; the seconds are its whole process. "
      "Apart, each side needs its processes; the seconds count both sides.)")
