#!/usr/bin/env python3
"""PyTorch reference for vitgraph's `Vit` task: timm's VisionTransformer of a
given shape, eager or torch.compile'd, timed per forward pass with CUDA events.

Used two ways: as the baseline the `Vit` task is compared against (same
shape, dtype, batch), and by the RQ3 study as a `Command` node for the
torch.compile modes, which exist only in Python. Optionally counts the CUDA
kernels of one forward pass with torch.profiler and writes its Chrome trace.

    python3 examples/vit_bench.py --model vit16x12x768 --batch 64 --dtype bf16 \
        --mode eager --out results.json [--profile trace.json]
"""
import argparse
import json
import re
import statistics
import sys
import time

import torch


def parse_model(name):
    m = re.fullmatch(r"vit(\d+)x(\d+)x(\d+)", name)
    if not m:
        sys.exit(f"--model {name!r} is not of the form vit{{patch}}x{{depth}}x{{dim}}")
    return tuple(int(g) for g in m.groups())


def build(args):
    from timm.models.vision_transformer import VisionTransformer

    patch, depth, dim = parse_model(args.model)
    torch.manual_seed(args.seed)
    model = VisionTransformer(
        img_size=args.image_size, patch_size=patch, embed_dim=dim, depth=depth,
        num_heads=dim // 64, mlp_ratio=4.0, num_classes=args.num_classes,
    )
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    return model.eval().to(device=args.device, dtype=dtype), dtype


def time_forwards(fn, x, warmup, iters):
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    start_all = time.perf_counter()
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    window = time.perf_counter() - start_all
    return times, window


def count_kernels(fn, x, path, forwards=5):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            fn(x)
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    return kernels / forwards


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--mode", default="eager", choices=["eager", "default", "reduce-overhead", "max-autotune"])
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", help="write a torch.profiler Chrome trace here and count kernels per forward")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    model, dtype = build(args)
    params = sum(t.numel() for t in model.parameters())
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, device=args.device, dtype=dtype)
    fn = model if args.mode == "eager" else torch.compile(model, mode=args.mode)
    compile_start = time.perf_counter()
    with torch.inference_mode():
        fn(x)
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - compile_start
        times, window = time_forwards(fn, x, args.warmup, args.iters)
        kernels = count_kernels(fn, x, args.profile) if args.profile else None
    result = {
        "model": args.model, "batch": args.batch, "dtype": args.dtype, "mode": args.mode,
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "params": params, "first_call_s": first_call_s,
        "forward_ms": {"mean": statistics.fmean(times), "median": statistics.median(times),
                       "min": min(times), "max": max(times)},
        "throughput_images_per_s": args.batch * args.iters / window,
        "kernels_per_forward": kernels,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
