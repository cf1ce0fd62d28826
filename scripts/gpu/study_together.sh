#!/usr/bin/env bash
# The study's comparisons on one GPU, measured together and apart in one
# workspace (scripts/gpu/study_together/study.ron): the night sweep's SDPA
# backends, GEMM dtypes and padding as `OpBench` blocks, RQ5's pipeline
# designs and RQ2's resolutions as `Vit` blocks, each beside the same
# configurations one per process, five processes each, in one build.
# Needs a release vitgraph built with `--features torch` at $VITGRAPH
# (default .dev/bin/vitgraph) and PyTorch 2.11 (cu13) in python3.
#
#   OUT=/tmp/out scripts/gpu/study_together.sh [-p reps=10] …
#
# Writes host.txt, the build's events and errors, the reports, every run's
# results and summary.md into $OUT/study_together.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-study-together}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
ws="${WORK:-/tmp/study_together}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
rm -rf "$ws"
mkdir -p "$out" "$ws/pipelines"
cp scripts/gpu/study_together/study.ron "$ws/pipelines/"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    nproc
} | tee "$ws/host.txt"
reports=()
for exp in s2 g3 p1 rq5 rq2; do reports+=("${exp}_together_report" "${exp}_apart_report"); done
start=$(date +%s.%N)
timeout --signal=INT --kill-after=20 "${BUDGET:-480}" "$vitgraph" -C "$ws" build -k -j 1 --json "${reports[@]}" "$@" \
    >"$ws/build.jsonl" 2>"$ws/build.err"
rc=$?
echo "build exit $rc after $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s" | tee "$ws/times.txt"
tail -n 3 "$ws/build.err"
python3 - "$ws" >>"$ws/times.txt" <<'PY'
import json, os, sys, collections
took = collections.defaultdict(list)
for line in open(os.path.join(sys.argv[1], "build.jsonl")):
    e = json.loads(line)
    if e.get("event") == "finished" and "duration_ms" in e and "[" in e.get("node", ""):
        took[e["node"].split("[")[0]].append(e["duration_ms"] / 1e3)
for stage, xs in sorted(took.items()):
    print(f"{stage}: {len(xs)} processes, {sum(xs):.1f} s")
PY
python3 scripts/gpu/study_together/summarize.py "$ws" | tee "$ws/summary.md"
tar -czf "$out/study_together.tar.gz" -C "$ws" host.txt times.txt summary.md build.jsonl build.err out 2>/dev/null
ls -la "$out"
