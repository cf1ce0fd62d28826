#!/usr/bin/env bash
# The engine benchmark (`scripts/bench_engine.py`, vitgraph alone) with two
# builds of vitgraph in one run, on the lent host's quiet cores: used for
# "same speed" checks at 100,000 nodes, where this 2-core machine's own noise
# is larger than the differences asked about.
#
#   OUT=/tmp/ab N=33333 ORDER="before after" \
#     BEFORE=.dev/carry/vg-OLD AFTER=.dev/carry/vg-NEW scripts/gpu/bench_engine_ab.sh
#
# ORDER says which build runs first; run it twice, once in each order, so
# that a difference the order makes shows as such.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vitgraph-bench-engine-ab}"
n="${N:-33333}"
mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)"; free -g | head -2; python3 --version; uptime; } >"$out/host.txt" 2>&1
args=()
for label in ${ORDER:-before after}; do
    case "$label" in
        before) args+=(--vitgraph "before=${BEFORE:?BEFORE=path of the old build}") ;;
        after) args+=(--vitgraph "after=${AFTER:?AFTER=path of the new build}") ;;
        *) echo "ORDER: '$label' is neither before nor after" >&2; exit 2 ;;
    esac
done
tag=$(echo "${ORDER:-before after}" | tr ' ' '-')
python3 scripts/bench_engine.py --n "$n" --repeat "${REPEAT:-5}" --tools vitgraph "${args[@]}" 2>&1 | tee "$out/engine-$n-$tag.txt"
