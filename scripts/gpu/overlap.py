#!/usr/bin/env python3
"""How much of the host-to-device copying in a CUPTI trace.sqlite (nsys
layout) ran while a kernel ran, per stream: evidence that copy streams
overlap copies with compute.

    scripts/gpu/overlap.py RUN/trace.sqlite
"""
import sqlite3
import sys


def merged(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap(a, b):
    """Total length of the intersection of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


db = sqlite3.connect(sys.argv[1])
kernels = db.execute("SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
# copyKind 1 = host to device.
copies = db.execute("SELECT start, end, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1").fetchall()
busy = merged([(s, e) for s, e, _ in kernels])
print(f"kernels: {len(kernels)} on streams {sorted({k[2] for k in kernels})}")
by_stream = {}
for s, e, stream, n in copies:
    by_stream.setdefault(stream, []).append((s, e, n))
for stream, cs in sorted(by_stream.items()):
    spans = merged([(s, e) for s, e, _ in cs])
    total = sum(e - s for s, e in spans)
    big = [c for c in cs if c[2] >= 1 << 20]
    print(f"H2D on stream {stream}: {len(cs)} copies ({len(big)} of ≥1 MiB), {total / 1e6:.1f} ms, "
          f"{overlap(spans, busy) / max(total, 1):.0%} of it while a kernel ran")
