#!/usr/bin/env bash
# `isolation: Gpu` on the lent machine (book: Experiments, "Isolation"): the
# host's topology as vitgraph and the tools see it, then a build of
# isolation/one_gpu.ron — which cores each measurement was pinned to (its
# telemetry) and which the nodes beside it got.
#
#   scripts/gpu/isolation.sh
#
# Needs a release `vitgraph` and `vitgraph-torch` in .dev/bin and PyTorch.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-isolation}"
work="${WORK:-$root/.repro-work/isolation}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
rm -rf "$work"
mkdir -p "$out" "$work/ws/pipelines"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
{
    echo "== nproc: $(nproc); affinity: $(grep Cpus_allowed_list /proc/self/status)"
    for n in /sys/devices/system/node/node*; do echo "$(basename "$n"): $(cat "$n/cpulist")"; done
    bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f')"
    echo "GPU 0 bus $bus, numa_node $(cat "/sys/bus/pci/devices/${bus: -12}/numa_node" 2>/dev/null)"
    nvidia-smi topo -m 2>&1 | head -20
    command -v numactl >/dev/null && numactl --hardware
} | tee "$out/host.txt"
cp scripts/gpu/isolation/one_gpu.ron "$work/ws/pipelines/"
"$vitgraph" -C "$work/ws" build -j 4 --json >"$out/build.jsonl" 2>"$out/build.err"
echo "build exit $?"
tail -n 3 "$out/build.err"
for g in none cuda; do
    python3 - "$work/ws/out/v/graph=$g/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["telemetry"]
print(f"v[graph={r['config']['graph']}]: verdict {r['validity']['verdict']}, host {t['host']}, "
      f"median {r['latency_ms']['median']:.3f} ms, GPU samples {t['samples']}")
PY
done
for i in 1 2; do echo "beside[i=$i]: $(cat "$work/ws/out/beside/i=$i/cores.txt")"; done
python3 - "$out/build.jsonl" <<'PY'
import json, sys
starts = [json.loads(l) for l in open(sys.argv[1]) if '"started"' in l]
print("started:", [(e.get("node"), e.get("gpus")) for e in starts][:8])
PY
