# Sourced by the GPU verification scripts: PyTorch's libraries on the
# library path (for `run_task`, which links libtorch), and how one run is made.
# The sourcing script sets `here` (its folder). Sets `bin` (the run_task
# executable: $RUN_TASK, or run_task beside the scripts), `out` ($OUT) and
# `runs` (under it; each run gets a folder with its results.json and log.txt).
bin="${RUN_TASK:-$here/run_task}"
out="${OUT:-/tmp/vitgraph-gpu}"
runs="$out/runs"
mkdir -p "$runs"
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LD_LIBRARY_PATH="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1

# task NAME KIND SPEC [NEEDS…]: one `run_task` run, its log beside its results.
task() {
    local name="$1" kind="$2" spec="$3"
    shift 3
    mkdir -p "$runs/$name"
    if ! timeout 180 "$bin" "$kind" "$spec" "$runs/$name" "$@" >"$runs/$name/log.txt" 2>&1; then
        echo "FAILED $name:"; tail -n 5 "$runs/$name/log.txt"
    fi
}

# run_py NAME SCRIPT ARGS…: one Python reference run, writing NAME/results.json.
run_py() {
    local name="$1" script="$2"
    shift 2
    mkdir -p "$runs/$name"
    if ! timeout 240 python3 "$script" "$@" --out "$runs/$name/results.json" >"$runs/$name/log.txt" 2>&1; then
        echo "FAILED $name:"; tail -n 5 "$runs/$name/log.txt"
    fi
}

# iters BATCH: measured batches per `Vit` run in the CUDA-graph scripts, as
# many forward passes as graph_ref.py times.
iters() { case "$1" in 1) echo 300 ;; 8) echo 300 ;; *) echo 50 ;; esac; }
