#!/usr/bin/env bash
# What CUPTI tracing costs a launch-bound run, and which part of it: the same
# `Vit` spec (MODEL, default vit32x6x384; BATCH, default 1; bf16, GPU
# preprocessing) untraced, traced as usual, traced with API calls recorded as
# activity records (VITGRAPH_CUPTI_API=activity) and with kernel records only
# (VITGRAPH_CUPTI_API=none VITGRAPH_CUPTI_KINDS=kernel), in alternating rounds
# (SHORT=1: untraced and traced only). Prints each variant's forward time
# against the untraced one, and which API calls one traced forward pass records.
#
# Interference on the host moves a run's median by up to ±50 % from run to
# run, so the runs are short (BATCHES, default 150), the rounds many, and the
# summary leads with the fastest batch and the runs' 10th percentiles.
#
#   RUN_TASK=.dev/bin/run_task OUT=/tmp/c scripts/gpu/cupti_cost.sh [ROUNDS]
set -uo pipefail
rounds="${1:-12}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
batches="${BATCHES:-150}"
spec="(model: \"${MODEL:-vit32x6x384}\", batch: ${BATCH:-1}, dtype: \"bf16\", warmup: 30, samples: $batches, preprocess: Gpu"
# NUMA=N (or NUMA=gpu: the GPU's own node) runs every run under `numa: Some(N)`.
if [[ "${NUMA:-}" == gpu ]]; then
    bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-Z' 'a-z')"
    NUMA="$(cat "/sys/bus/pci/devices/${bus: -12}/numa_node" 2>/dev/null || echo -1)"
    echo "GPU $bus is on NUMA node $NUMA"
    [[ "$NUMA" -ge 0 ]] || NUMA=""
fi
# CPUS=LIST runs every run under `taskset -c LIST`.
if [[ -n "${CPUS:-}" ]]; then
    printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$CPUS" "$(realpath "$bin")" >"$out/pinned"
    chmod +x "$out/pinned"
    bin="$out/pinned"
fi
if [[ -n "${NUMA:-}" ]]; then
    spec="$spec, numa: Some($NUMA)"
fi
# variant NAME ROUND [VAR=VALUE…]: one traced run with those environment
# settings, or an untraced one for NAME `untraced`.
variant() {
    local name="$1" r="$2"
    shift 2
    if [[ "$name" == untraced ]]; then
        task "${name}_r$r" vit "$spec)"
    else
        ([[ $# -eq 0 ]] || export "$@"; task "${name}_r$r" vit "$spec, trace: Cupti)")
    fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv >"$out/nvidia-smi-before.csv"
for r in $(seq 1 "$rounds"); do
    variant untraced "$r"
    variant cupti "$r"
    if [[ -z "${SHORT:-}" ]]; then
        variant cupti-activity-calls "$r" VITGRAPH_CUPTI_API=activity
        variant kernels-only "$r" VITGRAPH_CUPTI_API=none VITGRAPH_CUPTI_KINDS=kernel
    fi
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv >"$out/nvidia-smi-after.csv"
python3 - "$runs" "$batches" <<'PY' | tee "$out/summary-cupti-cost.md"
import json, os, sqlite3, statistics, sys
runs, batches = sys.argv[1], int(sys.argv[2])
by = {}
for name in os.listdir(runs):
    variant, r = name.rsplit("_r", 1)
    p = os.path.join(runs, name, "results.json")
    if os.path.exists(p):
        by.setdefault(variant, {})[int(r)] = sorted(json.load(open(p))["forward_samples_ms"])
def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]
def row(runs_of):
    runs_ = list(runs_of.values())
    return (
        min(x[0] for x in runs_),
        statistics.median(pct(x, 0.1) for x in runs_),
        statistics.median(statistics.median(x) for x in runs_),
    )
base = row(by["untraced"])
print("Forward ms of one batch. Interference on the host only adds time, and moves a run's median by up to ±50 % from run to run, so the steadiest figures are the fastest batch over all runs and the median over runs of each run's 10th percentile.\n")
print("| variant | runs | fastest batch | vs untraced | median p10 | vs untraced | median of run medians | vs untraced |")
print("|---|---|---|---|---|---|---|---|")
for v in sorted(by, key=lambda v: (v != "untraced", v)):
    fast, p10, med = row(by[v])
    d = lambda x, b: f"{100 * (x / b - 1):+.1f} %"
    print(f"| {v} | {len(by[v])} | {fast:.3f} | {d(fast, base[0])} | {p10:.3f} | {d(p10, base[1])} | {med:.3f} | {d(med, base[2])} |")
kpf = []
for name in sorted(os.listdir(runs)):
    p = os.path.join(runs, name, "results.json")
    if name.startswith("cupti_r") and os.path.exists(p):
        t = json.load(open(p)).get("trace") or {}
        kpf.append((name, t.get("kernels_per_forward"), t.get("traced_batches")))
if kpf:
    print("\nKernels per forward pass in the traced batches (`trace.kernels_per_forward`; traced batches):", ", ".join(f"{n}: {k} ({b})" for n, k, b in kpf))
for variant in ("cupti", "cupti-activity-calls"):
    db = os.path.join(runs, f"{variant}_r1", "trace.sqlite")
    if not os.path.exists(db):
        continue
    c = sqlite3.connect(db)
    c.execute("CREATE INDEX IF NOT EXISTS by_correlation ON CUPTI_ACTIVITY_KIND_RUNTIME (correlationId)")
    (kernels,) = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    (joined,) = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId)").fetchone()
    (later,) = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId) WHERE k.start >= r.start").fetchone()
    total = batches + 30
    print(f"\n{variant}_r1: {kernels} kernels over {total} batches; {joined} joined to a launching call by correlation id; {later} (kernel, call) pairs with the kernel starting after the call began.\n")
    print("| API call | per forward | median µs |")
    print("|---|---|---|")
    rows = c.execute("SELECT s.value, count(*), r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId GROUP BY s.value ORDER BY count(*) DESC").fetchall()
    for name, n, _ in rows:
        ds = [e - s for (s, e) in c.execute("SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE s.value = ?", (name,))]
        print(f"| {name} | {n / total:.1f} | {statistics.median(ds) / 1000:.2f} |")
PY
find "$runs" -name trace.sqlite -delete
tar -czf "$out/runs-cupti-cost.tar.gz" -C "$out" runs
