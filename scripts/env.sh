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
