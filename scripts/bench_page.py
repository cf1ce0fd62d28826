#!/usr/bin/env python3
"""Page benchmark: `vitgraph report` on the engine benchmark's study
(N experiments -> conversions -> analyses -> one report; 3N + 1 nodes),
built, then with one input changed (so reasons are on the page too).

For each state it prints, medians of --repeat: the time of `vitgraph report`
and of `vitgraph status` on the same study, and the page's size.
Targets (issue: the study in a browser): at 10,000 nodes the page in <= 1 s
and <= 5 MB.

Usage: scripts/bench_page.py [--n 3333] [--repeat 5] [--vitgraph target/release/vitgraph]
                             [--keep-page FILE]
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
import bench_engine  # noqa: E402


def run(cmd, cwd):
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stderr.decode()[-2000:]}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3333)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    ap.add_argument("--keep-page", metavar="FILE",
                    help="copy the page of the last state here (for scripts/bench_page_browser.py)")
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    root = tempfile.mkdtemp(prefix="vg-bench-page-")
    try:
        bench_engine.vitgraph_ws(root, args.n)
        nodes = 3 * args.n + 1
        rows = []
        t = time.perf_counter()
        run([vg, "build", "-j", "2"], root)
        print(f"{nodes} nodes; cold build {time.perf_counter() - t:.1f} s; {os.cpu_count()} CPUs; medians of {args.repeat}\n")
        for state in ["all fresh", "one input changed"]:
            if state == "one input changed":
                with open(os.path.join(root, "inputs", "0.txt"), "w") as f:
                    f.write("changed\n")
            page = statistics.median(run([vg, "report"], root) for _ in range(args.repeat))
            size = os.path.getsize(os.path.join(root, "out", "report.html"))
            status = statistics.median(run([vg, "status"], root) for _ in range(args.repeat))
            rows.append((state, page, size, status))
        if args.keep_page:
            shutil.copy(os.path.join(root, "out", "report.html"), args.keep_page)
        print("| study | `vitgraph report` | page size | `vitgraph status` |")
        print("|---|---|---|---|")
        for state, page, size, status in rows:
            print(f"| {state} | {page * 1e3:.0f} ms | {size / 1e6:.2f} MB | {status * 1e3:.0f} ms |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
