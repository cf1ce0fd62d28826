#!/usr/bin/env bash
# Does the spread between runs shrink with `settle` and with the verdicts?
# The 6 configurations of the variance study × 5 interleaved runs, built
# from empty workspaces: `base` (reproducibility/variance.ron: 20 warm-up
# batches) and `settle` (telemetry/settle.ron: then blocks of 25 until two
# agree within 2 %, at most 500). After the first build each workspace is
# built up to twice more, which measures the invalid runs again (their
# verdicts say why). The summary gives each configuration's 95 % half-width
# over its 5 runs' median latencies, after the first build and after the
# re-measurements, and the verdicts.
#
#   scripts/gpu/settle.sh
#
# Needs a release `vitgraph` and `vitgraph-torch` in .dev/bin and PyTorch.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-settle}"
work="${WORK:-$root/.repro-work/settle}"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
results="$work/results"
rm -rf "$work"
mkdir -p "$out" "$results"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
snapshot() { # WORKSPACE NAME: every run's config, median, verdict
    python3 - "$1" >"$results/$2.json" <<'PY'
import json, pathlib, sys
runs = []
for f in sorted(pathlib.Path(sys.argv[1], "out", "v").glob("*/results.json")):
    r = json.loads(f.read_text())
    c = r["config"]
    runs.append({"node": f.parent.name, "model": c["model"], "graph": c.get("graph", "None"),
                 "median": r["latency_ms"]["median"], "verdict": r["validity"]["verdict"],
                 "flags": [x["detail"] for x in r["validity"]["flags"] if x["invalidates"]],
                 "settle": r.get("settle")})
print(json.dumps(runs))
PY
}
for cond in base settle; do
    ws="$work/$cond"
    mkdir -p "$ws/pipelines"
    case "$cond" in
        base) cp scripts/gpu/reproducibility/variance.ron "$ws/pipelines/" ;;
        settle) cp scripts/gpu/telemetry/settle.ron "$ws/pipelines/" ;;
    esac
    for pass in 1 2 3; do
        echo "[$(date -u +%H:%M:%S)] $cond build $pass"
        "$vitgraph" -C "$ws" build -j 1 >"$results/$cond-$pass.txt" 2>&1
        tail -n 1 "$results/$cond-$pass.txt"
        snapshot "$ws" "$cond-$pass"
    done
    "$vitgraph" -C "$ws" status >"$results/$cond-status.txt" 2>&1
done
tar -czf "$out/settle.tar.gz" -C "$work" results
python3 scripts/gpu/telemetry/settle_summary.py "$results"
