#!/usr/bin/env python3
"""The `Vit` task of vitgraph in plain PyTorch, eager or torch.compile'd.

torch.compile exists only in Python, so the RQ3 study runs its compiled modes
as `Command` nodes calling this script. The model is the `Vit` task's,
layer for layer (timm's VisionTransformer: conv patch embedding, class token,
learned position embeddings, pre-norm blocks with SDPA attention and exact
GELU MLP, final LayerNorm, linear head on the class token), with the same
weight-init scheme (N(0, 0.02^2) matrices and embeddings, zero biases, unit
norm scales). The measurement loop is the task's synchronous one: synthetic
uint8 images -> preprocess -> host-to-device copy -> forward -> logits back to
the host, the device synchronized after each stage. It writes a
`results.json` with the `Vit` task's normative fields (same parameter count
and FLOP formula) plus `compile`, `compile_s` and `torch_version`, and with
`--trace` a PyTorch-profiler Chrome trace of the measured window whose
`measure`, `batch N` and `forward` ranges become the NVTX ranges that
vitgraph's `Export` and `Analyze` read.

    python3 examples/vit_compile_bench.py --model vit16x6x384 --batch 1 \\
        --dtype bf16 --compile reduce-overhead --warmup 1000 --samples 2000 \\
        --out results.json --trace trace.json

Compilation (dynamo tracing, inductor code generation, max-autotune's
benchmarking, CUDA-graph recording) happens in the first call, timed apart
as `compile_s`; `--warmup` batches follow before the measured window, so
nothing of it is measured. Only PyTorch is needed (no timm).
"""
import argparse
import json
import math
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
# Calls a compiled model needs before it runs its final code: the first
# compiles; with CUDA graphs (reduce-overhead, max-autotune) the next ones
# warm up and record the graph, which is replayed from then on.
MIN_COMPILED_WARMUP = 3
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
LN_EPS = 1e-6
BOOTSTRAP_RESAMPLES = 2000
SOURCE_POOL = 4


class UsageError(Exception):
    """A bad argument: printed as `error: ...` with exit status 2."""


# ---------------------------------------------------------------- arguments


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", required=True, help='"vit{patch}x{depth}x{dim}", e.g. vit16x6x384')
    p.add_argument("--heads", type=int, help="attention heads (default dim/64)")
    p.add_argument("--mlp-dim", type=int, help="MLP hidden width (default 4*dim)")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--source-size", type=int, help="synthetic image size before resizing (default image_size*8/7)")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10, help="batches run before measuring")
    p.add_argument("--samples", type=int, default=256, help="images measured, rounded up to whole batches")
    p.add_argument("--dtype", default="f32", help="f32, f16 or bf16")
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N")
    p.add_argument("--preprocess", default="cpu", help="cpu or gpu (resize, normalize, cast)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", default="none", help="none, default, reduce-overhead or max-autotune")
    p.add_argument("--out", required=True, help="results.json to write")
    p.add_argument("--trace", help="write a PyTorch-profiler Chrome trace of the measured window here")
    return p.parse_args(argv)


def parse_model(name):
    m = re.fullmatch(r"vit(\d+)x(\d+)x(\d+)", name)
    if not m:
        raise UsageError(f'--model {name!r} is not of the form "vit{{patch}}x{{depth}}x{{dim}}" (e.g. vit16x12x768)')
    return tuple(int(g) for g in m.groups())


