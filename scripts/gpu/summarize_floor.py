#!/usr/bin/env python3
"""The tables of scripts/gpu/graph_floor.sh's results (book/src/results.md,
"CUDA graphs: the floor"):

  1. per model and batch, `Vit` graph: Cuda's forward pass (median over
     rounds of each run's median) and its kernel floor, beside timm eager
     captured by hand into a CUDA graph: host clock around replay + sync (as
     `Vit` times it), CUDA events around the replay, and replays queued back
     to back (no host in the loop); each over its own kernels' summed time;
  2. graphs of N small dependent kernels: what one more node costs;
  3. with a trace.sqlite of a `Vit` run: its kernels per forward pass by name.

    python3 scripts/gpu/summarize_floor.py DIR [TRACE.sqlite] > summary.md
"""
import json
import re
import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def demangle(name):
    """c++filt's reading of a mangled name; the name itself without c++filt."""
    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return name


def main(directory, trace=None):
    d = Path(directory)
    vit = defaultdict(list)
    vit_floor = defaultdict(list)
    vit_kernels = {}
    for line in (d / "vit.jsonl").read_text().splitlines():
        r = json.loads(line)
        c = r["config"]
        key = (c["model"], c["batch"])
        vit[key].append(statistics.median(r["forward_samples_ms"]))
        vit_floor[key].append(r["trace"]["kernel_ms_per_forward"])
        vit_kernels[key] = r["trace"]["kernels_per_forward"]
    floor = json.loads((d / "floor.json").read_text())
    timm = defaultdict(lambda: defaultdict(list))
    timm_floor, timm_kernels = {}, {}
    for r in floor["timm_graph"]:
        key = (r["model"], r["batch"])
        for k in ("host_ms", "event_ms", "queued_ms"):
            timm[key][k].append(r[k])
        timm_floor[key], timm_kernels[key] = r["kernel_ms"], r["kernels"]

    print(f"{floor['gpu']}, torch {floor['torch']}, timm {floor['timm']}; bf16, batch on the GPU; "
          f"medians over {max(len(v) for v in vit.values())} rounds. Ratios are over each one's own kernel floor "
          "(summed GPU time of one forward pass's kernels).\n")
    print("| model | batch | Vit graph: Cuda | Vit floor (kernels) | Vit / floor | timm graph, host | "
          "timm graph, events | timm graph, queued | timm floor (kernels) | host / floor | events / floor | queued / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(vit, key=lambda k: (["vit32x6x384", "vit16x12x768", "vit32x18x1024"].index(k[0]), k[1])):
        fwd, fl = statistics.median(vit[key]), statistics.median(vit_floor[key])
        t = {k: statistics.median(v) for k, v in timm[key].items()}
        tf = timm_floor[key]
        print(f"| {key[0]} | {key[1]} | {fwd:.3f} | {fl:.3f} ({vit_kernels[key]:.0f}) | {fwd / fl:.2f} | "
              f"{t['host_ms']:.3f} | {t['event_ms']:.3f} | {t['queued_ms']:.3f} | {tf:.3f} ({timm_kernels[key]:.0f}) | "
              f"{t['host_ms'] / tf:.2f} | {t['event_ms'] / tf:.2f} | {t['queued_ms'] / tf:.2f} |")

    print(f"\nGraphs of N dependent in-place adds on {floor['chain_elems']} floats (ms, median over rounds); "
          "beyond = time less the kernels' summed GPU time:\n")
    print("| nodes | kernels (ms) | host | events | queued |")
    print("|---|---|---|---|---|")
    chain = defaultdict(lambda: defaultdict(list))
    for r in floor["chain"]:
        for k in ("kernel_ms", "host_ms", "event_ms", "queued_ms"):
            chain[r["nodes"]][k].append(r[k])
    for n in sorted(chain):
        m = {k: statistics.median(v) for k, v in chain[n].items()}
        print(f"| {n} | {m['kernel_ms']:.4f} | {m['host_ms']:.4f} | {m['event_ms']:.4f} | {m['queued_ms']:.4f} |")
    fits = floor["chain_fit_beyond_kernels"]
    print("\nLeast-squares fit of (time − kernels) over N: " + "; ".join(
        f"{k.removesuffix('_ms')} {v['per_node_us']:.2f} µs per node + {v['fixed_us']:.1f} µs" for k, v in fits.items()))

    if trace:
        db = sqlite3.connect(trace)
        rows = db.execute("""
            WITH w AS (SELECT start s, end e FROM NVTX_EVENTS WHERE text = 'measure'),
                 fr AS (SELECT n.start fs, n.end fe FROM NVTX_EVENTS n, w
                        WHERE n.text = 'forward' AND n.start >= w.s AND n.end <= w.e),
                 k AS (SELECT k.* FROM CUPTI_ACTIVITY_KIND_KERNEL k
                       JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                       JOIN fr ON r.start >= fr.fs AND r.end <= fr.fe)
            SELECT COALESCE(d.value, s.value), COUNT(*) * 1.0 / (SELECT COUNT(*) FROM fr),
                   SUM(k.end - k.start) / 1000.0 / (SELECT COUNT(*) FROM fr)
            FROM k JOIN StringIds s ON s.id = k.shortName LEFT JOIN StringIds d ON d.id = k.demangledName
            GROUP BY 1 ORDER BY 3 DESC""").fetchall()
        total = sum(us for _, _, us in rows)
        print(f"\nKernels of one forward pass of {Path(trace).parent.name} (per forward pass, from its traced batches):\n")
        print("| kernel | per forward | µs | share |")
        print("|---|---|---|---|")
        for name, n, us in rows:
            short = demangle(name).removeprefix("void ").replace("(anonymous namespace)::", "").split("(")[0]
            short = short if len(short) <= 100 else short[:99] + "…"
            print(f"| `{short}` | {n:.0f} | {us:.1f} | {us / total * 100:.1f}% |")
        print(f"| total | {sum(n for _, n, _ in rows):.0f} | {total:.1f} | |")


if __name__ == "__main__":
    main(*sys.argv[1:])
