#!/usr/bin/env python3
"""Benchmark of `vitgraph compare` (prints figures; not a timed test).

Writes a workspace whose store holds two builds of a study of N
configurations, each measured R times (a `Vit`-like `results.json` with
S per-batch latencies) and analysed R times (a `metrics.json` with kernels),
then times, in the same run:

  compare         `vitgraph compare build:1 build:2` (text to /dev/null),
                  median of --repeat runs, and its peak RSS (/usr/bin/time -v)
  compare --kernels  the same with the kernel diff of every analysis pair
  no summaries    compare after the store's summaries are deleted (a store
                  recorded by a vitgraph that kept none): every results.json
                  is read and parsed, and the summaries are kept again
  trace diff      `vitgraph trace diff` of two traces of 1,000,000 kernels
                  (--trace-diff; written by `cargo bench --bench bench_analyze`'s
                  generator, the second with other durations and ten kernels
                  swapped), median of --repeat runs and peak RSS
  pandas peer     the same join and bootstrap written the straightforward
                  way with pandas and numpy (scripts/bench_compare_pandas.py):
                  runs of both builds read from state.sqlite and their
                  results.json, grouped by configuration, each metric's mean
                  per side and a 2,000-draw hierarchical bootstrap of B / A

The store is written directly (the schema of the `vitgraph` under test,
which creates it): runs, attempts of two builds, current runs. Results
files come from a pool of --pool distinct files (content-addressed objects
are shared by identical content, as in a real store), so a 100,000-
configuration store fits a small disk; every run still reads and parses its
file.

Usage: scripts/bench_compare.py [--n 1000] [--reps 3] [--samples 200]
                                [--repeat 5] [--vitgraph target/release/vitgraph]
                                [--pandas] [--keep] [--root DIR]
                                [--skip-kernels] [--trace-diff]
"""

import argparse
import json
import os
import random
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time

try:
    import blake3
except ImportError:
    sys.exit("bench_compare.py names objects by BLAKE3, as the store does: `pip install blake3`")

HERE = os.path.dirname(os.path.abspath(__file__))


def timed_rss(cmd, cwd):
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stderr.decode()[-2000:]}")
    rss = float("nan")
    for line in r.stderr.decode().splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1]) / 1024
    return dt, rss


def encode_outputs(entries):
    out = b""
    for name, digest, size in sorted(entries):
        raw = name.encode()
        out += struct.pack("<I", len(raw)) + raw + digest + struct.pack("<Q", size)
    return out


def write_object(root, content):
    # Named by its BLAKE3 hash, as the store names objects: compare checks
    # the hash of every results.json it reads from its object.
    digest = blake3.blake3(content).digest()
    hexd = digest.hex()
    d = os.path.join(root, "cache", "objects", hexd[:2])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hexd[2:]), "wb") as f:
        f.write(content)
    return digest, len(content)


def results_doc(rng, level, samples):
    lat = sorted(level * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(samples))
    mean = sum(lat) / len(lat)
    rng.shuffle(lat)
    s = sorted(lat)
    q = lambda p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]
    return {
        "config": {"model": "vit", "batch": 8, "samples": samples},
        "throughput_images_per_s": 8 * 1000.0 / mean,
        "latency_ms": {"mean": mean, "median": q(0.5), "p90": q(0.9), "p99": q(0.99),
                       "min": s[0], "max": s[-1], "median_ci95": [q(0.45), q(0.55)]},
        "latency_samples_ms": lat,
        "forward_samples_ms": [x * 0.9 for x in lat],
        "telemetry": {"batch_sm_mhz": [1980] * samples, "batch_reasons": [0] * samples},
        "validity": {"verdict": "valid", "flags": []},
    }


def metrics_doc(rng, kernels):
    ks = []
    for i in range(kernels):
        n = 10 + rng.randrange(100)
        total = n * (1000 + rng.randrange(20000))
        ks.append({"name": f"void kernel_{i}<float, {i % 7}>(float const*, float*, int)", "time_pct": 0.0,
                   "total_ns": total, "instances": n, "avg_ns": total / n, "med_ns": total / n,
                   "min_ns": 1000, "max_ns": 21000, "stddev_ns": 10.0})
    dev = {"device": 0, "kernel_count": sum(k["instances"] for k in ks),
           "kernel_time_sum_ns": sum(k["total_ns"] for k in ks), "span_ns": 10**9, "busy_ns": 5 * 10**8,
           "gpu_utilization": 0.5, "busy_all_ns": 5 * 10**8, "span_all_ns": 10**9, "gpu_utilization_all": 0.5,
           "kernel_time_ratio": 0.5, "idle_time_ns": 5 * 10**8,
           "gaps": {"count_ge_1us": 0, "count_ge_10us": 0, "count_ge_100us": 0, "largest_ns": [], "count": 0},
           "launch_latency_ns": {"median": 5000.0, "p99": 9000, "count": 10, "mean": 5000.0, "min": 1, "max": 9},
           "memcpy": {}, "kernels": ks, "clipped_kernels": 0, "streams": 2,
           "cpu_api": {"launch_call_mean_ns": 0.0, "launch_call_median_ns": 0.0, "api_time_per_kernel_ns": 0.0},
           "memset": {"count": 0, "bytes": 0, "time_ns": 0, "bandwidth_gbps": 0.0},
           "memory_time": [], "memory_size": []}
    return {"metrics_version": 1,
            "source": {"file": "trace.sqlite", "producer": "vitgraph", "producer_version": "bench",
                       "schema_version": "1", "gpus": []},
            "window": {"name": "measure", "found": False, "ranges": 0, "start_ns": None, "end_ns": None,
                       "duration_ns": None},
            "devices": [dev], "batches": None}


