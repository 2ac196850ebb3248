#!/usr/bin/env bash
# Runs the GPU check that `backends/carry-to-gpu.sh` built (this file is its `run.sh`), one
# step after another, each appending its output to LOG as it runs (nothing is held back in
# a pipe: a check cut short by its time limit leaves everything up to that point). A step
# that fails is logged and the next one runs; the last lines are one summary per step.
#
# usage: run.sh [LOG] [all|tests]   (default: ./gpu-check.log, all)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
log="$(realpath -m "${1:-gpu-check.log}")"
what="${2:-all}"
mkdir -p "$(dirname "$log")"
cd "$here"

note() { echo "$*" >>"$log"; }

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
export AXES_BENCH_QUICK=1

note "== GPU check, $(date -u +%FT%TZ), $(uname -n)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$log" 2>&1
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

summary=()
# step NAME SECONDS COMMAND...: runs COMMAND with its output appended to the log.
step() {
    local name="$1" limit="$2"
    shift 2
    note ""
    note "== $name: $*"
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    local line="$name: rc $rc, $((SECONDS - start)) s"
    if [ $rc = 124 ] || [ $rc = 137 ]; then line="$line (past its ${limit} s limit)"; fi
    note "-- $line"
    summary+=("$line")
}

step cuda-kernels 120 ./cuda-kernels cuda nccl --nocapture
step cuda-tests 300 ./cuda-tests --nocapture
step cuda-memory 60 ./cuda-memory --nocapture
step attention-launches 60 ./attention-launches --nocapture
step recorded-steps 240 ./recorded-steps --nocapture
step recorded-steps-no-graphs 240 env AXES_CUDA_GRAPHS=off ./recorded-steps --nocapture
step nccl-dist 60 ./nccl-dist --nocapture
if [ "$what" = all ]; then
    # Each example first with an empty kernel cache (its first step compiles), then with
    # the cubins that run kept (its first step loads them).
    out="$(dirname "$log")/gpu-outputs"
    cache="$out/kernel-cache"
    rm -rf "$cache"
    export AXES_KERNEL_CACHE="$cache"
    step train-cold 120 ./train --device cuda --epochs 2 --data data --out "$out/train"
    step train 120 ./train --device cuda --data data --out "$out/train"
    rm -rf "$cache"
    step gpt-cold 120 ./gpt --device cuda --steps 20 --data data --out "$out/gpt"
    step gpt 300 ./gpt --device cuda --data data --out "$out/gpt"
    step train-step-bench 180 env AXES_BENCH_DEVICE=cuda:0 ./train-step-bench --bench
    step cuda-bench 300 ./cuda-bench --bench
    # The kernels' tuning variables (axes_backends::tuning), one setting a run, on the
    # stream workloads into existing tensors: each run prints its ratios to the copy.
    for setting in AXES_TILE=16x16 AXES_TILE=32x32 AXES_TILE=64x4 AXES_REDUCE_UNROLL=1 \
        AXES_REDUCE_UNROLL=8 AXES_REDUCE_GROUPS=2112; do
        step "cuda-bench $setting" 90 env "$setting" ./cuda-bench --bench "copy|assign"
    done
fi

note ""
note "== summary"
for line in "${summary[@]}"; do note "$line"; done
