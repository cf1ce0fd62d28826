#!/usr/bin/env python3
"""What the store's integrity costs: two vitgraph binaries side by side.

Measures, for each binary, in one run (alternating, medians):

  no-op        `vitgraph build` of an up-to-date sweep of N*3+1 nodes (the
               engine benchmark's shape, scripts/bench_engine.py), each
               binary on a workspace it built itself
  cold 6x100MB a build of 6 nodes that each write a 100 MB output (-j 2):
               what copying outputs into the store costs
  restore      `vitgraph build` after `out/` was removed: 600 MB restored
               (and, for a binary that checks, hashed)

Usage: scripts/bench_store.py --before A --after B [--n 33333] [--repeat 5]
Prints a markdown table.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_engine import vitgraph_ws  # noqa: E402

BIG = """Pipeline(stages: {
  "big": Stage(matrix: {"i": [0, 1, 2, 3, 4, 5]},
    task: Command(run: "head -c 104857600 /dev/urandom > ${out}/data.bin", outputs: ["data.bin"])),
})
"""


def run(exe, root, *args):
    t = time.perf_counter()
    r = subprocess.run([exe, "-C", root, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={**os.environ, "VITGRAPH_NO_PROGRESS": "1"})
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{exe} {' '.join(args)} failed ({r.returncode}):\n{r.stderr.decode()[-2000:]}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--n", type=int, default=33333)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    bins = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    top = tempfile.mkdtemp(prefix="bench-store-", dir=os.environ.get("BENCH_DIR"))
    res = {k: {"noop": [], "cold": [], "restore": []} for k in bins}
    try:
        sweeps = {}
        for name, exe in bins.items():
            root = os.path.join(top, f"sweep-{name}")
            vitgraph_ws(root, args.n)
            t = run(exe, root, "build", "-j", "2")
            print(f"{name}: cold build of {args.n * 3 + 1} nodes: {t:.1f} s", file=sys.stderr)
            run(exe, root, "build")  # leaves the no-op snapshot
            sweeps[name] = root
        for _ in range(args.repeat):
            for name, exe in bins.items():
                res[name]["noop"].append(run(exe, sweeps[name], "build"))
        for _ in range(args.repeat):
            for name, exe in bins.items():
                root = os.path.join(top, f"big-{name}")
                shutil.rmtree(root, ignore_errors=True)
                os.makedirs(os.path.join(root, "pipelines"))
                with open(os.path.join(root, "pipelines", "big.ron"), "w") as f:
                    f.write(BIG)
                res[name]["cold"].append(run(exe, root, "build", "-j", "2"))
                shutil.rmtree(os.path.join(root, "out"))
                subprocess.run(["sync"])
                res[name]["restore"].append(run(exe, root, "build", "-j", "2"))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in res.items()}
    print(f"{args.n * 3 + 1}-node sweep, 6 x 100 MB outputs; medians of {args.repeat}, alternating\n")
    print("| binary | no-op build | cold build, 6 x 100 MB (-j 2) | restore of 600 MB |")
    print("|---|---|---|---|")
    for k in bins:
        m = med[k]
        print(f"| {k} | {m['noop'] * 1000:.0f} ms | {m['cold']:.2f} s | {m['restore']:.2f} s |")
    b, a = med["before"], med["after"]
    print(f"| after / before | {a['noop'] / b['noop']:.2f} | {a['cold'] / b['cold']:.2f} | {a['restore'] / b['restore']:.2f} |")
    print("\nall runs (s):", {k: {m: [round(x, 3) for x in v] for m, v in r.items()} for k, r in res.items()})


if __name__ == "__main__":
    main()
