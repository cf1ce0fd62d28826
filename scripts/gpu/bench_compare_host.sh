#!/usr/bin/env bash
# `scripts/bench_compare.py` on the lent GPU host for its 16 cores (the
# comparison runs on the CPU): 1,000 configurations against the pandas peer
# when pandas is there, and 100,000 configurations, each followed by one
# run with VITGRAPH_TIMINGS=1 for where the time goes.
#
#   OUT=/tmp/bc scripts/gpu/bench_compare_host.sh
#
# Needs the lean release `vitgraph` at $VITGRAPH (default .dev/bin/vitgraph-lean).
# SKIP_KERNELS=1 leaves `compare --kernels` out at 100,000 configurations
# (four runs of about a minute each on that host).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vitgraph-bench-compare}"
vitgraph="${VITGRAPH:-$(pwd)/.dev/bin/vitgraph-lean}"
mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)"; free -g | head -2; python3 --version; } >"$out/host.txt" 2>&1
peer=""
python3 -c 'import pandas, numpy' 2>/dev/null && peer="--pandas"
for n in 1000 100000; do
    repeat=5
    [ "$n" -gt 10000 ] && repeat=3
    echo "[$(date -u +%T)] n=$n"
    python3 scripts/bench_compare.py --n "$n" --repeat "$repeat" --vitgraph "$vitgraph" \
        $([ "$n" = 1000 ] && echo "$peer") $([ "$n" != 1000 ] && echo "${SKIP_KERNELS:+--skip-kernels}") --keep 2>&1 | tee "$out/bench-$n.txt" | tail -n 20
    ws=$(grep -m1 "^workspace:" "$out/bench-$n.txt" | sed 's/.* s: //')
    if [ -n "$ws" ] && [ -d "$ws" ]; then
        VITGRAPH_TIMINGS=1 "$vitgraph" -C "$ws" compare build:-2 build:-1 >/dev/null 2>"$out/timings-$n.txt"
        cat "$out/timings-$n.txt"
        rm -rf "$ws"
    fi
done
