"""Summary of scripts/gpu/telemetry.sh: NVML telemetry against nvidia-smi,
the intruder's verdict, and the sampler's cost (on/off ratios of the median
batch latency, paired by alternation)."""
import json
import pathlib
import statistics
import sys

results = pathlib.Path(sys.argv[1])
pairs = int(sys.argv[2])
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 0


def load(name):
    return json.loads((results / name).read_text())


def smi(name):
    rows = []
    for line in (results / name).read_text().splitlines():
        f = [x.strip() for x in line.split(",")]
        try:
            rows.append({"sm": float(f[1]), "mem": float(f[2]), "temp": float(f[3]),
                         "power": float(f[4]), "util": float(f[5]), "reasons": f[6]})
        except (ValueError, IndexError):
            pass
    return rows


def busy(rows):
    return [r for r in rows if r["util"] > 0]


print("\n== 1. NVML telemetry (in results.json) against nvidia-smi beside it, alone ==")
alone = load("alone.json")
t = alone["telemetry"]
rows = busy(smi("alone-smi.csv"))
print(f"source {t['source']}, {t['samples']} samples at {t['interval_ms']} ms, "
      f"window {alone['images'] / alone['throughput_images_per_s']:.2f} s")
for key, smikey in [("sm_mhz", "sm"), ("mem_mhz", "mem"), ("temp_c", "temp"), ("power_w", "power"), ("util_pct", "util")]:
    s = t[key]
    m = statistics.median(r[smikey] for r in rows) if rows else float("nan")
    lo = min(r[smikey] for r in rows) if rows else float("nan")
    hi = max(r[smikey] for r in rows) if rows else float("nan")
    print(f"  {key:9s} vitgraph min/median/max {s['min']:.0f}/{s['median']:.0f}/{s['max']:.0f}   "
          f"nvidia-smi (busy rows, n={len(rows)}) {lo:.0f}/{m:.0f}/{hi:.0f}")
print(f"  reasons seen {t['reasons_seen']}, throttle share {t['throttle_share']:.3f}, "
      f"other processes {t['other_processes']}")
print(f"  verdict {alone['validity']['verdict']}, flags {[f['detail'] for f in alone['validity']['flags']]}, "
      f"excluded {len(alone['validity']['excluded_batches'])} of {len(t['batch_sm_mhz'])} batches")
print(f"  host {t['host']}")
print(f"  one NVML reading took {t['read_us']} µs (every {t['interval_ms']} ms)")

print("\n== 2. A bf16 matmul loop started on the same GPU mid-run ==")
intr = load("intruded.json")
t = intr["telemetry"]
print(f"  verdict {intr['validity']['verdict']}")
for f in intr["validity"]["flags"]:
    print(f"    {f['kind']}: {f['detail']}")
print(f"  other processes {t['other_processes']}, SM clock {t['sm_mhz']}, power {t['power_w']}, "
      f"reasons {t['reasons_seen']}, throttle share {t['throttle_share']:.3f}")
print(f"  excluded {len(intr['validity']['excluded_batches'])} of {len(t['batch_sm_mhz'])} batches; "
      f"median latency {intr['latency_ms']['median']:.3f} ms (alone {alone['latency_ms']['median']:.3f} ms)")
print("  status: " + (results / "intruded-status.txt").read_text().strip().replace("\n", "\n          "))

print(f"\n== 3. The sampler's cost inside runs: paused every other block of 25 batches, {reps} runs ==")
for g in ["none", "cuda"]:
    ratios = []
    for i in range(1, reps + 1):
        r = load(f"ab-{g}-{i}.json")
        if r["validity"]["excluded_batches"]:
            print(f"  ab-{g}-{i}: {len(r['validity']['excluded_batches'])} batches excluded, skipped")
            continue
        lat = r["latency_samples_ms"]
        on = [x for k, x in enumerate(lat) if (k // 25) % 2 == 0]
        off = [x for k, x in enumerate(lat) if (k // 25) % 2 == 1]
        ratios.append(statistics.median(on) / statistics.median(off))
    if ratios:
        print(f"  graph {g}: sampled/unsampled median latency, per run: {', '.join(f'{x:.4f}' for x in ratios)}; "
              f"median {statistics.median(ratios):.4f}")

print(f"\n== 4. The sampler's cost between runs: {pairs} alternating builds, on/off ratio of the median batch latency ==")
for g in ["none", "cuda"]:
    ratios, on_m, off_m = [], [], []
    for i in range(1, pairs + 1):
        on = load(f"on-{g}-{i}.json")["latency_ms"]["median"]
        off = load(f"off-{g}-{i}.json")["latency_ms"]["median"]
        ratios.append(on / off)
        on_m.append(on)
        off_m.append(off)
    samples = [load(f"on-{g}-{i}.json")["telemetry"]["samples"] for i in range(1, pairs + 1)]
    reads = [load(f"on-{g}-{i}.json")["telemetry"]["read_us"]["median"] for i in range(1, pairs + 1)]
    print(f"  graph {g}: median on {statistics.median(on_m):.4f} ms, off {statistics.median(off_m):.4f} ms, "
          f"median ratio on/off {statistics.median(ratios):.4f} "
          f"(pairs {', '.join(f'{r:.3f}' for r in ratios)}); samples per run {samples}, "
          f"median µs per reading {', '.join(f'{r:.0f}' for r in reads)}")
    logs = sorted(__import__('math').log(r) for r in ratios)
    if len(logs) > 2:
        m = statistics.mean(logs)
        half = 2.0 * statistics.stdev(logs) / len(logs) ** 0.5
        e = __import__('math').exp
        print(f"    geometric mean ratio {e(m):.4f}, ~95 % interval [{e(m - half):.4f}, {e(m + half):.4f}]")
    verdicts = [load(f"{c}-{g}-{i}.json")["validity"]["verdict"] for c in ["on", "off"] for i in range(1, pairs + 1)]
    print(f"    verdicts: {verdicts.count('valid')} valid, {verdicts.count('invalid')} invalid")
