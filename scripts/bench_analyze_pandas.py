#!/usr/bin/env python3
"""The reference for `benches/bench_analyze.rs`: the same core metrics as
vitgraph's Analyze (window, clipped busy/span/gaps per device, the
cuda_gpu_kern_sum table, memcpy per direction, launch latency joined on
correlation id and process), written the straightforward pandas way.

Usage: bench_analyze_pandas.py TRACE.sqlite [WINDOW]   (prints JSON on stdout)
"""

import json
import sqlite3
import sys

import numpy as np
import pandas as pd


def union(starts, ends):
    """busy, span and gaps of intervals (numpy arrays, any order)."""
    if len(starts) == 0:
        return 0, 0, np.array([], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    gaps = (s[1:] - run_end[:-1])[new[1:]]
    piece = np.cumsum(new) - 1
    piece_start = s[new]
    piece_end = pd.Series(run_end).groupby(piece).max().to_numpy()
    busy = int((piece_end - piece_start).sum())
    return busy, int(run_end[-1] - s[0]), gaps


def main():
    path = sys.argv[1]
    window = sys.argv[2] if len(sys.argv) > 2 else "measure"
    con = sqlite3.connect(path)
    k = pd.read_sql(
        "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, "
        "s.value AS name FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName",
        con,
    )
    mc = pd.read_sql("SELECT start, end, deviceId, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY", con)
    ms = pd.read_sql("SELECT start, end, deviceId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET", con)
    rt = pd.read_sql("SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME", con)
    nv = pd.read_sql("SELECT start, end, text FROM NVTX_EVENTS WHERE end IS NOT NULL", con)

    w = nv[nv.text == window]
    lo, hi = (w.start.min(), w.end.max()) if len(w) else (np.iinfo(np.int64).min, np.iinfo(np.int64).max)
    k = k[(k.start < hi) & (k.end > lo)].copy()
    mc = mc[(mc.start < hi) & (mc.end > lo)].copy()
    ms = ms[(ms.start < hi) & (ms.end > lo)].copy()
    rt["pid"] = rt.globalTid & ~0xFFFFFF
    k = k.merge(
        rt[["pid", "correlationId", "start"]].rename(columns={"start": "api_start", "pid": "globalPid"}),
        on=["globalPid", "correlationId"],
        how="left",
    )

    devices = []
    for dev in sorted(set(k.deviceId) | set(mc.deviceId) | set(ms.deviceId)):
        kd = k[k.deviceId == dev]
        ks, ke = kd.start.clip(lower=lo).to_numpy(), kd.end.clip(upper=hi).to_numpy()
        busy, span, gaps = union(ks, ke)
        md, sd = mc[mc.deviceId == dev], ms[ms.deviceId == dev]
        all_s = np.concatenate([ks, md.start.clip(lower=lo).to_numpy(), sd.start.clip(lower=lo).to_numpy()])
        all_e = np.concatenate([ke, md.end.clip(upper=hi).to_numpy(), sd.end.clip(upper=hi).to_numpy()])
        busy_all, span_all, _ = union(all_s, all_e)
        dur = kd.end - kd.start
        g = dur.groupby(kd.name).agg(["sum", "count", "mean", "median", "min", "max", "std"]).fillna(0.0)
        g = g.sort_values("sum", ascending=False)
        g["pct"] = 100.0 * g["sum"] / g["sum"].sum()
        lat = (kd.start - kd.api_start).dropna()
        md = md.assign(dur=md.end - md.start)
        mem = md.groupby("copyKind").agg(count=("bytes", "size"), bytes=("bytes", "sum"), time=("dur", "sum"))
        ksum = int((ke - ks).sum())
        devices.append({
            "device": int(dev),
            "kernel_count": int(len(kd)),
            "kernel_time_sum_ns": ksum,
            "span_ns": span,
            "busy_ns": busy,
            "gpu_utilization": busy / span if span else 0.0,
            "busy_all_ns": busy_all,
            "gpu_utilization_all": busy_all / span_all if span_all else 0.0,
            "kernel_time_ratio": ksum / span if span else 0.0,
            "gaps": {
                "count_ge_1us": int((gaps >= 1000).sum()),
                "count_ge_10us": int((gaps >= 10000).sum()),
                "count_ge_100us": int((gaps >= 100000).sum()),
                "largest_ns": sorted(gaps.tolist(), reverse=True)[:10],
            },
            "launch_latency_ns": {
                "median": float(lat.median()) if len(lat) else 0.0,
                "p99": float(np.percentile(lat, 99, method="inverted_cdf")) if len(lat) else 0.0,
            },
            "memcpy": {str(kind): {"count": int(r["count"]), "bytes": int(r["bytes"]), "time_ns": int(r["time"])}
                       for kind, r in mem.iterrows()},
            "kernels": [{"name": n, "time_pct": r["pct"], "total_ns": int(r["sum"]), "instances": int(r["count"]),
                         "avg_ns": r["mean"], "med_ns": r["median"], "min_ns": int(r["min"]),
                         "max_ns": int(r["max"]), "stddev_ns": r["std"]} for n, r in g.iterrows()],
        })
    json.dump({"devices": devices}, sys.stdout)


if __name__ == "__main__":
    main()
