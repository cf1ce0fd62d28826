#!/usr/bin/env bash
# Screenshots of the study page for the book: the quickstart built on the
# CPU, a comparison of two of its builds (`--compare`), a small RQ1 on the
# CPU, and the whole workspace's pipelines unbuilt (every stage in the
# graph), each written by the given binaries.
#
#   scripts/page_screenshots.sh LEAN_VITGRAPH TORCH_VITGRAPH OUT_PREFIX
#
# writes OUT_PREFIX-quickstart.png, OUT_PREFIX-compare.png, OUT_PREFIX-rq1.png,
# OUT_PREFIX-workspace.png
# (headless Chromium, 1400 px wide). Run it with the binaries before and
# after a change of the page to compare the two; PIPELINES_REV=REV takes the
# pipeline files as they were at REV (for binaries that predate a field).
set -euo pipefail
cd "$(dirname "$0")/.."
lean="$(readlink -f "$1")"
export VITGRAPH_TORCH_EXE="$(readlink -f "$2")"
prefix="$(readlink -f "$(dirname "$3")")/$(basename "$3")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
shot() { # page, png, height
    chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size=1400,"$3" --screenshot="$2" "file://$1" >/dev/null 2>&1
}
rev="${PIPELINES_REV:-}"
pipeline() { # file under pipelines/, destination
    if [ -n "$rev" ]; then git show "$rev:pipelines/$1" >"$2"; else cp "pipelines/$1" "$2"; fi
}
mk() { mkdir -p "$work/$1/pipelines"; pipeline "$2" "$work/$1/pipelines/$2"; }

mk quickstart quickstart.ron
(cd "$work/quickstart" && "$lean" build quickstart -p device=cpu >/dev/null 2>&1 && "$lean" report quickstart -p device=cpu >/dev/null 2>&1)
shot "$work/quickstart/out/report.html" "$prefix-quickstart.png" 3000
# A comparison: the timed runs saved as a baseline, measured again in
# place, and the page with `--compare baseline:before HEAD`; its
# Comparison section alone.
(cd "$work/quickstart" && "$lean" baseline save before -p device=cpu >/dev/null 2>&1 &&
    "$lean" build quickstart_runs --force -p device=cpu >/dev/null 2>&1 &&
    "$lean" report -p device=cpu --compare baseline:before HEAD -o "$work/compare.html" >/dev/null 2>&1)
python3 scripts/page_section_shot.py "$work/compare.html" '#comparison' "$prefix-compare.png" >/dev/null

mk rq1 rq1.ron
(cd "$work/rq1" && "$lean" build rq1_report -p device=cpu -p samples=20 -p warmup=2 -p image_size=64 \
    -p repeat=2 -p max_repeat=2 -p 'patch=[16,32]' -p 'depth=[1,2,4]' -p 'dim=[64,128,256]' -p 'batch=[4]' >/dev/null 2>&1 &&
    "$lean" report rq1_report -p device=cpu -p samples=20 -p warmup=2 -p image_size=64 \
    -p repeat=2 -p max_repeat=2 -p 'patch=[16,32]' -p 'depth=[1,2,4]' -p 'dim=[64,128,256]' -p 'batch=[4]' >/dev/null 2>&1)
shot "$work/rq1/out/report.html" "$prefix-rq1.png" 3000

mkdir -p "$work/workspace/pipelines"
for f in pipelines/*.ron; do pipeline "$(basename "$f")" "$work/workspace/$f"; done
(cd "$work/workspace" && "$lean" report >/dev/null 2>&1 || true)
shot "$work/workspace/out/report.html" "$prefix-workspace.png" 2200
ls -la "$prefix"-*.png