def make_workspace(root, vitgraph, n, reps, samples, pool):
    os.makedirs(os.path.join(root, "pipelines"))
    with open(os.path.join(root, "pipelines", "p.ron"), "w") as f:
        f.write('Pipeline(stages: {"seed": Stage(task: Command(run: "true"))})\n')
    subprocess.run([vitgraph, "build"], cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rng = random.Random(1)
    results = {1: [], 2: []}
    for build in (1, 2):
        for i in range(min(pool, n * reps)):
            level = 5.0 * (1 + 0.03 * rng.gauss(0, 1)) * (1.0 if build == 1 else 1.01)
            results[build].append(write_object(root, json.dumps(results_doc(rng, level, samples)).encode()))
    metrics = [write_object(root, json.dumps(metrics_doc(rng, 40)).encode()) for _ in range(min(pool, 100))]
    db = sqlite3.connect(os.path.join(root, "cache", "state.sqlite"))
    # The environment record of the seed build's run, shared by every run.
    probe = db.execute("SELECT json FROM envs LIMIT 1").fetchone()
    env_json = probe[0] if probe else '{"host": "bench"}'
    env_hash = os.urandom(32)
    db.execute("INSERT INTO envs (hash, json) VALUES (?, ?)", (env_hash, env_json))
    t0 = 1_790_000_000_000
    runs, attempts, current = [], [], []
    k = 0
    for build in (1, 2):
        start = t0 + build * 10_000_000
        for c in range(n):
            for rep in range(1, reps + 1):
                for stage, objs, name in (("bench_runs", results[build], "results.json"),
                                          ("bench_analysis", metrics, "metrics.json")):
                    node = f"{stage}[model=m{c % 50},batch={c // 50},rep={rep}]"
                    key = os.urandom(32)
                    digest, size = objs[k % len(objs)]
                    k += 1
                    parts = {"parts": {"kind": "Vit", "version": 1,
                                       "spec": {"Vit": {"batch": c // 50, "samples": samples}},
                                       "inputs": {}, "upstream": {},
                                       "env": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04",
                                               "libtorch": "2.10.0" if build == 1 else "2.11.0"}},
                             "params": {"model": f"m{c % 50}", "batch": c // 50, "rep": rep}}
                    t = start + len(runs)
                    runs.append((key, node, stage, json.dumps(parts), env_hash,
                                 encode_outputs([(name, digest, size)]), t, 100, t + 100))
                    attempts.append((node, key, "succeeded", "bench", 1000 + build, 7, t - 1, t + 100))
                    if build == 2:
                        current.append((node, stage, key))
    db.executemany("INSERT INTO runs (key, node_id, stage, key_parts, env_hash, outputs, log, started_at_ms,"
                   " duration_ms, committed_at_ms) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)", runs)
    db.executemany("INSERT INTO attempts (node_id, key, status, host, pid, pid_start, started_at_ms,"
                   " finished_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", attempts)
    db.execute("DELETE FROM node_runs")
    db.executemany("INSERT INTO node_runs (node_id, stage, run_seq) SELECT ?, ?, seq FROM runs WHERE key = ?",
                   current)
    db.commit()
    db.close()
    return len(runs)


def has_summaries(root):
    db = sqlite3.connect(os.path.join(root, "cache", "state.sqlite"))
    found = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'summaries'").fetchone()[0]
    db.close()
    return found > 0


def forget_summaries(root):
    db = sqlite3.connect(os.path.join(root, "cache", "state.sqlite"))
    db.execute("DELETE FROM summaries")
    db.commit()
    db.close()


def trace_diff(vitgraph, root, repeat):
    build = subprocess.run(["cargo", "bench", "--bench", "bench_analyze", "--no-run", "--message-format=json"],
                           cwd=os.path.dirname(HERE), capture_output=True, text=True, check=True)
    exe = [json.loads(l)["executable"] for l in build.stdout.splitlines()
           if '"executable":"' in l and "bench_analyze" in l][-1]
    a, b = os.path.join(root, "a.sqlite"), os.path.join(root, "b.sqlite")
    subprocess.run([exe, "--write-child", a, "0"], check=True)
    subprocess.run([exe, "--write-child", b, "1"], check=True)
    cmd = [vitgraph, "trace", "diff", a, b]
    timed_rss(cmd, root)
    runs = [timed_rss(cmd, root) for _ in range(repeat)]
    walls = [w for w, _ in runs]
    return ("trace diff, 2 x 1,000,000 kernels", statistics.median(walls), min(walls), max(walls),
            max(r for _, r in runs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--pool", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    ap.add_argument("--pandas", action="store_true", help="also time the pandas peer")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-kernels", action="store_true", help="leave out `compare --kernels`")
    ap.add_argument("--root", help="time an existing workspace written by --keep instead of writing one")
    ap.add_argument("--trace-diff", action="store_true", help="also time the 1,000,000-kernel trace diff")
    args = ap.parse_args()
    vitgraph = os.path.abspath(args.vitgraph)
    if args.root:
        root = args.root
        args.keep = True
        print(f"workspace: {root}")
    else:
        root = tempfile.mkdtemp(prefix="vitgraph-bench-compare-")
        t = time.perf_counter()
        rows = make_workspace(root, vitgraph, args.n, args.reps, args.samples, args.pool)
        print(f"workspace: {args.n} configurations x {args.reps} repetitions x 2 builds, "
              f"{rows} runs (half analyses), written in {time.perf_counter() - t:.1f} s: {root}")
    table = []
    # The store's first build is the one that created it; the two study
    # builds are the last two.
    check = subprocess.run([vitgraph, "compare", "build:-2", "build:-1", "--csv"], cwd=root,
                           capture_output=True, text=True, check=True).stdout
    ours = {}
    for line in check.splitlines()[1:]:
        cells = next(__import__("csv").reader([line]))
        ours[(cells[0], cells[2])] = (float(cells[12]), float(cells[13]), float(cells[14]))
    configs = {c for c, _ in ours}
    if not args.root and len(configs) != args.n:
        sys.exit(f"compare paired {len(configs)} configurations, not {args.n}")
    kinds = [("compare build:-2 build:-1", [])]
    if not args.skip_kernels:
        kinds.append(("compare --kernels", ["--kernels"]))
    for label, extra in kinds:
        cmd = [vitgraph, "compare", "build:-2", "build:-1"] + extra
        timed_rss(cmd, root)  # warm the page cache
        runs = [timed_rss(cmd, root) for _ in range(args.repeat)]
        walls = [w for w, _ in runs]
        table.append((label, statistics.median(walls), min(walls), max(walls), max(r for _, r in runs)))
    if has_summaries(root):
        # A store whose runs were recorded before summaries were kept: every
        # results.json is read and parsed, and the summaries are kept.
        cmd = [vitgraph, "compare", "build:-2", "build:-1"]
        runs = []
        for _ in range(args.repeat):
            forget_summaries(root)
            runs.append(timed_rss(cmd, root))
        walls = [w for w, _ in runs]
        table.append(("compare, no summaries kept (every results.json read)", statistics.median(walls),
                      min(walls), max(walls), max(r for _, r in runs)))
    if args.pandas:
        out = os.path.join(root, "pandas.csv")
        subprocess.run([sys.executable, os.path.join(HERE, "bench_compare_pandas.py"), root, out], check=True)
        import csv
        worst_ratio, worst_bound = 0.0, 0.0
        with open(out) as f:
            for row in csv.DictReader(f):
                r, lo, hi = ours[(row["config"], row["metric"])]
                worst_ratio = max(worst_ratio, abs(r / float(row["ratio"]) - 1))
                worst_bound = max(worst_bound, abs(lo / float(row["low"]) - 1), abs(hi / float(row["high"]) - 1))
        print(f"agreement with the pandas peer: ratios within {worst_ratio:.1e}, interval bounds within "
              f"{worst_bound * 100:.2f} % (the peer interpolates t quantiles from a table)")
        peer = [sys.executable, os.path.join(HERE, "bench_compare_pandas.py"), root]
        timed_rss(peer, root)
        runs = [timed_rss(peer, root) for _ in range(max(1, args.repeat // 2))]
        walls = [w for w, _ in runs]
        table.append(("pandas peer (join + Welch)", statistics.median(walls), min(walls), max(walls),
                      max(r for _, r in runs)))
    if args.trace_diff:
        table.append(trace_diff(vitgraph, root, args.repeat))
    print(f"\n| {args.n} configurations | median s | min s | max s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for label, med, lo, hi, rss in table:
        print(f"| {label} | {med:.3f} | {lo:.3f} | {hi:.3f} | {rss:.0f} |")
    if args.pandas:
        peer = next(row for row in table if row[0].startswith("pandas"))
        print(f"\nvitgraph compare is {peer[1] / table[0][1]:.1f}x faster than the pandas peer (medians)")
    if not args.keep:
        subprocess.run(["rm", "-rf", root])


if __name__ == "__main__":
    main()
