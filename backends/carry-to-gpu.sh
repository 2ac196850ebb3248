#!/usr/bin/env bash
# Builds everything a GPU check runs (release, stripped) into one folder to carry to a GPU
# machine that has the CUDA driver but no Rust toolchain and no network, with a `run.sh`
# (backends/gpu-run.sh) that runs it all in parts and appends each step's output to one log
# as it goes:
#
#   cuda-kernels       the generated kernels against the reference (axes-backends' unit tests)
#   cuda-tests         the shared suite, training and attention on the GPU (backends/tests/cuda.rs)
#   cuda-memory        the driver's memory pool (backends/tests/cuda_memory.rs)
#   recorded-steps     recorded steps replayed as CUDA graphs against plain ones (recorded_steps.rs)
#   attention-launches launches and bytes of one fused attention call (attention_launches.rs)
#   nccl-dist          axes-dist's NCCL collectives, one process (needs libmpi.so.40)
#   train, gpt         the examples, on `--device cuda` (their data in `data/`)
#   train-step-bench   the MLP step bench on the GPU (benches/train_step.rs)
#   cuda-bench         bandwidth against a device copy, dot against cuBLAS
#   gpt_torch.py       the GPT's PyTorch twin (benches/gpt_torch.py), the step's peer
#   kernel_time.py     a step's kernels summed by Nsight Compute (backends/gpu-kernel-time.py)
#
# There (e.g. through the workplace's `run`, which carries ignored paths: `--pack` also writes
# the folder as one `.tar.xz`, under that tool's size limit), the parts in one or two calls:
#
#   tar xJf target/gpu-carry.tar.xz -C target
#   target/gpu-carry/run.sh "$OUT/gpu-check.log" tests figures   # first call, ≈ 5 min
#   target/gpu-carry/run.sh "$OUT/gpu-check.log" peers           # second call at once, ≈ 5 min
#   target/gpu-carry/run.sh "$OUT/gpu-check.log" more            # the rest, where time is left
#
# (each call unpacks the archive again where the machine was not kept warm between them)
#
# NVRTC (libnvrtc.so.13, 105 MB), cuBLAS and NCCL are found on that machine: in `lib/` here
# (`--with-nvrtc` copies NVRTC from the `nvidia-cuda-nvrtc` wheel that `.ci/run` installs, or
# from AXES_CUDA_LIB), else in a Python's `site-packages/nvidia/*/lib`, else on the system's
# library path. Without cuBLAS, contractions use the generated tiled kernel.
#
# usage: backends/carry-to-gpu.sh [--with-nvrtc] [--pack] [OUT_DIR]   (default: target/gpu-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
with_nvrtc=0 pack=0
while [ $# -gt 0 ]; do
    case "$1" in
        --with-nvrtc) with_nvrtc=1 ;;
        --pack) pack=1 ;;
        *) break ;;
    esac
    shift
done
out="${1:-target/gpu-carry}"
rm -rf "$out"
mkdir -p "$out/lib" "$out/data"

# Runs a cargo command; the executables it names (its output shown only where it fails).
built() {
    local log
    log="$("$@" 2>&1)" || { echo "$log" >&2; exit 1; }
    echo "$log" | sed -n 's/^ *Executable .* (\(.*\))$/\1/p'
}
# The executable of target `$1` among those on stdin.
pick() { grep -E "/$1-[0-9a-f]+$" | tail -1; }

features="axes-backends/cuda,axes-backends/nccl"
tests="$(built cargo test --release -p axes-backends --features "$features" --no-run \
    --lib --test cuda --test cuda_memory --test attention_launches --test recorded_steps)"
cp "$(echo "$tests" | pick axes_backends)" "$out/cuda-kernels"
cp "$(echo "$tests" | pick cuda)" "$out/cuda-tests"
cp "$(echo "$tests" | pick cuda_memory)" "$out/cuda-memory"
cp "$(echo "$tests" | pick attention_launches)" "$out/attention-launches"
cp "$(echo "$tests" | pick recorded_steps)" "$out/recorded-steps"

benches="$(built cargo test --release -p axes-backends --features "$features" --no-run \
    --bench cuda)"
cp "$(echo "$benches" | pick cuda)" "$out/cuda-bench"
root="$(built cargo test --release --no-run --bench train_step)"
cp "$(echo "$root" | pick train_step)" "$out/train-step-bench"
cargo build --release --example train --example gpt
cp target/release/examples/train target/release/examples/gpt "$out/"

dist="$(cd axes-dist && built cargo test --release --target-dir ../target --features nccl \
    --no-run --test nccl)"
# Cargo names it relative to axes-dist/.
cp "axes-dist/$(echo "$dist" | pick nccl)" "$out/nccl-dist"

for binary in cuda-kernels cuda-tests cuda-memory attention-launches recorded-steps cuda-bench \
    train-step-bench train gpt nccl-dist; do
    strip "$out/$binary"
done
cp -r data/digits data/kjv "$out/data/"
cp backends/gpu-run.sh "$out/run.sh"
cp benches/gpt_torch.py "$out/gpt_torch.py"
cp backends/gpu-kernel-time.py "$out/kernel_time.py"

if [ "$with_nvrtc" = 1 ]; then
    lib="${AXES_CUDA_LIB:-}"
    if [ -z "$lib" ] && [ -x .ci/venv/bin/python ]; then
        lib="$(.ci/venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')"
    fi
    if [ -n "$lib" ] && [ -e "$lib/libnvrtc.so.13" ]; then
        cp "$lib"/libnvrtc.so.13 "$lib"/libnvrtc-builtins.so.13.* "$out/lib/"
    else
        echo "NVRTC not found (run .ci/run once, or set AXES_CUDA_LIB)" >&2
        exit 1
    fi
fi
du -sh "$out"
ls -la "$out"
if [ "$pack" = 1 ]; then
    tar cJf "$out.tar.xz" -C "$(dirname "$out")" "$(basename "$out")"
    ls -la "$out.tar.xz"
fi
