#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here (release, stripped) into one folder to
# carry to a GPU machine that has the CUDA driver, NVRTC and cuBLAS but no Rust toolchain
# and no network. There, run `./cuda-tests --nocapture` and `./cuda-bench --bench`.
#
# usage: backends/carry-to-gpu.sh [OUT_DIR]   (default: target/gpu-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/gpu-carry}"
mkdir -p "$out"
executable() { sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -1; }
tests="$(cargo test -p axes-backends --features cuda --release --test cuda --no-run 2>&1 | executable)"
bench="$(cargo bench -p axes-backends --features cuda --bench cuda --no-run 2>&1 | executable)"
cp "$tests" "$out/cuda-tests"
cp "$bench" "$out/cuda-bench"
strip "$out/cuda-tests" "$out/cuda-bench"
ls -la "$out"