def resolve(args):
    """The `Vit` task's resolved configuration (spec.rs), checked the same way."""
    patch, depth, dim = parse_model(args.model)
    for flag, value in (("patch", patch), ("depth", depth), ("dim", dim), ("--batch", args.batch)):
        if value < 1:
            raise UsageError(f"`{flag}` must be at least 1 (got {value})")
    heads = args.heads if args.heads is not None else max(dim // 64, 1)
    if heads < 1 or dim % heads:
        raise UsageError(f"`dim` ({dim}) is not divisible by `--heads` ({heads})")
    mlp_dim = args.mlp_dim if args.mlp_dim is not None else 4 * dim
    if mlp_dim < 1:
        raise UsageError("`--mlp-dim` must be at least 1")
    if args.image_size < 1 or args.image_size % patch:
        raise UsageError(f"`--image-size` ({args.image_size}) is not divisible by the patch size ({patch})")
    source_size = args.source_size if args.source_size is not None else args.image_size * 8 // 7
    if source_size < 1:
        raise UsageError("`--source-size` must be at least 1")
    if args.num_classes < 1:
        raise UsageError("`--num-classes` must be at least 1")
    if args.samples < 1:
        raise UsageError("`--samples` must be at least 1")
    if args.warmup < 0:
        raise UsageError("`--warmup` must not be negative")
    dtypes = {"f32": "f32", "float32": "f32", "f16": "f16", "float16": "f16", "half": "f16",
              "bf16": "bf16", "bfloat16": "bf16"}
    if args.dtype not in dtypes:
        raise UsageError(f"`--dtype` {args.dtype!r} is not one of f32, f16, bf16")
    device = parse_device(args.device)
    if args.preprocess not in ("cpu", "gpu"):
        raise UsageError(f"`--preprocess` {args.preprocess!r} is not one of cpu, gpu")
    if args.preprocess == "gpu" and device == "cpu":
        raise UsageError("`--preprocess gpu` needs `--device cuda`")
    if args.compile not in COMPILE_MODES:
        raise UsageError(f"`--compile` {args.compile!r} is not one of {', '.join(COMPILE_MODES)}")
    if args.compile != "none" and args.warmup < MIN_COMPILED_WARMUP:
        raise UsageError(
            f"`--warmup` {args.warmup} is too short for `--compile {args.compile}`: give at least "
            f"{MIN_COMPILED_WARMUP} batches (CUDA graphs are recorded in the first calls after compiling)")
    if args.seed < 0:
        raise UsageError("`--seed` must not be negative")
    batches = -(-args.samples // args.batch)
    return {
        "model": f"vit{patch}x{depth}x{dim}",
        "patch": patch, "depth": depth, "dim": dim, "heads": heads, "mlp_dim": mlp_dim,
        "image_size": args.image_size, "source_size": source_size,
        "num_classes": args.num_classes, "batch": args.batch, "warmup": args.warmup,
        "samples": args.samples, "batches": batches, "dtype": dtypes[args.dtype],
        # serde's form of the task's `Device`, `Pipeline`, `Preprocess` and `Trace` enums
        "device": "cpu" if device == "cpu" else {"cuda": int(device.split(":")[1])},
        "pipeline": "Sync",
        "preprocess": args.preprocess.capitalize(),
        "trace": "None",
        "numa": None,
        "seed": args.seed,
    }


def parse_device(text):
    if text == "cpu":
        return "cpu"
    if text == "cuda":
        return "cuda:0"
    m = re.fullmatch(r"cuda:(\d+)", text)
    if not m:
        raise UsageError(f"`--device` {text!r} is not one of cpu, cuda, cuda:N")
    return text


def output_path(path, flag):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"`{flag}` {path!r}: the folder {folder!r} does not exist")
    return path


# ---------------------------------------------------------------- counts (formula.rs)


def params_formula(c):
    d, m, p = c["dim"], c["mlp_dim"], c["patch"]
    tokens = (c["image_size"] // p) ** 2 + 1
    block = 4 * d * d + 2 * d * m + 9 * d + m
    return (3 * p * p * d + d) + d + tokens * d + c["depth"] * block + 2 * d + d * c["num_classes"] + c["num_classes"]


def flops_formula(c):
    d, m, p = c["dim"], c["mlp_dim"], c["patch"]
    n = (c["image_size"] // p) ** 2
    t = n + 1
    block = 4 * t * d * d + 2 * t * t * d + 2 * t * d * m
    return 2 * (n * 3 * p * p * d + c["depth"] * block + d * c["num_classes"])


# ---------------------------------------------------------------- statistics (stats.rs)


def percentile(sorted_values, p):
    """Linear-interpolated percentile of sorted data (numpy's default)."""
    rank = p / 100.0 * (len(sorted_values) - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (rank - lo)


class SplitMix64:
    """The Rust task's generator, bit for bit, so one seed gives one interval."""

    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = (seed ^ 0x9E3779B97F4A7C15) & self.MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def latency_stats(samples, seed):
    s = sorted(samples)
    n = len(s)
    mean = sum(s) / n
    var = sum((x - mean) ** 2 for x in s) / max(n - 1, 1)
    rng = SplitMix64(seed)
    medians = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        resample = sorted(s[rng.below(n)] for _ in range(n))
        medians.append(percentile(resample, 50.0))
    medians.sort()
    return {
        "mean": mean, "median": percentile(s, 50.0), "p90": percentile(s, 90.0),
        "p99": percentile(s, 99.0), "min": s[0], "max": s[-1], "std": math.sqrt(var),
        "median_ci95": [percentile(medians, 2.5), percentile(medians, 97.5)],
    }


# ---------------------------------------------------------------- environment (env.rs)

SMI_QUERY = ("index", "name", "uuid", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm",
             "temperature.gpu", "power.draw", "memory.free", "memory.total", "pstate")


def run_text(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def read_trimmed(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def visible_gpus():
    csv = run_text(["nvidia-smi", f"--query-gpu={','.join(SMI_QUERY)}", "--format=csv,noheader,nounits"]) or ""
    gpus = []
    for line in csv.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(SMI_QUERY):
            gpus.append(dict(zip(("index", "name", "uuid", "driver"), cells[:4]), **dict(zip(SMI_QUERY[4:], cells[4:]))))
    mask = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").strip()
    if not mask:
        return gpus
    chosen = []
    for ident in (i.strip() for i in mask.split(",")):
        match = next((g for g in gpus if g["index"] == ident or g["uuid"].startswith(ident)), None)
        if match:
            chosen.append(match)
    return chosen


def join_distinct(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return ", ".join(seen) if seen else "none"


def probe_env(torch):
    """The fingerprint the Rust task records, probed the same way, so that a
    Report sees this run and a `Vit` run on the same host as one environment.
    `libtorch` is `torch.__version__` (2.11.0+cu130), the string the Rust
    task reads off the libtorch it was built against."""
    gpus = visible_gpus()
    smi = run_text(["nvidia-smi", "--version"]) or ""
    cuda = next((line.split(":", 1)[1].strip() for line in smi.splitlines()
                 if line.lower().startswith("cuda version") and ":" in line), "none")
    cpuinfo = read_trimmed("/proc/cpuinfo") or ""
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                if line.startswith("model name") and ":" in line), "unknown")
    status = read_trimmed("/proc/self/status") or ""
    allowed = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                    if line.startswith("Mems_allowed_list:")), None)
    online = read_trimmed("/sys/devices/system/node/online")
    numa = allowed if allowed is not None and online is not None and allowed != online else "unbound"
    return {
        "key_facets": {
            "gpu": join_distinct(g["name"] for g in gpus),
            "driver": join_distinct(g["driver"].split(".")[0] for g in gpus),
            "cuda": cuda,
            "libtorch": torch.__version__,
            "cpu": cpu,
            "numa": numa,
        },
        "record": {
            "host": read_trimmed("/proc/sys/kernel/hostname"),
            "kernel": read_trimmed("/proc/sys/kernel/osrelease"),
            "cpu_count": os.cpu_count() or 1,
            "libtorch_cuda": torch.version.cuda or "none",
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpus": gpus,
            "unix_time_s": int(time.time()),
            "python": platform.python_version(),
        },
    }


# ---------------------------------------------------------------- the model (model.rs)


def build_model(torch, c, dtype, device):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d, m = c["dim"], c["mlp_dim"]
            self.heads = c["heads"]
            self.norm1 = nn.LayerNorm(d, eps=LN_EPS)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm2 = nn.LayerNorm(d, eps=LN_EPS)
            self.fc1 = nn.Linear(d, m)
            self.fc2 = nn.Linear(m, d)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
            x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            d, p = c["dim"], c["patch"]
            tokens = (c["image_size"] // p) ** 2 + 1
            self.patch_embed = nn.Conv2d(3, d, kernel_size=p, stride=p)
            self.cls_token = nn.Parameter(torch.empty(1, 1, d))
            self.pos_embed = nn.Parameter(torch.empty(1, tokens, d))
            self.blocks = nn.ModuleList(Block() for _ in range(c["depth"]))
            self.norm = nn.LayerNorm(d, eps=LN_EPS)
            self.head = nn.Linear(d, c["num_classes"])

        def forward(self, images):
            x = self.patch_embed(images).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x)[:, 0])

    model = ViT()
    # The Rust task's init: every matrix and embedding N(0, 0.02^2) drawn in
    # float32 on the CPU from `seed` (in construction order: blocks' qkv,
    # proj, fc1, fc2; then patch weight, class token, positions, head), zero
    # biases, unit norm scales.
    torch.manual_seed(c["seed"])
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        for block in model.blocks:
            for layer in (block.qkv, block.proj, block.fc1, block.fc2):
                layer.weight.copy_(torch.randn(layer.weight.shape) * 0.02)
        for tensor in (model.patch_embed.weight, model.cls_token, model.pos_embed, model.head.weight):
            tensor.copy_(torch.randn(tensor.shape) * 0.02)
    return model.eval().to(device=device, dtype=dtype)


# ---------------------------------------------------------------- measurement (measure.rs)


class Bench:
    def __init__(self, torch, c, device, dtype, fn, compiled):
        self.torch, self.c, self.device, self.dtype, self.fn = torch, c, device, dtype, fn
        self.cuda = device.type == "cuda"
        gen = torch.Generator().manual_seed(c["seed"])
        shape = (c["batch"], 3, c["source_size"], c["source_size"])
        self.pool = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen) for _ in range(SOURCE_POOL)]
        if self.cuda:
            self.pool = [t.pin_memory() for t in self.pool]
        self.mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        self.compiled = compiled

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def preprocess(self, raw):
        torch = self.torch
        dev = raw.device
        mean = torch.tensor(MEAN, device=dev).mul(255.0).reshape(1, 3, 1, 1)
        std = torch.tensor(STD, device=dev).mul(255.0).reshape(1, 3, 1, 1)
        size = self.c["image_size"]
        x = torch.nn.functional.interpolate(raw.float(), size=(size, size), mode="bilinear", align_corners=False)
        return x.sub(mean).div(std).to(self.dtype)

    def forward(self, images):
        if self.compiled and self.mark_step is not None:
            # Tells cudagraph trees that the previous outputs are consumed
            # (they were copied to the host), so the graph may overwrite them.
            self.mark_step()
        return self.fn(images)

    def batch(self, index, record_function):
        """One batch; returns (total ms, [preprocess, h2d, forward, d2h] ms)."""
        torch = self.torch
        raw = self.pool[index % len(self.pool)]
        stages = [0.0, 0.0, 0.0, 0.0]
        gpu_pre = self.c["preprocess"] == "Gpu"
        if gpu_pre:
            prepared = raw
        else:
            t = time.perf_counter()
            prepared = self.preprocess(raw)
            if self.cuda:
                prepared = prepared.pin_memory()
            stages[0] = ms(t)
        start = time.perf_counter()
        t = time.perf_counter()
        images = prepared.to(self.device, non_blocking=True)
        self.sync()
        stages[1] = ms(t)
        if gpu_pre:
            t = time.perf_counter()
            images = self.preprocess(images)
            self.sync()
            stages[0] = ms(t)
        t = time.perf_counter()
        with record_function("forward"):
            logits = self.forward(images)
            self.sync()
        stages[2] = ms(t)
        t = time.perf_counter()
        logits.to("cpu", torch.float32)
        stages[3] = ms(t)
        total = ms(start) + (0.0 if gpu_pre else stages[0])
        return total, stages


