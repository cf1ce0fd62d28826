#!/usr/bin/env python3
"""PyTorch reference for the `Vit` task's forward pass: timm's
VisionTransformer of the same shape (conv patch embedding, class token,
learned positions, pre-norm blocks, final norm, linear head), eager or
torch.compile'd, on a batch already on the GPU, under torch.inference_mode().

Each forward pass is timed alone, as the `Vit` task times its `forward`
stage: CUDA events around the call, then a synchronization. With --profile,
torch.profiler counts the CUDA kernels of one forward pass.

    python3 scripts/gpu/timm_ref.py --model vit16x12x768 --batch 64 --dtype bf16 \
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
    return times, time.perf_counter() - start_all


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
    return sum(1 for e in events if e.get("cat") == "kernel") / forwards


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--mode", default="eager", choices=["eager", "default", "reduce-overhead", "max-autotune"])
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", help="write a torch.profiler Chrome trace here and count kernels per forward")
    p.add_argument("--profile-timed", action="store_true",
                   help="time the forward passes with torch.profiler recording (its tracing overhead)")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    import timm

    model, dtype = build(args)
    params = sum(t.numel() for t in model.parameters())
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, device=args.device, dtype=dtype)
    fn = model if args.mode == "eager" else torch.compile(model, mode=args.mode)
    with torch.inference_mode():
        first = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - first
        if args.profile_timed:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                times, window = time_forwards(fn, x, args.warmup, args.iters)
        else:
            times, window = time_forwards(fn, x, args.warmup, args.iters)
        kernels = count_kernels(fn, x, args.profile) if args.profile else None
    result = {
        "model": args.model, "batch": args.batch, "dtype": args.dtype, "mode": args.mode,
        "profiled": args.profile_timed, "torch": torch.__version__, "timm": timm.__version__, "gpu": torch.cuda.get_device_name(),
        "params": params, "first_call_s": first_call_s,
        "forward_ms": {"mean": statistics.fmean(times), "median": statistics.median(times),
                       "min": min(times), "max": max(times)},
        "throughput_images_per_s": args.batch * args.iters / window,
        "kernels_per_forward": kernels,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
