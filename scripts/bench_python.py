#!/usr/bin/env python3
"""What the Python package costs: `import vitgraph`, and `vitgraph.table()`
on a 100,000-row report against reading the same file with pandas or the
csv module directly (the peers, measured in the same run).

The report is a real one: a measuring `Command` stage of 100 nodes, each a
block of 1,000 members measured together (so 100,000 configurations, one
row each, without 100,000 processes), and a `Report` over it.

Usage: scripts/bench_python.py [--rows-per-node 1000] [--nodes 100] [--repeat 5]
       [--vitgraph target/release/vitgraph]   (pandas/polars/pyarrow on PYTHONPATH for their rows)
"""

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

WRITER = """import json, sys
members = sys.argv[1].split(',')
node = int(sys.argv[2])
out = {'members': {m: {'throughput_images_per_s': 1000.0 + node + int(m) / 7.0,
                       'latency_ms': {'median': 1.0 + int(m) / 1000.0}} for m in members}}
json.dump(out, open(sys.argv[3], 'w'))
"""


def workspace(root, nodes, members):
    os.makedirs(os.path.join(root, "pipelines"))
    with open(os.path.join(root, "writer.py"), "w") as f:
        f.write(WRITER)
    with open(os.path.join(root, "pipelines", "big.ron"), "w") as f:
        f.write(
            f"""Pipeline(stages: {{
  "runs": Stage(
    matrix: {{"node": {list(range(nodes))}, "member": {list(range(members))}}},
    together: ["member"],
    task: Command(run: "python3 writer.py ${{member}} ${{node}} ${{out}}/results.json",
                  inputs: ["writer.py"], outputs: ["results.json"], measure: true),
  ),
  "report": Stage(needs: ["runs"], task: Report(title: "big", sources: ["runs"],
                  columns: ["throughput_images_per_s", "latency_ms.median"])),
}})
"""
        )


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def subprocess_median(cmd, repeat, env=None):
    return median_time(lambda: subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL), repeat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--rows-per-node", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    os.environ["VITGRAPH"] = vg
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "python"), os.environ.get("PYTHONPATH", "")]))

    bare = subprocess_median([sys.executable, "-c", "pass"], 10, env)
    imported = subprocess_median([sys.executable, "-c", "import vitgraph"], 10, env)
    print(f"python3 -c 'import vitgraph': {imported * 1000:.0f} ms, of which the interpreter's own start {bare * 1000:.0f} ms (medians of 10)")

    root = tempfile.mkdtemp(prefix="vg-bench-python-")
    try:
        workspace(root, args.nodes, args.rows_per_node)
        t = time.perf_counter()
        subprocess.run([vg, "build", "report", "-j", "2"], cwd=root, check=True, stderr=subprocess.DEVNULL)
        print(f"{args.nodes * args.rows_per_node} rows built in {time.perf_counter() - t:.1f} s; medians of {args.repeat}\n")
        os.chdir(root)
        import vitgraph

        table_csv = os.path.join(root, "out", "report", "table.csv")
        rows = [("`vitgraph.table(…, backend=\"records\", source=\"csv\")` (stdlib)", lambda: vitgraph.table("report", backend="records", source="csv"))]
        rows.append(("`csv.DictReader` on table.csv (peer)", lambda: list(csv.DictReader(open(table_csv)))))
        try:
            import pandas as pd

            rows.append(("`vitgraph.table(…)` pandas, CSV", lambda: vitgraph.table("report", source="csv")))
            rows.append(("`pd.read_csv(table.csv)` (peer)", lambda: pd.read_csv(table_csv)))
            try:
                import pyarrow  # noqa: F401

                rows.append(("`vitgraph.table(…)` pandas, Parquet", lambda: vitgraph.table("report", source="parquet")))
                rows.append(("`pd.read_parquet(table.parquet)` (peer)", lambda: pd.read_parquet(table_csv.replace(".csv", ".parquet"))))
            except ImportError:
                pass
        except ImportError:
            pass
        try:
            import polars  # noqa: F401

            rows.append(("`vitgraph.table(…, backend=\"polars\")`", lambda: vitgraph.table("report", backend="polars")))
        except ImportError:
            pass
        n = len(vitgraph.table("report", backend="records"))
        status = subprocess_median([vg, "status", "report", "--json"], args.repeat)
        print(f"| {n:,} rows | median |")
        print("|---|---|")
        for name, fn in rows:
            print(f"| {name} | {median_time(fn, args.repeat) * 1000:.0f} ms |")
        print(f"| `vitgraph status report --json` (part of each `table()` call) | {status * 1000:.0f} ms |")
    finally:
        os.chdir("/")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