def ms(since):
    return (time.perf_counter() - since) * 1e3


def nullcontext_factory(_name):
    import contextlib
    return contextlib.nullcontext()


def measure(torch, c, device, dtype, mode, trace_path):
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("`--device` asks for CUDA, but PyTorch sees no GPU")
        if device.index >= torch.cuda.device_count():
            raise UsageError(f"`--device` cuda:{device.index}, but PyTorch sees {torch.cuda.device_count()} GPU(s)")
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)  # the CUDA context, outside the baseline
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_reserved(device)
    model = build_model(torch, c, dtype, device)
    params = sum(t.numel() for t in model.parameters())
    fn = model if mode == "none" else torch.compile(model, mode=mode)
    bench = Bench(torch, c, device, dtype, fn, compiled=mode != "none")
    none = nullcontext_factory
    with torch.inference_mode():
        # The first call compiles (and autotunes); it is timed apart.
        t = time.perf_counter()
        bench.batch(0, none)
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(c["warmup"]):
            bench.batch(i + 1, none)
        warmup_s = time.perf_counter() - t
        profiler = None
        record_function = none
        if trace_path:
            from torch.profiler import ProfilerActivity, profile, record_function
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bench.cuda else [])
            profiler = profile(activities=activities)
            profiler.__enter__()
        batch_ms, sums = [], [0.0, 0.0, 0.0, 0.0]
        try:
            start = time.perf_counter()
            with record_function("measure"):
                for i in range(c["batches"]):
                    with record_function(f"batch {i}"):
                        total, stages = bench.batch(i, record_function)
                    batch_ms.append(total)
                    sums = [a + b for a, b in zip(sums, stages)]
                bench.sync()
            window_s = time.perf_counter() - start
        finally:
            if profiler is not None:
                profiler.__exit__(None, None, None)
    if bench.cuda:
        peak = max(torch.cuda.max_memory_reserved(device) - baseline, 0)
    else:
        peak = host_peak_memory()
    if profiler is not None:
        write_atomically(trace_path, lambda tmp: profiler.export_chrome_trace(tmp))
    return {
        "params": params, "batch_ms": batch_ms, "stage_sums": sums, "window_s": window_s,
        "compile_s": compile_s, "warmup_s": warmup_s, "peak": peak,
    }


