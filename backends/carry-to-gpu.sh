#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here (release, stripped) into one folder to
# carry to a GPU machine that has the CUDA driver but no Rust toolchain and no network,
# with NVRTC (libnvrtc.so.13 and its builtins, from the `nvidia-cuda-nvrtc` wheel that
# `.ci/run` installs into `.ci/venv`, or from AXES_CUDA_LIB) in `lib/`. There:
#
#   cd gpu-carry && export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
#   ./cuda-tests --nocapture          # the library on the GPU; none prints SKIPPED there
#   ./cuda-kernels --nocapture cuda   # the generated kernels against the reference
#   ./cuda-bench --bench              # bandwidth vs a device copy; dot vs cuBLAS
#
# cuBLAS (libcublas.so.13, libcublasLt.so.13) comes from the machine's CUDA toolkit or the
# `nvidia-cublas` wheel's lib folder added to LD_LIBRARY_PATH; without it contractions use
# the generated tiled kernel and the bench skips the cuBLAS comparison.
#
# usage: backends/carry-to-gpu.sh [OUT_DIR]   (default: target/gpu-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/gpu-carry}"
mkdir -p "$out/lib"
executable() { sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -1; }
tests="$(cargo test -p axes-backends --features cuda --release --test cuda --no-run 2>&1 | executable)"
kernels="$(cargo test -p axes-backends --features cuda --release --lib --no-run 2>&1 | executable)"
bench="$(cargo bench -p axes-backends --features cuda --bench cuda --no-run 2>&1 | executable)"
cp "$tests" "$out/cuda-tests"
cp "$kernels" "$out/cuda-kernels"
cp "$bench" "$out/cuda-bench"
strip "$out/cuda-tests" "$out/cuda-kernels" "$out/cuda-bench"
lib="${AXES_CUDA_LIB:-}"
if [ -z "$lib" ] && [ -x .ci/venv/bin/python ]; then
    lib="$(.ci/venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')"
fi
if [ -n "$lib" ] && [ -e "$lib/libnvrtc.so.13" ]; then
    cp "$lib"/libnvrtc.so.13 "$lib"/libnvrtc-builtins.so.13.* "$out/lib/"
else
    echo "NVRTC not found (run .ci/run once, or set AXES_CUDA_LIB): bring libnvrtc.so.13" >&2
fi
ls -la "$out" "$out/lib"
