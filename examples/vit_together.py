#!/usr/bin/env python3
"""ViT forward passes measured together: several models (or one model
twice) timed in one process, in shuffled blocks, through vitgraph's
measurement helper (`python/vitgraph/measure.py`).

    python3 examples/vit_together.py --models vit16x6x384,vit32x12x768 \\
        --batch 1 --device cuda --out results.json

`--models`, `--batch`, `--graph` and `--compile` take the block's values of each axis as
vitgraph passes them (`${model}`: joined by `,`); the block is every
combination of them, and `--axes` names the together axes in matrix order,
which make each member's key (`vit16x6x384,8,cuda` for `--axes
model,batch,graph`). A value `NAME#K` is another instance of `NAME` (its
own weights and input): measuring a model beside a second instance of
itself is the A/A check, whose ratio should be 1. `--graph cuda` replays
the forward pass as a captured CUDA graph; `--compile MODE` runs it through
`torch.compile` (compiled on its first call, inside the warm-up). Without `--together`, the file
is one run's `results.json` (one model, batch and graph), for the same
configuration measured one per process.

The model is `vit_compile_bench.py`'s (the `Vit` task's, layer for layer),
bf16 by default, input already on the device; a batch is one forward pass.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from vit_compile_bench import LN_EPS, build_model, parse_model  # noqa: E402,F401
from vitgraph.measure import measure_together, write_results  # noqa: E402


def config(name, seed):
    patch, depth, dim = parse_model(name.split("#")[0])
    return {
        "patch": patch, "depth": depth, "dim": dim, "heads": max(dim // 64, 1),
        "mlp_dim": 4 * dim, "image_size": 224, "num_classes": 1000, "seed": seed,
    }


def graphed(torch, model, x):
    """One forward pass captured as a CUDA graph; its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(g):
        model(x)
    return g.replay


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True)
    p.add_argument("--batch", default="1")
    p.add_argument("--graph", default="none")
    p.add_argument("--compile", default="none",
                   help="torch.compile modes: none, default, reduce-overhead, max-autotune (NAME#K: another instance)")
    p.add_argument("--axes", default="model", help="the together axes, in matrix order")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batches", type=int, default=400)
    p.add_argument("--block", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--together", action="store_true", help="write one object per member")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    import torch

    values = {
        "model": args.models.split(","),
        "batch": [int(b) for b in args.batch.split(",")],
        "graph": args.graph.split(","),
        "compile": args.compile.split(","),
    }
    axes = args.axes.split(",")
    if any(a not in values for a in axes):
        p.error(f"--axes names {args.axes!r}; the axes are model, batch, graph, compile")
    combos = [(m, b, g, c) for m in values["model"] for b in values["batch"]
              for g in values["graph"] for c in values["compile"]]
    if not args.together and len(combos) != 1:
        p.error("measured apart, one model, batch and graph (or pass --together)")
    if any(g not in ("none", "cuda") for g in values["graph"]):
        p.error("--graph takes none or cuda")
    modes = ("none", "default", "reduce-overhead", "max-autotune")
    if any(c.split("#")[0] not in modes for c in values["compile"]):
        p.error(f"--compile takes {', '.join(modes)}")
    if any(c.split("#")[0] != "none" for c in values["compile"]) and "cuda" in values["graph"]:
        p.error("--compile and --graph cuda do not combine: reduce-overhead is torch.compile's CUDA graph")
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    members, images = {}, {}
    for i, (name, batch, graph, mode) in enumerate(combos):
        # Each member its own weights: a `#K` instance, or another compile
        # mode of the same model, is another model of the same shape.
        c = config(name, seed=1000 + i)
        model = build_model(torch, c, dtype, args.device)
        torch.manual_seed(i)
        x = torch.randn(batch, 3, 224, 224).to(device=args.device, dtype=dtype)
        if mode.split("#")[0] != "none":
            # Compiled on its first call, inside the warm-up.
            compiled = torch.compile(model, mode=mode.split("#")[0])

            def step(model=compiled, x=x):
                with torch.inference_mode():
                    model(x)
        elif graph == "cuda":
            step = graphed(torch, model, x)
        else:
            def step(model=model, x=x):
                with torch.inference_mode():
                    model(x)
        member = dict(zip(("model", "batch", "graph", "compile"), (name, batch, graph, mode)))
        key = ",".join(str(member[a]) for a in axes)
        members[key] = step
        images[key] = batch
    doc = measure_together(
        members, warmup=args.warmup, batches=args.batches, block=args.block,
        seed=args.seed, device=args.device, images=images,
    )
    doc["env"]["torch"] = torch.__version__
    if str(args.device).startswith("cuda"):
        doc["env"]["gpu"] = torch.cuda.get_device_name()
    if not args.together:
        one = next(iter(doc["members"].values()))
        one["method"], one["env"] = doc["method"], doc["env"]
        doc = one
    write_results(doc, args.out)


if __name__ == "__main__":
    main()
