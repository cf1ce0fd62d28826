#!/usr/bin/env python3
"""Prints markdown tables from the runs scripts/gpu/verify.sh made."""
import json
import os
import sys

runs = sys.argv[1]


def load(name):
    path = os.path.join(runs, name, "results.json") if not name.endswith(".json") else os.path.join(runs, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def f(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


print("## Vit (Rust/libtorch) vs timm eager vs torch.compile(reduce-overhead), bf16, 224 px\n")
print("| model | batch | params (ours / timm) | forward ms: ours | eager | compiled | ours/eager | img/s ours (end-to-end) | img/s eager | img/s compiled |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in ["vit32x6x384", "vit16x12x768", "vit32x18x1024"]:
    for b in [1, 64]:
        ours, eager, comp = load(f"vit_{m}_b{b}"), load(f"eager_{m}_b{b}"), load(f"compiled_{m}_b{b}")
        fwd = ours["stages_ms"]["forward"] if ours else None
        e = eager["forward_ms"]["mean"] if eager else None
        c = comp["forward_ms"]["mean"] if comp else None
        print(f"| {m} | {b} | {ours and ours['params']} / {eager and eager['params']} | {f(fwd, 3)} | {f(e, 3)} | {f(c, 3)} | "
              f"{f(fwd / e if fwd and e else None)} | {f(ours and ours['throughput_images_per_s'], 0)} | "
              f"{f(eager and eager['throughput_images_per_s'], 0)} | {f(comp and comp['throughput_images_per_s'], 0)} |")

print("\n## CUPTI trace: kernels per forward pass and overhead\n")
print("| run | kernels/forward (CUPTI) | kernels/forward (torch.profiler) | img/s traced | img/s untraced | overhead (img/s) | forward ms traced / untraced | records |")
print("|---|---|---|---|---|---|---|---|")
cfgs = [n[len("cupti_"):] for n in sorted(os.listdir(runs)) if n.startswith("cupti_")]
for cfg in cfgs:
    t, n, p = load(f"cupti_{cfg}"), load(f"notrace_{cfg}"), load("profiler_" + cfg.split("_r")[0])
    kt = t and t.get("trace", {}).get("kernels_per_forward")
    kp = p and p.get("kernels_per_forward")
    tt = t and t["throughput_images_per_s"]
    tn = n and n["throughput_images_per_s"]
    over = (1 - tt / tn) * 100 if tt and tn else None
    rec = t and t.get("trace")
    ft = t and t["stages_ms"]["forward"]
    fn = n and n["stages_ms"]["forward"]
    print(f"| {cfg} | {f(kt, 1)} | {f(kp, 1)} | {f(tt, 1)} | {f(tn, 1)} | {f(over, 1)}% | {f(ft, 3)} / {f(fn, 3)} | {rec} |")

print("\n## Pipelines (vit16x12x768, batch 64)\n")
print("| run | img/s | latency median ms | preprocess | h2d | forward | d2h | peak MiB |")
print("|---|---|---|---|---|---|---|---|")
for name in ["vit_vit16x12x768_b64", "async_vit16x12x768_b64", "gpupre_vit16x12x768_b64"]:
    r = load(name)
    if r:
        s = r["stages_ms"]
        peak = r["peak_memory_bytes"] / 2**20 if r["peak_memory_bytes"] else None
        print(f"| {name} | {f(r['throughput_images_per_s'], 0)} | {f(r['latency_ms']['median'], 2)} | {f(s['preprocess'])} | "
              f"{f(s['h2d'])} | {f(s['forward'])} | {f(s['d2h'])} | {f(peak, 0)} |")

print("\n## OpBench\n")
print("| run | status | median ms | TFLOP/s | GB/s | of copy bw | of matmul | auto picks | note |")
print("|---|---|---|---|---|---|---|---|---|")
cal = load("calibrate")
for name in sorted(os.listdir(runs)):
    r = load(name)
    if not r or "op" not in r or name == "calibrate":
        continue
    note = r.get("error", "")[:60] if r.get("status") != "ok" else ""
    print(f"| {name} | {r.get('status')} | {f(r.get('time_ms', {}).get('median'), 4)} | {f(r.get('tflops'), 1)} | "
          f"{f(r.get('gbps'), 0)} | {f(r.get('fraction_of_copy_bandwidth'))} | {f(r.get('fraction_of_matmul_rate'))} | "
          f"{r.get('sdpa_auto_choice') or ''} | {note} |")
if cal:
    print(f"\nCalibration: {cal['calibration']}")
ref = load("torch_ref.json")
if ref:
    print(f"\nPyTorch reference: {ref}")
    g = load("gemm_bf16_8192")
    if g and g.get("tflops"):
        print(f"- OpBench GEMM 8192³ bf16 / torch: {g['tflops'] / ref['matmul_bf16_8192_tflops']:.3f}")
    for op, key in [("op_LayerNorm", "layernorm_gbps"), ("op_Gelu", "gelu_gbps")]:
        r = load(op)
        if r and r.get("gbps"):
            print(f"- {op}: {r['gbps'] / ref['copy_gbps']:.3f} of torch's copy bandwidth, {r['gbps'] / ref[key]:.3f} of torch's own {key}")
