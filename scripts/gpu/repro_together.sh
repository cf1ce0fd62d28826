#!/usr/bin/env bash
# The reproducibility sweep's comparisons measured together and apart
# (scripts/gpu/repro_together/study.ron) from an empty workspace: the
# together blocks (10 processes each) and, with APART=1, the configurations
# one per process (5 each). Run it twice for the agreement between builds
# and summarize both:
#
#   APART=1 OUT=/tmp/a WORK=/tmp/w1 scripts/gpu/repro_together.sh
#   OUT=/tmp/b WORK=/tmp/w2 scripts/gpu/repro_together.sh
#   python3 scripts/gpu/repro_together/summarize.py /tmp/w1 /tmp/w2
#
# Needs a release vitgraph with `--features torch` at $VITGRAPH (default
# .dev/bin/vitgraph) and PyTorch 2.11 (cu13) in python3. Writes the
# workspace's results, events and host into $OUT/repro_together.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-repro-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/repro_together}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
rm -rf "$ws"
mkdir -p "$out" "$ws/pipelines"
cp scripts/gpu/repro_together/study.ron "$ws/pipelines/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
} | tee "$ws/host.txt"
targets=(gpu_together cpu_together)
[ "${APART:-0}" = 1 ] && targets+=(gpu_apart cpu_apart)
start=$(date +%s)
timeout --signal=INT --kill-after=20 "${BUDGET:-500}" "$vitgraph" -C "$ws" build -k -j 1 --json "${targets[@]}" "$@" \
    >"$ws/build.jsonl" 2>"$ws/build.err"
echo "build exit $? after $(( $(date +%s) - start )) s" | tee "$ws/times.txt"
tail -n 2 "$ws/build.err"
python3 scripts/gpu/repro_together/summarize.py "$ws" | tee "$ws/summary.md"
# Only what the summary reads (and the errors): every results.json, less its per-batch lists.
python3 - "$ws" <<'PY'
import glob, json, os, sys
for p in glob.glob(os.path.join(sys.argv[1], "out", "*", "*", "results.json")):
    d = json.load(open(p))
    for m in (d.get("members") or {"": d}).values():
        for k in [k for k in m if k.endswith("_samples_ms")]:
            m.pop(k)
        m.pop("telemetry", None)
    json.dump(d, open(p, "w"))
PY
tar -czf "$out/repro_together.tar.gz" -C "$ws" host.txt times.txt summary.md build.jsonl build.err \
    $(cd "$ws" && ls -d out/*/*/results.json) 2>/dev/null
ls -la "$out"
