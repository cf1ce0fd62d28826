#!/usr/bin/env bash
# Installs Python PyTorch 2.11.0 (the version of the GPU hosts) for the tests
# of examples/vit_compile_bench.py, and prints `VITGRAPH_PYTHONPATH=<path>`.
#
# PyPI is the only registry CI reaches, and PyPI's Linux x86-64 torch wheel is
# the CUDA build: `import torch` needs its nvidia-* dependencies even on a
# machine without a GPU (libtorch_python links libtorch_cuda, which links
# cuBLAS, cuDNN, NCCL…). So this is a plain `pip install --target` of torch
# and its dependencies, about 5 GB, into a folder outside the repository;
# nothing is installed into the interpreter itself. The libtorch cache of
# setup-libtorch.sh cannot stand in: it holds the C++ libraries and headers
# only, for cp312, without torch's Python modules.
#
# Cached in $VITGRAPH_PYTORCH_CACHE (default
# ~/.cache/vitgraph/pytorch-2.11.0-<python tag>); a second run reuses it.
# Idempotent: the folder is filled under a temporary name and renamed only
# when torch imports from it.
#
#   eval "$(scripts/setup-pytorch.sh)"     # exports VITGRAPH_PYTHONPATH
#   cargo test --test vit_compile_bench
set -euo pipefail

version=2.11.0
python="${VITGRAPH_PYTHON:-python3}"
tag="$("$python" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
cache="${VITGRAPH_PYTORCH_CACHE:-$HOME/.cache/vitgraph/pytorch-$version-$tag}"

print_env() {
    echo "export VITGRAPH_PYTHONPATH=$cache/site"
}

if [[ -f "$cache/.complete" ]]; then
    print_env
    exit 0
fi

mkdir -p "$(dirname "$cache")"
staging="$(mktemp -d "$cache.partial.XXXXXX")"
trap 'rm -rf "$staging"' EXIT

echo "setup-pytorch: installing torch==$version for $python ($tag, about 5 GB) into $staging" >&2
"$python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    --target "$staging/site" "torch==$version" >&2
PYTHONPATH="$staging/site" "$python" -c "import torch; assert torch.__version__.startswith('$version'), torch.__version__" >&2

touch "$staging/.complete"
rm -rf "$cache"
mv "$staging" "$cache"
trap - EXIT
echo "setup-pytorch: done, $(du -sh "$cache" | cut -f1) in $cache" >&2
print_env
