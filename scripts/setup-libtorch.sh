#!/usr/bin/env bash
# Sets up libtorch 2.11.0 (the version tch 0.24 binds) from the PyPI wheels, on
# a machine with no CUDA toolkit and no GPU, and prints `LIBTORCH=<path>`.
#
# The wheels' shared libraries are enough to build and run vitgraph's `torch`
# feature: the torch headers and libc10 / libtorch_cpu / libtorch / libgomp,
# plus libcudart and libcupti in `nvidia/cu13/lib` beside `torch/` (the layout
# of a pip install, so the same LD_LIBRARY_PATH works on the GPU hosts).
# libtorch_cuda is left out: it is 1 GB, and the binary dlopens it at start-up
# on a GPU host, where PyTorch is installed. The CUDA runtime's headers and
# the `crt/` headers they include (`nvidia/cu13/include`, from the runtime and
# crt wheels) are kept for the CUDA-graph shim, which is compiled against
# libtorch's CUDA headers and loaded on a GPU host only.
#
# Cached outside the repository in $VITGRAPH_LIBTORCH_CACHE (default
# ~/.cache/vitgraph/libtorch-2.11.0); a second run reuses it. Idempotent: the
# cache is filled under a temporary name and renamed only when complete.
#
#   eval "$(scripts/setup-libtorch.sh)"   # exports LIBTORCH and LD_LIBRARY_PATH
#   cargo build --release --features torch
set -euo pipefail

version=2.11.0
cache="${VITGRAPH_LIBTORCH_CACHE:-$HOME/.cache/vitgraph/libtorch-$version}"
python="${PYTHON:-python3}"

print_env() {
    echo "export LIBTORCH=$cache/torch"
    echo "export LD_LIBRARY_PATH=$cache/torch/lib:$cache/nvidia/cu13/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
}

runtime="nvidia-cuda-runtime==13.0.96.*"
crt="nvidia-cuda-crt==13.0.88.*"
headers="nvidia/cu13/include/crt/host_config.h"

download() {
    "$python" -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.12 --implementation cp --abi cp312 \
        $(for n in 5 17 25 28; do echo "--platform manylinux_2_${n}_x86_64"; done) \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$wheels" "$@" >&2
}

if [[ -f "$cache/.complete" && -f "$cache/$headers" ]]; then
    print_env
    exit 0
fi

mkdir -p "$(dirname "$cache")"
if [[ -f "$cache/.complete" ]]; then
    # A cache from before the CUDA headers were kept: add them alone.
    staging="$(mktemp -d "$cache.headers.XXXXXX")"
    trap 'rm -rf "$staging"' EXIT
    wheels="$staging/wheels"
    echo "setup-libtorch: adding the CUDA runtime headers to $cache" >&2
    download "$runtime" "$crt"
    for wheel in "$wheels"/nvidia_cuda_runtime-*.whl "$wheels"/nvidia_cuda_crt-*.whl; do
        unzip -q -o "$wheel" -d "$staging" 'nvidia/cu13/include/*'
    done
    rm -rf "$cache/nvidia/cu13/include"
    mv "$staging/nvidia/cu13/include" "$cache/nvidia/cu13/include"
    print_env
    exit 0
fi

staging="$(mktemp -d "$cache.partial.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
wheels="$staging/wheels"

echo "setup-libtorch: downloading torch==$version (about 0.5 GB) into $staging" >&2
download "torch==$version"
torch_wheel="$(ls "$wheels"/torch-"$version"-*.whl)"

# torch 2.11.0 requires cuda-toolkit==13.0.2, whose `cudart`, `cupti` and `nvtx`
# extras pin these (read off its metadata).
echo "setup-libtorch: downloading the CUDA 13.0 runtime, CUPTI, NVTX and crt (headers) wheels" >&2
download "$runtime" "$crt" "nvidia-cuda-cupti==13.0.85.*" "nvidia-nvtx==13.0.85.*"

echo "setup-libtorch: unpacking" >&2
unzip -q -o "$torch_wheel" -d "$staging" 'torch/include/*' 'torch/lib/libc10.so' \
    'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch.so' 'torch/lib/libgomp*' 'torch/version.py'
for wheel in "$wheels"/nvidia_cuda_runtime-*.whl "$wheels"/nvidia_cuda_cupti-*.whl "$wheels"/nvidia_nvtx-*.whl; do
    unzip -q -o "$wheel" -d "$staging" 'nvidia/cu13/lib/*'
done
for wheel in "$wheels"/nvidia_cuda_runtime-*.whl "$wheels"/nvidia_cuda_crt-*.whl; do
    unzip -q -o "$wheel" -d "$staging" 'nvidia/cu13/include/*'
done
# torch-sys checks this file against the version it binds.
echo "$version" >"$staging/torch/build-version"
rm -rf "$wheels"

touch "$staging/.complete"
rm -rf "$cache"
mv "$staging" "$cache"
trap - EXIT
echo "setup-libtorch: done, $(du -sh "$cache" | cut -f1) in $cache" >&2
print_env
