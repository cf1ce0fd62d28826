#!/usr/bin/env python3
"""The pandas peer of `vitgraph compare build:1 build:2` for
scripts/bench_compare.py: the same join and the same interval, written the
straightforward way with pandas and numpy.

Reads the runs of the workspace's two builds from cache/state.sqlite (the
attempts of each build joined to its runs), each run's results.json from
cache/objects/, groups the runs by configuration (the node id without
`rep=N`), and per configuration and metric (throughput, median and p99
latency) prints both sides' means and the 95 % interval of B / A: Welch's
on the log scale over the runs (t quantiles from the table below,
interpolated at Welch–Satterthwaite's degrees of freedom), as `vitgraph
compare` computes it. The runs' within-run standard errors are read too
(vitgraph reads them for a side of one run), as the same work.

Usage: bench_compare_pandas.py WORKSPACE
"""

import json
import os
import re
import sqlite3
import struct
import sys

import numpy as np
import pandas as pd

# t(0.975, df) for df = 1..30 (Student's t tables); 1.96 beyond.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042]


METRICS = {"throughput_images_per_s": None, "latency_ms.median": 0.5, "latency_ms.p99": 0.99}


def outputs(blob):
    out, i = {}, 0
    while i < len(blob):
        (n,) = struct.unpack_from("<I", blob, i)
        name = blob[i + 4:i + 4 + n].decode()
        digest = blob[i + 4 + n:i + 36 + n]
        out[name] = digest.hex()
        i += 4 + n + 32 + 8
    return out


def rel_se(samples, q):
    s = np.sort(np.asarray(samples))
    n = len(s)
    if q is None:
        return s.std(ddof=1) / np.sqrt(n) / s.mean()
    sd = np.sqrt(n * q * (1 - q))
    lo = np.interp(q * (n - 1) - sd, np.arange(n), s)
    hi = np.interp(q * (n - 1) + sd, np.arange(n), s)
    return (hi - lo) / 2 / np.quantile(s, q)


def main():
    root = sys.argv[1]
    db = sqlite3.connect(os.path.join(root, "cache", "state.sqlite"))
    builds = db.execute("SELECT host, pid, pid_start FROM attempts GROUP BY host, pid, pid_start ORDER BY MIN(id)").fetchall()
    frames = []
    for side, (host, pid, start) in zip("AB", builds[-2:]):
        df = pd.read_sql_query(
            "SELECT a.node_id, r.outputs FROM attempts a JOIN runs r ON r.key = a.key "
            "WHERE a.host = ? AND a.pid = ? AND a.pid_start = ? AND a.status = 'succeeded'",
            db, params=(host, pid, start))
        df["side"] = side
        frames.append(df)
    runs = pd.concat(frames, ignore_index=True)
    runs["results"] = runs["outputs"].map(lambda b: outputs(b).get("results.json"))
    runs = runs.dropna(subset=["results"])
    runs["config"] = runs["node_id"].map(lambda s: re.sub(r",rep=\d+\]$", "]", s))
    records = []
    for path in runs["results"]:
        with open(os.path.join(root, "cache", "objects", path[:2], path[2:])) as f:
            doc = json.load(f)
        row = {}
        for m, q in METRICS.items():
            head, *rest = m.split(".")
            v = doc[head]
            for r in rest:
                v = v[r]
            row[m] = v
            row[m + ".se"] = rel_se(doc["latency_samples_ms"], q)
        records.append(row)
    runs = pd.concat([runs.reset_index(drop=True), pd.DataFrame(records)], axis=1)
    out = []
    for config, g in runs.groupby("config"):
        a, b = g[g.side == "A"], g[g.side == "B"]
        if len(a) < 2 or len(b) < 2:
            continue
        for m in METRICS:
            va, vb = a[m].to_numpy(), b[m].to_numpy()
            ma, mb = va.mean(), vb.mean()
            ta = va.var(ddof=1) / (len(va) * ma * ma)
            tb = vb.var(ddof=1) / (len(vb) * mb * mb)
            ratio = mb / ma
            df = (ta + tb) ** 2 / (ta * ta / (len(va) - 1) + tb * tb / (len(vb) - 1))
            t = np.interp(df, np.arange(1, len(T975) + 1), T975) if df <= len(T975) else 1.96
            half = t * np.sqrt(ta + tb)
            out.append((config, m, ma, mb, ratio, ratio * np.exp(-half), ratio * np.exp(half)))
    result = pd.DataFrame(out, columns=["config", "metric", "a", "b", "ratio", "low", "high"])
    result.to_csv(sys.stdout if len(sys.argv) < 3 else sys.argv[2], index=False)


if __name__ == "__main__":
    main()
