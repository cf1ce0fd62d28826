#!/usr/bin/env python3
"""Order-balanced A/B of cold builds between two vitgraph binaries.

A cold build on a shared VM swings by tens of percent between runs of the
same binary, and a fixed order (A always first) shows up as a difference.
So the builds come in pairs, A then B in even pairs and B then A in odd
ones, each from an empty cache on `bench_engine.py`'s workspace layout
(N experiments -> conversions -> analyses -> report, `build -j 1`), and
the answer is the median of the paired differences, per order and overall.

Usage: scripts/bench_cold_ab.py [--n 1000] [--pairs 16] BIN_A BIN_B
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import vitgraph_ws  # noqa: E402


def cold(binary, root, env):
    for d in ("cache", "out"):
        shutil.rmtree(os.path.join(root, d), ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([binary, "build", "-j", "1"], cwd=root, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = os.path.abspath(args.a), os.path.abspath(args.b)
    base = tempfile.mkdtemp(prefix="vitgraph-cold-ab-")
    env = dict(os.environ, VITGRAPH_NO_PROGRESS="1")
    try:
        vitgraph_ws(base, args.n)
        cold(a, base, env)  # warm the page cache and the commands
        times = {a: [], b: []}
        diffs = {"A first": [], "B first": []}
        for i in range(args.pairs):
            order = (a, b) if i % 2 == 0 else (b, a)
            t = {x: cold(x, base, env) for x in order}
            for x in order:
                times[x].append(t[x])
            diffs["A first" if i % 2 == 0 else "B first"].append(t[b] - t[a])
        nodes = 3 * args.n + 1
        print(f"{nodes} nodes, {args.pairs} pairs, cold `build -j 1` each")
        for label, x in (("A", a), ("B", b)):
            ts = times[x]
            print(f"{label} {x}: median {statistics.median(ts):.2f} s "
                  f"(min {min(ts):.2f}, max {max(ts):.2f})")
        for label, d in diffs.items():
            print(f"B - A, {label}: median {statistics.median(d):+.2f} s over {len(d)} pairs")
        every = diffs["A first"] + diffs["B first"]
        print(f"B - A, all pairs: median {statistics.median(every):+.2f} s; "
              f"B / A of medians {statistics.median(times[b]) / statistics.median(times[a]):.3f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