def host_peak_memory():
    status = read_trimmed("/proc/self/status") or ""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split(":", 1)[1].strip().split()[0]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_atomically(path, write):
    """`write(tmp)` fills a temporary file beside `path`, renamed into place
    only when it is complete."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; outputs are ordinary files
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def kernels_per_forward(trace_path, batches):
    """Kernels that start inside the measured `forward` ranges, per range, and
    their summed GPU time per range in ms (as the Rust task's CUPTI trace
    summary counts them); without the ranges' GPU projections, the window's
    kernels per batch; None without kernels. Also the kernel count."""
    with open(trace_path) as f:
        events = json.load(f).get("traceEvents", [])
    forwards = [(e["ts"], e["ts"] + e["dur"]) for e in events
                if e.get("cat") == "gpu_user_annotation" and e.get("name") == "forward"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if not kernels:
        return None, None, 0
    if forwards:
        inside = [k for k in kernels if any(s <= k["ts"] < e for s, e in forwards)]
        per = len(forwards)
    else:
        inside, per = kernels, batches
    # Chrome-trace durations are in microseconds.
    return len(inside) / per, sum(k.get("dur", 0) for k in inside) / 1e3 / per, len(kernels)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        c = resolve(args)
        output_path(args.out, "--out")
        if args.trace:
            output_path(args.trace, "--trace")
        try:
            import torch
        except ImportError as e:
            raise UsageError(f"PyTorch is not importable with {sys.executable} ({e}); install torch or set PYTHONPATH")
        random.seed(c["seed"])
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
        device = torch.device(parse_device(args.device))
        before = probe_env(torch)
        m = measure(torch, c, device, dtype, args.compile, args.trace)
        after = probe_env(torch)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    expected = params_formula(c)
    if m["params"] != expected:
        print(f"error: the model has {m['params']} parameters, the closed form {expected}: "
              "the architecture differs from the `Vit` task's", file=sys.stderr)
        return 1
    images = c["batches"] * c["batch"]
    batches = max(len(m["batch_ms"]), 1)
    throughput = images / m["window_s"] if m["window_s"] > 0 else 0.0
    flops = flops_formula(c)
    stages = [s / batches for s in m["stage_sums"]]
    results = {
        "config": c,
        "env": {"key_facets": before["key_facets"],
                "record": {"before": before["record"], "after": after["record"]}},
        "params": m["params"],
        "flops_per_image": flops,
        "images": images,
        "throughput_images_per_s": throughput,
        "latency_ms": latency_stats(m["batch_ms"], c["seed"]),
        "stages_ms": dict(zip(("preprocess", "h2d", "forward", "d2h"), stages)),
        "peak_memory_bytes": m["peak"],
        "tflops": throughput * flops / 1e12,
        # extras of this benchmark
        "compile": args.compile,
        "compile_s": m["compile_s"],
        "warmup_s": m["warmup_s"],
        "torch_version": __import__("torch").__version__,
        "latency_samples_ms": m["batch_ms"],
        # the key of scripts/gpu/summarize.py
        "forward_ms": {"mean": stages[2]},
    }
    if args.trace:
        per_forward, ms_per_forward, kernels = kernels_per_forward(args.trace, c["batches"])
        results["trace"] = {"kernels": kernels, "kernels_per_forward": per_forward,
                            "kernel_ms_per_forward": ms_per_forward}
        results["kernels_per_forward"] = per_forward
    text = json.dumps(results, indent=2) + "\n"

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    write_atomically(args.out, write)
    print(f"{c['model']} compile={args.compile} batch={c['batch']}: {throughput:.1f} images/s, "
          f"median {results['latency_ms']['median']:.3f} ms/batch, compile {m['compile_s']:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
