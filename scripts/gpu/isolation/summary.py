"""Summary of scripts/gpu/multi_gpu.sh: per configuration, the mean of its
runs' median latencies with a 95 % t-interval, under isolation Host and Gpu,
and whether the two intervals overlap; RQ4's local/remote ratios."""
import json
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1])
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def interval(values):
    m = statistics.mean(values)
    if len(values) < 2:
        return m, m, m
    h = T975.get(len(values) - 1, 2.0) * statistics.stdev(values) / len(values) ** 0.5
    return m, m - h, m + h


def by_config(runs, key):
    groups = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r)
    return groups


def compare(base, other):
    sweep = {}
    for name in [base, other]:
        p = out / f"sweep-{name}.json"
        if p.exists():
            sweep[name] = by_config(json.loads(p.read_text()), lambda r: r["model"])
    if len(sweep) < 2:
        return
    print(f"\n== sweep: mean of the runs' median latency (ms) [95 % interval], {base} vs {other} ==")
    agree, ratios = 0, []
    for model in sorted(sweep[base]):
        h = interval([r["median"] for r in sweep[base][model]])
        g = interval([r["median"] for r in sweep[other].get(model, [])] or [float("nan")])
        overlap = h[1] <= g[2] and g[1] <= h[2]
        agree += overlap
        ratios.append(g[0] / h[0])
        gpus = sorted({str(r["gpu"]) for r in sweep[other].get(model, [])})
        print(f"  {model:14s} {base} {h[0]:8.3f} [{h[1]:.3f}, {h[2]:.3f}]  {other} {g[0]:8.3f} [{g[1]:.3f}, {g[2]:.3f}]  "
              f"ratio {g[0] / h[0]:.3f}  {'overlap' if overlap else 'DISJOINT'}  (on GPUs {gpus})")
    print(f"  intervals overlap for {agree} of {len(sweep[base])} configurations; "
          f"ratios {min(ratios):.3f}-{max(ratios):.3f}, median {statistics.median(ratios):.3f}, "
          f"{sum(r > 1 for r in ratios)} of {len(ratios)} above 1")
    for name in [base, other]:
        runs = [r for rs in sweep[name].values() for r in rs]
        print(f"  {name}: {sum(r['verdict'] == 'invalid' for r in runs)} of {len(runs)} runs invalid; "
              f"cores seen {sorted({len(r['cores'] or []) for r in runs})}")


names = sys.argv[2:]
if not names:
    compare("Host", "Gpu")
else:
    compare("Host", names[0])
    if len(names) > 2:
        compare(names[1], names[2])

p = out / "rq4.json"
if p.exists():
    runs = json.loads(p.read_text())
    numas = sorted({r["numa"] for r in runs})
    print(f"\n== RQ4: median latency (ms), NUMA nodes {numas} (first: local) ==")
    groups = by_config(runs, lambda r: (r["model"], r["batch"]))
    for (model, batch), rs in sorted(groups.items()):
        cells = {}
        for n in numas:
            vals = [r["median"] for r in rs if r["numa"] == n]
            if vals:
                cells[n] = interval(vals)
        if len(cells) == 2:
            loc, rem = cells[numas[0]], cells[numas[1]]
            print(f"  {model:14s} batch {batch:2d}: local {loc[0]:.3f} [{loc[1]:.3f}, {loc[2]:.3f}]  "
                  f"remote {rem[0]:.3f} [{rem[1]:.3f}, {rem[2]:.3f}]  remote/local {rem[0] / loc[0]:.3f}")
