#!/usr/bin/env python3
"""What a CUDA graph's replay costs beyond its kernels, on this GPU.

The `Vit` task's `graph: Cuda` forward pass is timed on the host clock around
the replay and a synchronization; its "floor" is the summed GPU time of the
kernels of one forward pass from a trace. This script measures the two things
that lie between them, for comparison with what `Vit` shows:

  1. chain: graphs of N small dependent kernels (an in-place add on a tensor of
     `--chain-elems` elements), N in `--chain-lengths`. Per graph: the host
     time of replay + synchronize, the CUDA-event time around the replay, and
     the kernels' summed GPU time from torch.profiler. The slope of
     (event time - kernel time) over N is what one more kernel node costs
     beyond its own duration; the intercept is the graph's launch.
  2. timm: timm's VisionTransformer in eager mode (the same kernels as `Vit`,
     layer for layer), captured by hand into torch.cuda.CUDAGraph, timed the
     way `Vit` times its forward stage (host clock around replay + sync) and
     with CUDA events, and back to back (replays queued without a
     synchronization between them: the GPU's time per replay). Kernels per
     forward and their summed GPU time from torch.profiler over replays.

    python3 scripts/gpu/graph_floor.py --out floor.json
"""
import argparse
import json
import statistics
import tempfile
import time

import torch


def profiled_kernels(fn, repeats):
    """Kernels launched per call of `fn` and their summed GPU time (ms)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    per_call = len(kernels) / repeats
    ms = sum(e.get("dur", 0) for e in kernels) / 1e3 / repeats
    if kernels:
        span = (max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)) / 1e3 / repeats
    else:
        span = 0.0
    return per_call, ms, span


def timed(graph, iters):
    """Host (replay + synchronize) and event times of single replays, and the
    time per replay of `iters` replays queued back to back (events)."""
    host, event = [], []
    torch.cuda.synchronize()
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t) * 1e3)
        event.append(start.elapsed_time(end))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return statistics.median(host), statistics.median(event), start.elapsed_time(end) / iters


def capture(fn, warmups=3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def linear_fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def chain_rows(lengths, elems, iters, rounds):
    rows = []
    for r in range(rounds):
        for n in lengths:
            x = torch.zeros(elems, device="cuda", dtype=torch.float32)

            def fn():
                for _ in range(n):
                    x.add_(1.0)
                return x

            graph, _ = capture(fn)
            host, event, queued = timed(graph, iters)
            kernels, kernel_ms, span = profiled_kernels(graph.replay, 10)
            rows.append({"round": r + 1, "nodes": n, "kernels": kernels, "kernel_ms": kernel_ms,
                         "traced_span_ms": span, "host_ms": host, "event_ms": event,
                         "queued_ms": queued})
            print(json.dumps({"chain": rows[-1]}), flush=True)
    return rows


def build_timm(name, dtype):
    import re

    from timm.models.vision_transformer import VisionTransformer

    patch, depth, dim = (int(g) for g in re.fullmatch(r"vit(\d+)x(\d+)x(\d+)", name).groups())
    torch.manual_seed(0)
    model = VisionTransformer(img_size=224, patch_size=patch, embed_dim=dim, depth=depth,
                              num_heads=dim // 64, mlp_ratio=4.0, num_classes=1000)
    return model.eval().to(device="cuda", dtype=dtype)


def timm_rows(models, batches, iters, rounds):
    rows = []
    with torch.inference_mode():
        for name in models:
            model = build_timm(name, torch.bfloat16)
            for b in batches:
                static = torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
                graph, _ = capture(lambda: model(static))
                for _ in range(30):
                    graph.replay()
                kernels, kernel_ms, span = profiled_kernels(graph.replay, 10)
                for r in range(rounds):
                    host, event, queued = timed(graph, iters)
                    rows.append({"model": name, "batch": b, "round": r + 1, "kernels": kernels,
                                 "kernel_ms": kernel_ms, "traced_span_ms": span, "host_ms": host,
                                 "event_ms": event, "queued_ms": queued})
                    print(json.dumps({"timm": rows[-1]}), flush=True)
                del graph
            del model
            torch.cuda.empty_cache()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chain-lengths", default="1,16,64,128,256")
    p.add_argument("--chain-elems", type=int, default=1024)
    p.add_argument("--models", default="vit32x6x384,vit16x12x768,vit32x18x1024")
    p.add_argument("--batches", default="1,8,64")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    import timm

    lengths = [int(n) for n in args.chain_lengths.split(",")]
    chain = chain_rows(lengths, args.chain_elems, args.iters, args.rounds)
    fits = {}
    for key in ("event_ms", "host_ms", "queued_ms"):
        xs = [r["nodes"] for r in chain]
        ys = [r[key] - r["kernel_ms"] for r in chain]
        slope, intercept = linear_fit(xs, ys)
        fits[key] = {"per_node_us": slope * 1e3, "fixed_us": intercept * 1e3}
    print(json.dumps({"fits": fits}), flush=True)
    rows = timm_rows(args.models.split(","), [int(b) for b in args.batches.split(",")], args.iters, args.rounds)
    result = {"torch": torch.__version__, "timm": timm.__version__, "gpu": torch.cuda.get_device_name(),
              "chain_elems": args.chain_elems, "chain": chain, "chain_fit_beyond_kernels": fits,
              "timm_graph": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
