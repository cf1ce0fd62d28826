# Sourced by the scripts: chooses cargo features. By default the
# libtorch-backed tasks (`Vit`, `OpBench`, CUPTI traces) are built: libtorch
# is set up from PyPI wheels once (about 0.5 GB, cached outside the
# repository, see scripts/setup-libtorch.sh) and the `torch` feature is
# enabled. VITGRAPH_TORCH=0 builds without them (pipelines still load; a
# `Vit` or `OpBench` node then fails saying how to enable them).
VITGRAPH_FEATURES=""
if [ "${VITGRAPH_TORCH:-1}" = "1" ]; then
    eval "$(scripts/setup-libtorch.sh)"
    VITGRAPH_FEATURES="--features torch"
fi
export VITGRAPH_FEATURES
# The tests (and the lints) build S3-compatible remotes too (the `s3`
# feature: the `object_store` crate and its HTTP and TLS stack); a user's
# `vitgraph` needs it only to push to or pull from a bucket.
VITGRAPH_TEST_FEATURES="--features s3"
[ -n "$VITGRAPH_FEATURES" ] && VITGRAPH_TEST_FEATURES="$VITGRAPH_FEATURES,s3"
export VITGRAPH_TEST_FEATURES

# Builds `vitgraph` without libtorch (it starts in milliseconds: linking
# libtorch costs every start about half a second) and, with libtorch,
# `vitgraph-torch` beside it, which runs the `Vit` and `OpBench` nodes.
# Arguments go to both cargo commands (e.g. `--release`).
build_vitgraph() {
    cargo build "$@"
    if [ -n "$VITGRAPH_FEATURES" ]; then
        cargo build $VITGRAPH_FEATURES --bin vitgraph-torch "$@"
    fi
}
# With CI=true or VITGRAPH_PYTORCH=1, Python PyTorch is installed for the tests
# of examples/vit_compile_bench.py (scripts/setup-pytorch.sh: PyPI's torch
# wheel and its dependencies, cached outside the repository); elsewhere those
# tests use the python3 on PATH and are skipped, saying why, where it has no
# torch.
if [ "${CI:-}" = "true" ] || [ "${VITGRAPH_PYTORCH:-0}" = "1" ]; then
    eval "$(scripts/setup-pytorch.sh)"
    export VITGRAPH_PYTHONPATH
fi
