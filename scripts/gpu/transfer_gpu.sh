#!/usr/bin/env bash
# Results that travel, measured end to end: the quickstart study built on
# this GPU host as a user builds it (scripts/quickstart.sh adds its GPU
# settings: `-p device=cuda -p dtype=bf16 -p preprocess=Gpu -p samples=400
# -p ci_rel=0.02 -p max_repeat=10`), then exported into one bundle, signed
# with a key made here. Bring the bundle back and import it on a machine
# without the GPU: `vitgraph import quickstart-gpu.vgb` and `vitgraph build
# quickstart` with the same `-p` there build the reports and measure
# nothing (the book's "Results that travel").
#
# Needs a release vitgraph built with `--features torch` at
# $VITGRAPH_BIN_DIR (default .dev/bin) and PyTorch 2.11 (cu13) in python3.
# Writes into $OUT: quickstart-gpu.vgb, gpu-host.vitgraph-pub (the
# public key), build.txt, status.json, host.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
out="${OUT:-/tmp/vitgraph-transfer-gpu}"
bin="${VITGRAPH_BIN_DIR:-$root/.dev/bin}"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; hostname; } | tee "$out/host.txt"
ws=/tmp/transfer-gpu
rm -rf "$ws" && mkdir -p "$ws/scripts" && cp -r pipelines "$ws/" && cp scripts/quickstart.sh "$ws/scripts/"
start=$(date +%s.%N)
(cd "$ws" && VITGRAPH_BIN_DIR="$bin" bash scripts/quickstart.sh) >"$out/build.txt" 2>&1
echo "quickstart: exit $? after $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s" | tee -a "$out/build.txt"
grep -E "built, |fresh, " "$out/build.txt"
"$bin/vitgraph" -C "$ws" status quickstart -p device=cuda --json >"$out/status.json"
(cd /tmp && rm -f gpu-host.vitgraph-key && "$bin/vitgraph" key generate gpu-host | tee "$out/key.txt")
start=$(date +%s.%N)
"$bin/vitgraph" -C "$ws" export quickstart -p device=cuda -o "$out/quickstart-gpu.vgb" --sign /tmp/gpu-host.vitgraph-key
echo "export: $(python3 -c "import time; print(f'{time.time() - $start:.2f}')") s"
ls -l "$out"
