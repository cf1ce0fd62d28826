#!/usr/bin/env bash
# `vitgraph compare` on a GPU: the quickstart study built twice with
# nothing changed between the builds (the second with `--force`, every node
# measured again), compared through a saved baseline, with the kernel diff
# of the traced analyses. Two identical builds should read `same`: what is
# called `faster` or `slower` here is what the machine moves between two
# builds beyond the intervals — the false alarms of the comparison on real
# hardware.
#
#   OUT=/tmp/cmp scripts/gpu/compare.sh
#
# Needs the lean `vitgraph` at $VITGRAPH (default .dev/bin/vitgraph-lean)
# with `vitgraph-torch` at $VITGRAPH_TORCH_EXE (default .dev/bin/vitgraph-torch)
# and PyTorch 2.11 (cu13) in python3, whose libraries are libtorch.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-compare}"
ws="${WORK:-$root/.repro-work}/compare"
vitgraph="${VITGRAPH:-$root/.dev/bin/vitgraph-lean}"
export VITGRAPH_TORCH_EXE="${VITGRAPH_TORCH_EXE:-$root/.dev/bin/vitgraph-torch}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out" "$ws/pipelines"
cp pipelines/quickstart.ron "$ws/pipelines/"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv >"$out/host.txt" 2>&1
v() { "$vitgraph" -C "$ws" "$@"; }
echo "[$(date -u +%T)] build 1"
v build quickstart -p device=cuda -j 1 2>&1 | tail -n 3
v baseline save first
echo "[$(date -u +%T)] build 2 (--force: every node again)"
v build quickstart -p device=cuda -j 1 --force 2>&1 | tail -n 3
echo "[$(date -u +%T)] compare"
v -p device=cuda compare baseline:first HEAD --kernels | tee "$out/compare.txt"
v -p device=cuda compare baseline:first HEAD --kernels --json >"$out/compare.json"
v -p device=cuda compare baseline:first HEAD --csv >"$out/compare.csv"
v -p device=cuda report --compare baseline:first HEAD -o "$out/report.html" 2>&1 | tail -n 1
