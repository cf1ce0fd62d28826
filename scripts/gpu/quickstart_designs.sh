#!/usr/bin/env bash
# The quickstart on a GPU under several designs, each built twice from empty
# workspaces by scripts/gpu/quickstart_gpu.sh (scripts/quickstart.sh, as a
# user runs it), all in one call so their figures compare: the dtype, where
# the images are preprocessed (the CPU or the GPU) and how many images each
# member measures, with a ±2 % precision target on the paired ratios.
#
#   [VITGRAPH_OLD_BIN_DIR=.dev/old] [DESIGNS="gpu400 bf16-gpu400"] scripts/gpu/quickstart_designs.sh
#
# Writes designs.tar.gz (every build's log, report and page) and
# summary.txt into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vitgraph-quickstart-designs}"
work=/tmp/quickstart-designs
rm -rf "$work" && mkdir -p "$work" "$out"
bin="${VITGRAPH_BIN_DIR:-$(pwd)/.dev/bin}"
old="${VITGRAPH_OLD_BIN_DIR:-}"
# run NAME BIN_DIR ARGS…: one design, built twice with the binaries in BIN_DIR.
run() {
    local name="$1" dir="$2"
    shift 2
    echo "== $name: $*" | tee -a "$work/summary.txt"
    OUT="$work/$name" VITGRAPH_BIN_DIR="$dir" bash scripts/gpu/quickstart_gpu.sh "$@" 2>&1 | tee -a "$work/summary.txt"
}
# Every design sets what scripts/quickstart.sh sets on a GPU, so each is
# what its name says whatever that script's defaults.
common=(-p ci_rel=0.02 -p max_repeat=10 -p max_seconds=170)
f32cpu=(-p dtype=f32 -p preprocess=Cpu)
f32gpu=(-p dtype=f32 -p preprocess=Gpu)
bf16gpu=(-p dtype=bf16 -p preprocess=Gpu)
# With VITGRAPH_OLD_BIN_DIR, the designs first with those binaries (before).
if [ -n "$old" ]; then
    run before-cpu48 "$old" "${common[@]}" "${f32cpu[@]}" -p samples=48
    run before-gpu48 "$old" "${common[@]}" "${f32gpu[@]}" -p samples=48
fi
# DESIGNS picks among these (all by default); `quickstart` is the study
# exactly as scripts/quickstart.sh builds it on a GPU.
for design in ${DESIGNS:-cpu48 gpu48 gpu400 bf16-gpu200 bf16-gpu400}; do
    case "$design" in
        cpu48) run "$design" "$bin" "${common[@]}" "${f32cpu[@]}" -p samples=48 ;;
        gpu48) run "$design" "$bin" "${common[@]}" "${f32gpu[@]}" -p samples=48 ;;
        gpu400) run "$design" "$bin" "${common[@]}" "${f32gpu[@]}" -p samples=400 ;;
        bf16-gpu200) run "$design" "$bin" "${common[@]}" "${bf16gpu[@]}" -p samples=200 ;;
        bf16-gpu400) run "$design" "$bin" "${common[@]}" "${bf16gpu[@]}" -p samples=400 ;;
        quickstart) run "$design" "$bin" ;;
        *) echo "unknown design $design" >&2; exit 2 ;;
    esac
done
cp "$work/summary.txt" "$out/"
tar -czf "$out/designs.tar.gz" -C "$work" .
