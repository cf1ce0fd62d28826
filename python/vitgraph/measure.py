"""Measuring configurations together: one process, shuffled blocks.

Whatever sets a process's speed (the host's state, the vCPU that launches
the kernels, how memory was laid out) is shared by everything the process
measures, so it cancels in the ratio of two configurations measured in it.
``measure_together`` times each member's batches in blocks, the members'
order shuffled in every round (seeded), so every member sees every phase
of the process; it times a batch with CUDA events on a GPU and with
``time.perf_counter`` on the CPU.

    from vitgraph.measure import measure_together, write_results
    results = measure_together({"a": run_a, "b": run_b}, device="cuda",
                               images={"a": 1, "b": 1})
    write_results(results, out)   # {"members": {"a": {...}, "b": {...}}}

Each member's object is shaped like one run's ``results.json``:
``latency_ms`` (median, mean, p10, p90, p99, min), ``samples.latency_ms``
(every timed batch) and, given its images per batch,
``throughput_images_per_s`` (images over the median batch time).
"""

import json
import math
import os
import random
import socket
import statistics
import time

__all__ = ["measure_together", "summarize", "write_results"]


def _quantile(sorted_values, q):
    """The q quantile by linear interpolation (numpy's default)."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def summarize(samples_ms, images=None):
    """One member's results from its batch times (milliseconds)."""
    s = sorted(samples_ms)
    median = _quantile(s, 0.5)
    out = {
        "latency_ms": {
            "median": median,
            "mean": statistics.fmean(s),
            "p10": _quantile(s, 0.10),
            "p90": _quantile(s, 0.90),
            "p99": _quantile(s, 0.99),
            "min": s[0],
        },
        "samples": {"latency_ms": list(samples_ms)},
        "batches": len(s),
    }
    if images:
        out["images"] = images * len(s)
        if median > 0:
            out["throughput_images_per_s"] = images * 1000.0 / median
    return out


class _Timer:
    """Times one call: CUDA events on a GPU (read after the block), or the
    host's monotonic clock."""

    def __init__(self, device):
        self.cuda = None
        if device is not None and str(device).startswith("cuda"):
            import torch  # only where a GPU is timed

            self.cuda = torch.cuda
        self.kind = "cuda_event" if self.cuda else "perf_counter"

    def block(self, fn, n):
        """Runs ``fn`` ``n`` times; the time of each, in milliseconds."""
        if self.cuda is None:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1000.0)
            return times
        events = []
        for _ in range(n):
            start = self.cuda.Event(enable_timing=True)
            end = self.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        self.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in events]

    def sync(self):
        if self.cuda is not None:
            self.cuda.synchronize()


def measure_together(
    members,
    *,
    warmup=50,
    batches=400,
    block=4,
    seed=1,
    device=None,
    images=None,
):
    """Times every member in one process and returns the together file's
    document: ``{"members": {key: results}, "method": {...}, "env": {...}}``.

    ``members`` maps each member's key (its value of the together axis, as
    vitgraph names it: ``"vit16x6x384"``, or ``"a,1"`` for several axes) to
    a callable that runs one batch. Each member first runs ``warmup``
    batches (in the given order); then ``batches // block`` rounds, in each
    of which every member runs ``block`` timed batches, the members' order
    shuffled by a generator seeded with ``seed``.
    """
    if not members:
        raise ValueError("measure_together needs at least one member")
    if block < 1 or batches < block:
        raise ValueError(f"batches ({batches}) must be at least block ({block}) >= 1")
    keys = list(members)
    timer = _Timer(device)
    for key in keys:
        for _ in range(warmup):
            members[key]()
    timer.sync()
    rng = random.Random(seed)
    times = {key: [] for key in keys}
    rounds = batches // block
    for _ in range(rounds):
        order = list(keys)
        rng.shuffle(order)
        for key in order:
            times[key].extend(timer.block(members[key], block))
    images = images or {}
    return {
        "members": {key: summarize(times[key], images.get(key)) for key in keys},
        "method": {
            "timer": timer.kind,
            "warmup": warmup,
            "batches": rounds * block,
            "block": block,
            "rounds": rounds,
            "order": "shuffled blocks",
            "seed": seed,
        },
        "env": {"host": socket.gethostname(), "pid": os.getpid()},
    }


def write_results(doc, path):
    """Writes ``doc`` as JSON, refusing NaN and Infinity (which are not
    JSON, and which vitgraph refuses when it records the run)."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, allow_nan=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
