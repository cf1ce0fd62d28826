#!/usr/bin/env python3
"""ViT forward passes measured together: several models (or one model
twice) timed in one process, in shuffled blocks, through vitgraph's
measurement helper (`python/vitgraph/measure.py`).

    python3 examples/vit_together.py --models vit16x6x384,vit32x12x768 \\
        --batch 1 --device cuda --out results.json

`--models` is the block's values of the together axis as vitgraph passes
them (`${model}`: joined by `,`). A value `NAME#K` is another instance of
`NAME` (its own weights and input): measuring a model beside a second
instance of itself is the A/A check, whose ratio should be 1. With one
model and no `--together`, the file is one run's `results.json`, for the
same configuration measured one per process.

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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batches", type=int, default=400)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--together", action="store_true", help="write one object per member")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    import torch

    names = args.models.split(",")
    if not args.together and len(names) != 1:
        p.error("measured apart, `--models` names one model (or pass --together)")
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    members = {}
    for i, name in enumerate(names):
        c = config(name, seed=1000 + i)
        model = build_model(torch, c, dtype, args.device)
        torch.manual_seed(i)
        x = torch.randn(args.batch, 3, 224, 224).to(device=args.device, dtype=dtype)

        def step(model=model, x=x):
            with torch.inference_mode():
                model(x)

        members[name] = step
    doc = measure_together(
        members, warmup=args.warmup, batches=args.batches, block=args.block,
        seed=args.seed, device=args.device, images={n: args.batch for n in names},
    )
    doc["env"]["torch"] = torch.__version__
    if str(args.device).startswith("cuda"):
        doc["env"]["gpu"] = torch.cuda.get_device_name()
    if not args.together:
        one = doc["members"][names[0]]
        one["method"], one["env"] = doc["method"], doc["env"]
        doc = one
    write_results(doc, args.out)


if __name__ == "__main__":
    main()
