#!/usr/bin/env python3
"""A/B of one-input rebuilds (or no-op builds) between vitgraph binaries.

Each binary works on its own copy of a benchmark workspace (one made by
`bench_engine.py`'s layout and built once), since switching binaries on one
workspace invalidates its no-op snapshot. Rounds alternate between the
binaries; each round appends a line to a different experiment's input and
times one `build`.

Usage: scripts/bench_ab.py [--noop] REPS BIN:WORKSPACE BIN:WORKSPACE…
Prints each binary's median, minimum and every time, in ms.
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    noop = args[:1] == ["--noop"]
    if noop:
        args = args[1:]
    reps = int(args[0])
    pairs = [a.split(":", 1) for a in args[1:]]
    times = {b: [] for b, _ in pairs}
    for b, ws in pairs:  # settle: the first build after a binary change plans in full
        for _ in range(2):
            subprocess.run([b, "build"], cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n = len(os.listdir(os.path.join(pairs[0][1], "inputs")))
    for r in range(reps):
        for b, ws in pairs:
            if not noop:
                with open(os.path.join(ws, "inputs", f"{(r * 7 + 11) % n}.txt"), "a") as f:
                    f.write("x\n")
            t = time.perf_counter()
            p = subprocess.run([b, "build"], cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[b].append((time.perf_counter() - t) * 1000)
            if p.returncode != 0:
                sys.exit(f"{b} build failed in {ws}")
    for b, xs in times.items():
        print(f"{b}: median {statistics.median(xs):.1f} ms  min {min(xs):.1f}  all {' '.join(f'{x:.0f}' for x in xs)}")


if __name__ == "__main__":
    main()
