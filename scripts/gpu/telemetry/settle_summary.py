"""Summary of scripts/gpu/settle.sh: per configuration, the 95 % half-width
(t-interval, 4 degrees of freedom) of its 5 runs' median latencies over their
mean, after the first build and after the invalid runs were measured again."""
import json
import pathlib
import statistics
import sys

results = pathlib.Path(sys.argv[1])
T975_4 = 2.776


def half_widths(runs):
    by = {}
    for r in runs:
        by.setdefault((r["model"], r["graph"]), []).append(r["median"])
    out = {}
    for k, v in sorted(by.items()):
        if len(v) > 1:
            out[k] = T975_4 * statistics.stdev(v) / len(v) ** 0.5 / statistics.mean(v)
    return out


for cond in ["base", "settle"]:
    first = json.loads((results / f"{cond}-1.json").read_text())
    last = json.loads((results / f"{cond}-3.json").read_text())
    h1, h3 = half_widths(first), half_widths(last)
    inv1 = sum(r["verdict"] == "invalid" for r in first)
    inv3 = sum(r["verdict"] == "invalid" for r in last)
    print(f"\n== {cond}: invalid runs after build 1: {inv1} of {len(first)}; after build 3: {inv3} ==")
    for k in h1:
        meds = sorted(r["median"] for r in last if (r["model"], r["graph"]) == k)
        print(f"  {k[0]:14s} graph {k[1]:5s} ±{100 * h1[k]:5.1f} % -> ±{100 * h3[k]:5.1f} %   medians {', '.join(f'{m:.3f}' for m in meds)}")
    settles = [r["settle"] for r in last if r.get("settle")]
    if settles:
        n = [s["batches"] for s in settles]
        print(f"  settle: {sum(s['settled'] for s in settles)} of {len(settles)} settled, "
              f"extra batches median {statistics.median(n)}, max {max(n)}")
    flags = {}
    for r in first + last:
        for f in r["flags"]:
            flags[f.split(":")[0].split(" ")[0]] = flags.get(f.split(":")[0].split(" ")[0], 0) + 1
    print(f"  flags seen (builds 1 and 3): {flags}")
    print("  " + (results / f"{cond}-status.txt").read_text().strip().splitlines()[-1])
