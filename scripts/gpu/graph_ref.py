#!/usr/bin/env python3
"""timm's VisionTransformer beside the `Vit` task's `graph: Cuda` (issue: Vit
at the launch-overhead floor): one process per model and mode, every batch
size, several rounds, forward passes timed two ways on batches already on the
GPU, under torch.inference_mode():

  - `host_ms`: host clock around the call and a device synchronization, as
    the `Vit` task times its `forward` stage;
  - `event_ms`: CUDA events around the call.

After the rounds, torch.profiler records 5 forward passes per batch size:
kernels per forward and their summed GPU time (the floor without launch gaps).

    python3 scripts/gpu/graph_ref.py --model vit16x12x768 --mode reduce-overhead \
        --batches 1,8,64 --rounds 3 --iters 300 --out ro.json
"""
import argparse
import json
import re
import statistics
import sys
import tempfile
import time

import torch


def parse_model(name):
    m = re.fullmatch(r"vit(\d+)x(\d+)x(\d+)", name)
    if not m:
        sys.exit(f"--model {name!r} is not of the form vit{{patch}}x{{depth}}x{{dim}}")
    return tuple(int(g) for g in m.groups())


def build(name, dtype):
    from timm.models.vision_transformer import VisionTransformer

    patch, depth, dim = parse_model(name)
    torch.manual_seed(0)
    model = VisionTransformer(
        img_size=224, patch_size=patch, embed_dim=dim, depth=depth,
        num_heads=dim // 64, mlp_ratio=4.0, num_classes=1000,
    )
    return model.eval().to(device="cuda", dtype=dtype)


def time_forwards(fn, pool, iters):
    host, events = [], []
    torch.cuda.synchronize()
    start_all = time.perf_counter()
    for i in range(iters):
        x = pool[i % len(pool)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t) * 1e3)
        events.append(start.elapsed_time(end))
    return host, events, time.perf_counter() - start_all


def profile_kernels(fn, x, forwards=5):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            fn(x)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return len(kernels) / forwards, sum(e.get("dur", 0) for e in kernels) / 1e3 / forwards


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="eager", choices=["eager", "default", "reduce-overhead"])
    p.add_argument("--batches", default="1,8,64")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    import timm

    # One compiled function per batch size, each compiled for its shape alone.
    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.cache_size_limit = 64
    dtype = torch.bfloat16
    model = build(args.model, dtype)
    batches = [int(b) for b in args.batches.split(",")]
    pools = {b: [torch.randn(b, 3, 224, 224, device="cuda", dtype=dtype) for _ in range(4)] for b in batches}
    fn = model if args.mode == "eager" else torch.compile(model, mode=args.mode)
    rows = []
    with torch.inference_mode():
        compile_s = {}
        for b in batches:
            t = time.perf_counter()
            for _ in range(3):  # compile, then the CUDA-graph warm-up and recording
                fn(pools[b][0])
            torch.cuda.synchronize()
            compile_s[b] = time.perf_counter() - t
            for _ in range(args.warmup):
                fn(pools[b][0])
        for r in range(1, args.rounds + 1):
            for b in batches:
                iters = max(50, args.iters * 8 // max(b, 8)) if b > 1 else args.iters
                host, events, window = time_forwards(fn, pools[b], iters)
                rows.append({
                    "round": r, "batch": b, "iters": iters,
                    "host_ms_median": statistics.median(host), "host_ms_min": min(host),
                    "event_ms_median": statistics.median(events),
                    "throughput_images_per_s": b * iters / window,
                })
                print(json.dumps({"mode": args.mode, "model": args.model, **rows[-1]}), flush=True)
        profiles = {b: profile_kernels(fn, pools[b][0]) for b in batches}
    result = {
        "model": args.model, "mode": args.mode, "torch": torch.__version__, "timm": timm.__version__,
        "gpu": torch.cuda.get_device_name(), "compile_s": compile_s, "rows": rows,
        "kernels_per_forward": {b: k for b, (k, _) in profiles.items()},
        "kernel_ms_per_forward": {b: ms for b, (_, ms) in profiles.items()},
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
