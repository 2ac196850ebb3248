#!/usr/bin/env bash
# Runs the GPU check that `backends/carry-to-gpu.sh` built (this file is its `run.sh`), one
# step after another, each appending its output to LOG as it runs (nothing is held back in
# a pipe: a check cut short by its time limit leaves everything up to that point). A step
# that fails is logged and the next one runs; the last lines are one summary per step.
#
# The parts, in the order they run, each sized to fit one call of a lent machine (the
# figures are the open issues' GPU must-shows; the limits are each step's most, not its
# expected time, which is a fraction of it on an H100):
#
#   tests    every CUDA test binary: kernels, the shared suite, recorded steps with CUDA graphs
#            and without, attention launches, the memory pool (≈ 2 min)
#   figures  the GPT's default run plain, recorded (a CUDA graph), in bf16, in f16, with TF32,
#            its first step with an empty kernel cache and with a full one; the device bench's
#            copies, transposed add and Σ(x−y)² into existing tensors at 16M and 256M (≈ 3 min)
#   peers    PyTorch's GPT step on the same GPU: eager, CUDA graphs (`reduce-overhead`),
#            autocast bf16, each with its GPU busy time; the summed kernel time of our recorded
#            step by Nsight Compute (≈ 4 min, most of it `torch.compile`)
#   more     the digits MLP (example and step bench), the device bench's other rows, the
#            tuning variables one at a time, axes-dist's NCCL test
#
# usage: run.sh [LOG] [PART ...]   (default: ./gpu-check.log, every part)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
log="$(realpath -m "${1:-gpu-check.log}")"
shift || true
parts="${*:-tests figures peers more}"
mkdir -p "$(dirname "$log")"
cd "$here"

note() { echo "$*" >>"$log"; }
wants() { [[ " $parts " == *" $1 "* ]]; }

# CUDA's libraries: ours in lib/, then every Python's NVIDIA wheels, then the system's.
libs="$here/lib"
for python in python3 /usr/bin/python3; do
    found="$("$python" -c 'import nvidia, glob, os
for root in nvidia.__path__:
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))): print(lib)' 2>/dev/null)" || continue
    for lib in $found; do libs="$libs:$lib"; done
done
# cudarc opens `libnccl.so`; the wheel ships `libnccl.so.2`.
mkdir -p "$here/lib"
for dir in ${libs//:/ }; do
    if [ -e "$dir/libnccl.so.2" ] && [ ! -e "$here/lib/libnccl.so" ]; then
        ln -s "$dir/libnccl.so.2" "$here/lib/libnccl.so"
    fi
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AXES_BENCH_QUICK=1 PYTHONUNBUFFERED=1

note "== GPU check, $(date -u +%FT%TZ), $(uname -n), parts: $parts"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$log" 2>&1
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

summary=()
# step NAME SECONDS COMMAND...: runs COMMAND with its output appended to the log.
step() {
    local name="$1" limit="$2"
    shift 2
    note ""
    note "== $name: $*"
    local start=$SECONDS lines
    lines=$(wc -l <"$log")
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    local line="$name: rc $rc, $((SECONDS - start)) s"
    if [ $rc = 124 ] || [ $rc = 137 ]; then line="$line (past its ${limit} s limit)"; fi
    # A test that found no GPU (or no NVRTC) passes after printing SKIPPED: say so here.
    local skipped
    skipped=$(tail -n +"$((lines + 1))" "$log" | grep -c SKIPPED)
    if [ "$skipped" != 0 ]; then line="$line, $skipped SKIPPED"; fi
    note "-- $line"
    summary+=("$line")
}

# What the runs write (kernel caches, curves, models, profiles) stays beside this file, out
# of the log's folder, which may be copied back whole.
out="$here/outputs"
cache="$out/kernel-cache"
gpt=(./gpt --device cuda --data data --sample 0)

if wants tests; then
    # The tests' kernels kept on disk, so that a second binary (or a second call) loads
    # the cubins the first compiled.
    export AXES_KERNEL_CACHE="$out/test-kernel-cache"
    step cuda-kernels 120 ./cuda-kernels cuda --nocapture
    step cuda-tests 300 ./cuda-tests --nocapture
    step recorded-steps 180 ./recorded-steps --nocapture
    step recorded-steps-no-graphs 180 env AXES_CUDA_GRAPHS=off ./recorded-steps --nocapture
    step attention-launches 60 ./attention-launches --nocapture
    step cuda-memory 60 ./cuda-memory --nocapture
fi

if wants figures; then
    # The first step with an empty kernel cache (it compiles every kernel), then with the
    # cubins that run kept (it loads them); the default runs after it start warm.
    rm -rf "$cache"
    export AXES_KERNEL_CACHE="$cache"
    step gpt-cold 120 "${gpt[@]}" --steps 20 --out "$out/gpt-cold"
    step gpt-warm 120 "${gpt[@]}" --steps 20 --out "$out/gpt-warm"
    step gpt 180 "${gpt[@]}" --out "$out/gpt" --sample 200
    step gpt-recorded 180 "${gpt[@]}" --record --out "$out/gpt-recorded"
    step gpt-bf16 180 "${gpt[@]}" --record --precision bf16 --out "$out/gpt-bf16"
    step gpt-f16 180 "${gpt[@]}" --record --precision f16 --out "$out/gpt-f16"
    step gpt-tf32 180 "${gpt[@]}" --record --tf32 --out "$out/gpt-tf32"
    step cuda-bench-stream 240 ./cuda-bench --bench "copy|assign"
fi

if wants peers; then
    # PyTorch on the same GPU, the peer of each of our runs above (benches/gpt_torch.py).
    torch_bench=(python3 gpt_torch.py --bench --device cuda)
    step torch-reduce-overhead 240 "${torch_bench[@]}" --compile reduce-overhead
    step torch-autocast-bf16 120 "${torch_bench[@]}" --precision bf16
    step torch-eager 120 "${torch_bench[@]}"
    step torch-tf32 120 "${torch_bench[@]}" --precision tf32
    # Our recorded step's kernels, each timed by Nsight Compute: runs of 2 and 4 steps
    # differ by two replayed steps (the first step, the validation and the uploads alike).
    step kernel-time 300 python3 kernel_time.py --out "$out/kernel-time" -- \
        "${gpt[@]}" --record --eval-every 1000 --out "$out/ncu"
    step torch-reduce-overhead-bf16 240 "${torch_bench[@]}" --compile reduce-overhead --precision bf16
fi

if wants more; then
    rm -rf "$cache"
    step train-cold 120 ./train --device cuda --epochs 2 --data data --out "$out/train"
    step train 120 ./train --device cuda --data data --out "$out/train"
    step train-step-bench 180 env AXES_BENCH_DEVICE=cuda:0 ./train-step-bench --bench
    step cuda-bench 300 ./cuda-bench --bench
    # The kernels' tuning variables (axes_backends::tuning), one setting a run, on the
    # stream workloads into existing tensors: each run prints its ratios to the copy.
    for setting in AXES_TILE=16x16 AXES_TILE=32x32 AXES_TILE=64x4 AXES_REDUCE_UNROLL=1 \
        AXES_REDUCE_UNROLL=8 AXES_REDUCE_GROUPS=2112; do
        step "cuda-bench $setting" 90 env "$setting" ./cuda-bench --bench "copy|assign"
    done
    step nccl-kernels 60 ./cuda-kernels nccl --nocapture
    step nccl-dist 60 ./nccl-dist --nocapture
fi

note ""
note "== summary"
for line in "${summary[@]}"; do note "$line"; done
