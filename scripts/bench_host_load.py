#!/usr/bin/env python3
"""How often the host-load verdict flags an unpinned CPU run: on the
machine as it is (quiet, for the false-alarm rate), and with a busy loop on
every core (the detection rate). Each condition builds a repeated `Vit`
stage (a small ViT on the CPU, about a second a run) with the host load
judged, and reads every run's `telemetry.host` and verdict.

Usage: scripts/bench_host_load.py [--runs 20] [--samples 3000] [--device cpu|cuda]
       [--vitgraph target/debug/vitgraph]   (with vitgraph-torch beside it, or a torch build)
Run it on a machine doing nothing else for the quiet figure.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def build(vg, root, runs, samples, burners, device):
    stage = f"""(stages: {{
  "load": Stage(repeat: {runs},
    task: Vit((model: "vit16x2x64", image_size: 32, num_classes: 10, batch: 1,
               samples: {samples}, warmup: 3, device: "{device}"))),
}})"""
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "pipelines"))
    with open(os.path.join(root, "pipelines", "load.ron"), "w") as f:
        f.write(stage)
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(burners)]
    try:
        env = dict(os.environ, VITGRAPH_HOST_LOAD="judge")
        r = subprocess.run([vg, "build", "load"], cwd=root, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"build failed: {r.stderr[-2000:]}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
    rows = []
    out = os.path.join(root, "out", "load")
    for d in sorted(os.listdir(out)):
        res = json.load(open(os.path.join(out, d, "results.json")))
        host = res["telemetry"]["host"]
        busy = host["busy_core_s"] / host["window_s"]
        flags = [f["kind"] for f in res["validity"]["flags"] if f["invalidates"]]
        rows.append((host["foreign_cores"], max(0.0, len(host["cores"]) - busy), host["pinned"], flags,
                     res["latency_ms"]["median"]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--vitgraph", default="target/debug/vitgraph")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for a GPU host's runs")
    ap.add_argument("--burners", default="", help="busy loops per condition, e.g. 0,4,16 (default: none, then one per core)")
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    cores = os.cpu_count()
    root = tempfile.mkdtemp(prefix="vg-bench-load-")
    try:
        print(f"{cores} cores; {args.runs} unpinned {args.device} runs per condition\n")
        print("| condition | runs flagged `intruded` | other work, cores (median, max) | idle cores (median, min) | latency_ms.median (median of runs) |")
        print("|---|---|---|---|---|")
        counts = [int(n) for n in args.burners.split(",")] if args.burners else [0, cores]
        for burners in counts:
            name = "quiet (as the machine is)" if burners == 0 else f"{burners} busy loop(s) beside it, on {cores} cores"
            rows = build(vg, root, args.runs, args.samples, burners, args.device)
            foreign = [r[0] for r in rows]
            idle = [r[1] for r in rows]
            flagged = sum("intruded" in r[3] for r in rows)
            latency = statistics.median(r[4] for r in rows)
            print(f"| {name} | {flagged} of {len(rows)} | {statistics.median(foreign):.3f}, {max(foreign):.3f} "
                  f"| {statistics.median(idle):.2f}, {min(idle):.2f} | {latency:.4f} ms |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
