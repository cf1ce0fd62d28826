#!/usr/bin/env bash
# Runs the RQ1, RQ2, RQ4 and RQ5 study pipelines on a GPU host at reduced
# sample counts, with the headline demonstrations: RQ1 is killed (SIGKILL)
# mid-sweep and resumed, then its analysis definition is edited and rebuilt
# without re-running an experiment. Reports, logs and `status` outputs go to
# $OUT.
#
# Needs: a vitgraph binary built with `--features torch` at $VITGRAPH
# (default .dev/bin/vitgraph), PyTorch 2.11 (cu13) installed in python3 (its
# libraries are libtorch), and numactl (or a copy in .dev/numactl/).
#
#   scripts/gpu/study.sh            # all four, in this order: rq5 rq2 rq4 rq1
#   scripts/gpu/study.sh rq2 rq5    # some of them
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-study}"
mkdir -p "$out"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
if ! command -v numactl >/dev/null && [[ -x .dev/numactl/numactl ]]; then
    export PATH="$root/.dev/numactl:$PATH" LD_LIBRARY_PATH="$root/.dev/numactl:$LD_LIBRARY_PATH"
fi
gpus="$(nvidia-smi -L | wc -l)"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$out/study.log"; }
{
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv
    nvidia-smi topo -m
    numactl --hardware
    nproc
} >"$out/host.txt" 2>&1

# Reduced sample counts (images per run) and repetitions (two runs per
# configuration, no more) that fit the session's GPU time.
reps=(-p repeat=2 -p max_repeat=2)
common=(-j "$(nproc)" --gpus "$(seq -s, 0 $((gpus - 1)))" "${reps[@]}")

copy_report() {
    local rq="$1"
    mkdir -p "$out/$rq"
    cp -r "out/${rq}_report/${rq}_report/." "$out/$rq/" 2>/dev/null
    "$vitgraph" status "${rq}_report" "${reps[@]}" >"$out/$rq/status.txt" 2>&1
}

# NUMA: the first GPU's node is "local"; the farthest other node "remote".
numa_params() {
    local bus node nodes
    bus="$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000//')"
    node="$(cat "/sys/bus/pci/devices/0000${bus#0000}/numa_node" 2>/dev/null || echo 0)"
    [[ "$node" -lt 0 ]] && node=0
    nodes="$(numactl --hardware | awk '/^available:/ {print $2}')"
    if [[ "${nodes:-1}" -le 1 ]]; then
        echo "-p numa=[$node] -p numa_local=$node"
    else
        echo "-p numa=[$node,$(( (node + nodes / 2) % nodes ))] -p numa_local=$node"
    fi
}

# run_rq RQ ARGS…: builds the report; ARGS include -j/--gpus.
run_rq() {
    local rq="$1"
    shift
    log "build ${rq}_report $*"
    local start=$SECONDS
    "$vitgraph" build "${rq}_report" "$@" >"$out/$rq.build.log" 2>&1
    log "  exit $? after $((SECONDS - start)) s: $(tail -n 1 "$out/$rq.build.log")"
    copy_report "$rq"
}

# RQ1 with the headline demonstrations.
rq1_demo() {
    local p=(-p samples=640 "${common[@]}")
    local demo="$out/rq1-demo.txt"
    : >"$demo"
    log "rq1: build, killed with SIGKILL after 45 s"
    "$vitgraph" build rq1_report "${p[@]}" --json >"$out/rq1.first.jsonl" 2>"$out/rq1.first.err" &
    local pid=$!
    sleep 45
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    {
        echo "== killed after 45 s: runs recorded before the kill"
        grep -c '"event":"finished"' "$out/rq1.first.jsonl"
        echo "== vitgraph status rq1_report (after the kill)"
        "$vitgraph" status rq1_report -p samples=640 "${reps[@]}"
    } >>"$demo" 2>&1
    log "rq1: resume"
    "$vitgraph" build rq1_report "${p[@]}" --json >"$out/rq1.resume.jsonl" 2>"$out/rq1.resume.err"
    {
        echo "== resumed build: exit $?; nodes started"
        grep -c '"event":"started"' "$out/rq1.resume.jsonl"
        echo "== of which rq1_runs"
        grep '"event":"started"' "$out/rq1.resume.jsonl" | grep -c 'rq1_runs'
        echo "== vitgraph status rq1_report (after the resume)"
        "$vitgraph" status rq1_report -p samples=640 "${reps[@]}"
    } >>"$demo" 2>&1
    copy_report rq1
    log "rq1: edit the analysis definition (batch_prefix \"batch\" -> \"forward\")"
    cp pipelines/rq1.ron "$out/rq1.ron.orig"
    sed -i 's|task: Analyze(trace: "${needs.rq1_traces}/trace.sqlite"),|task: Analyze(trace: "${needs.rq1_traces}/trace.sqlite", batch_prefix: "forward"),|' pipelines/rq1.ron
    {
        echo "== the edit"
        diff "$out/rq1.ron.orig" pipelines/rq1.ron
        echo "== vitgraph status rq1_report (after the edit)"
        "$vitgraph" status rq1_report -p samples=640 "${reps[@]}"
        "$vitgraph" build rq1_report "${p[@]}" --json >"$out/rq1.edit.jsonl" 2>&1
        echo "== rebuild after the edit: exit $?; nodes started"
        grep -c '"event":"started"' "$out/rq1.edit.jsonl"
        echo "== of which rq1_runs (experiments)"
        grep '"event":"started"' "$out/rq1.edit.jsonl" | grep -c 'rq1_runs'
        echo "== vitgraph status rq1_report (after the rebuild)"
        "$vitgraph" status rq1_report -p samples=640 "${reps[@]}"
    } >>"$demo" 2>&1
    cp pipelines/rq1.ron.orig pipelines/rq1.ron 2>/dev/null || cp "$out/rq1.ron.orig" pipelines/rq1.ron
    mkdir -p "$out/rq1-edited"
    cp -r out/rq1_report/. "$out/rq1-edited/"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(rq5 rq2 rq4 rq1)
for rq in "${targets[@]}"; do
    case "$rq" in
    rq1) rq1_demo ;;
    rq2) run_rq rq2 "${common[@]}" -p samples=160 ;;
    # NUMA locality is relative to one GPU: every RQ4 run uses GPU 0.
    rq4) run_rq rq4 -j "$(nproc)" --gpus 0 "${reps[@]}" -p samples=640 $(numa_params) ;;
    rq5) run_rq rq5 "${common[@]}" -p samples=800 ;;
    *) log "unknown study $rq" ;;
    esac
done
log "done"
