#!/usr/bin/env python3
"""GPU time per forward pass by kernel: a `Vit` CUPTI trace (trace.sqlite,
nsys layout) against a torch.profiler Chrome trace of timm's model.

    python3 scripts/gpu/kernel_diff.py OURS/trace.sqlite OURS/results.json TIMM.trace.json FORWARDS
"""
import collections
import json
import re
import sqlite3
import sys

db, results, chrome, timm_forwards = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def short(name):
    name = re.sub(r"<.*", "", name)
    name = re.sub(r"\(.*", "", name)
    return name.split("::")[-1][:60]


con = sqlite3.connect(db)
forwards = json.load(open(results))["trace"]["measured_forwards"]
ranges = con.execute(
    "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value = 'forward'"
).fetchall()
if not ranges:
    ranges = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text = 'forward'").fetchall()
ours = collections.Counter()
count = collections.Counter()
for start, end, name in con.execute(
    "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
):
    if any(a <= start <= b for a, b in ranges[-forwards:]):
        ours[short(name)] += (end - start) / 1e3
        count[short(name)] += 1
n_ours = len(ranges[-forwards:])
theirs = collections.Counter()
for e in json.load(open(chrome))["traceEvents"]:
    if e.get("cat") == "kernel":
        theirs[short(e["name"])] += e["dur"]
print(f"forwards: vitgraph {n_ours}, timm {timm_forwards}")
print(f"GPU kernel time per forward (us): vitgraph {sum(ours.values()) / n_ours:.1f}, timm {sum(theirs.values()) / timm_forwards:.1f}")
print("| kernel | vitgraph us/fwd | timm us/fwd | launches/fwd (vitgraph) |")
print("|---|---|---|---|")
names = set(ours) | set(theirs)
for k in sorted(names, key=lambda k: -max(ours[k] / n_ours, theirs[k] / timm_forwards))[:14]:
    print(f"| {k} | {ours[k] / n_ours:.1f} | {theirs[k] / timm_forwards:.1f} | {count[k] / n_ours:.1f} |")
