#!/usr/bin/env python3
"""PyTorch's own rates for the OpBench comparison: D2D copy bandwidth, the
bf16 8192³ matmul rate, and LayerNorm/GELU bandwidth on the same shapes as
scripts/gpu/verify.sh gives OpBench. Timed like OpBench: warm-up, then
back-to-back CUDA events per repetition over rotating inputs; median."""
import json
import statistics
import sys

import torch


def bench(fn, inputs, warmup=10, repeats=100):
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
    for i in range(repeats):
        events[i].record()
        fn(inputs[i % len(inputs)])
    events[-1].record()
    events[-1].synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:]))


def main():
    out = {}
    n = 1 << 29
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = bench(lambda s: dst.copy_(s), [src], 3, 50)
    out["copy_gbps"] = 2 * n * 2 / (ms / 1e3) / 1e9
    del src, dst
    a = [torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    b = [torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16).t() for _ in range(2)]
    ms = bench(lambda i: a[i] @ b[i], [0, 1], 3, 50)
    out["matmul_bf16_8192_tflops"] = 2 * 8192**3 / (ms / 1e3) / 1e12
    del a, b
    shape = (32, 2048, 1024)
    xs = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)
    bias = torch.zeros(1024, device="cuda", dtype=torch.bfloat16)
    nbytes = 2 * xs[0].numel() * 2
    ms = bench(lambda x: torch.nn.functional.layer_norm(x, (1024,), w, bias, 1e-5), xs)
    out["layernorm_gbps"] = nbytes / (ms / 1e3) / 1e9
    ms = bench(lambda x: torch.nn.functional.gelu(x), xs)
    out["gelu_gbps"] = nbytes / (ms / 1e3) / 1e9
    json.dump(out, open(sys.argv[1], "w"), indent=2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
