#!/usr/bin/env bash
# The host-load verdict on a GPU host: unpinned GPU runs of a small ViT,
# quiet and beside a busy loop on every core (scripts/bench_host_load.py
# --device cuda). Needs a release vitgraph built with `--features torch`
# at $VITGRAPH_BIN_DIR (default .dev/bin) and PyTorch 2.11 (cu13) in python3.
#
#   scripts/gpu/host_load_gpu.sh [--runs 20]
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="${VITGRAPH_BIN_DIR:-$(pwd)/.dev/bin}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 scripts/bench_host_load.py --device cuda --vitgraph "$bin/vitgraph" "$@"
