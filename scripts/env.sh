# Sourced by the scripts: chooses cargo features and, for the `torch`
# feature, sets libtorch up (downloaded once, cached outside the repository).
VITGRAPH_FEATURES=""
if [ -x scripts/setup-libtorch.sh ] && grep -q '^torch *=' Cargo.toml; then
    LIBTORCH="$(scripts/setup-libtorch.sh)"
    export LIBTORCH
    export LD_LIBRARY_PATH="$LIBTORCH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    VITGRAPH_FEATURES="--features torch"
fi
export VITGRAPH_FEATURES
