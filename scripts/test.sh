#!/usr/bin/env bash
# Runs vitgraph's whole test suite, installing what it needs first.
# Usage: scripts/test.sh            (from anywhere inside the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# The end-to-end study tests run the torch-free `vitgraph` users run, with
# `vitgraph-torch` running its libtorch nodes: keep a copy of it, since
# `cargo test --features torch` links `vitgraph` itself with libtorch.
if [ -n "$VITGRAPH_FEATURES" ]; then
    build_vitgraph
    bin="${CARGO_TARGET_DIR:-target}/debug"
    # A hard link: cargo replaces `vitgraph` rather than writing into it.
    ln -f "$bin/vitgraph" "$bin/vitgraph-lean" 2>/dev/null || cp -f "$bin/vitgraph" "$bin/vitgraph-lean"
    VITGRAPH_LEAN_EXE="$(cd "$bin" && pwd)/vitgraph-lean"
    export VITGRAPH_LEAN_EXE
fi
# The Python package (python/: the measurement helper and the study's data),
# standard library only; its data tests drive the `vitgraph` built here.
bin="${CARGO_TARGET_DIR:-target}/debug"
if [ -n "$VITGRAPH_FEATURES" ]; then
    VITGRAPH="$VITGRAPH_LEAN_EXE"
else
    cargo build --bin vitgraph
    VITGRAPH="$(cd "$bin" && pwd)/vitgraph"
fi
VITGRAPH="$VITGRAPH" python3 -m unittest discover -s python/tests
# Again with pandas, polars and pyarrow (the DataFrame backends and the
# Parquet reader), installed once beside the build into their own folder,
# with what `Notebook` nodes run on (a Jupyter kernel: nbclient, ipykernel,
# nbconvert; matplotlib for the study's notebook) and Hydra (the multirun
# the Hydra tests bring in is made by Hydra itself).
pydeps="${CARGO_TARGET_DIR:-target}/pydeps"
wanted="pandas polars pyarrow nbclient ipykernel nbconvert matplotlib hydra-core"
modules="pandas, polars, pyarrow, nbclient, ipykernel, nbconvert, matplotlib, hydra"
if ! PYTHONPATH="$pydeps" python3 -c "import $modules" 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$pydeps" \
        $wanted 2>&1 | grep -v -i "warning\|dependency conflicts\|requires\|incompatible" || true
    PYTHONPATH="$pydeps" python3 -c "import $modules" \
        || { echo "scripts/test.sh: $wanted could not be installed into $pydeps (pip install --target)" >&2; exit 1; }
fi
PYTHONPATH="$pydeps" VITGRAPH_REQUIRE_DATAFRAMES=1 VITGRAPH="$VITGRAPH" \
    python3 -m unittest discover -s python/tests
# And pandas without pyarrow (the CSV path of a pandas user): pyarrow and
# polars hidden behind packages that fail to import, as absent ones do.
shadow="${CARGO_TARGET_DIR:-target}/pyshadow"
for m in pyarrow polars; do
    mkdir -p "$shadow/$m"
    echo "raise ImportError('No module named $m (hidden by scripts/test.sh)')" > "$shadow/$m/__init__.py"
done
PYTHONPATH="$shadow:$pydeps" VITGRAPH_REQUIRE_DATAFRAMES=pandas VITGRAPH="$VITGRAPH" \
    python3 -m unittest discover -s python/tests
# The `Notebook` tests run a real kernel from there, and the Hydra tests a
# real multirun; both must run (not skip).
VITGRAPH_PYDEPS="$(cd "$pydeps" && pwd)"
export VITGRAPH_PYDEPS VITGRAPH_REQUIRE_JUPYTER=1 VITGRAPH_REQUIRE_HYDRA=1
# The S3 remote's tests run against a real S3-compatible server (moto's,
# over HTTP on 127.0.0.1), started here and stopped when the tests end.
s3_server=$(scripts/s3-server.sh start)
eval "$s3_server"
trap 'scripts/s3-server.sh stop' EXIT
export VITGRAPH_REQUIRE_S3=1
cargo test $VITGRAPH_TEST_FEATURES --no-fail-fast "$@"
