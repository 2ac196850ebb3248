"""numpy and PyTorch peers of the CPU-speed table (`benches/fused.rs`, `benches/contract.rs`).

Times, on `--threads` threads, the element-wise, reduction and matrix-product workloads that
the Rust benches time for `axes`, and prints one JSON line per workload and framework with the
median microseconds per call (`median_us`) over `--runs` runs (each the mean of enough calls
to last about 20 ms). numpy's element-wise ops use one thread whatever `--threads` says; its
matrix products use its BLAS (OpenBLAS in the wheels), whose thread count is set here before
numpy loads. Where OPENBLAS_CORETYPE is set on this machine (see the workplace notes), run
this script with it unset to time a current numpy's best kernel:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benches/peers.py --threads 1
    python3 benches/peers.py --threads 2 --only matmul

Workloads (the issue's table): `axpby` z = a x + b y into an existing z (4096 and 16M f32);
`l2` sum((x - y)^2) (1,024 and 262,144); `transposed add` z = x + y^T (4096^2); `outer sum`
x summed over its outer axis (4096^2); `tanh exp` z = tanh(x) y + exp(-x) (16M); `matmul`
n^3 for n = 64 ... 2048.
"""

import argparse
import json
import os
import statistics
import time


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", choices=["elementwise", "matmul"], default=None)
    parser.add_argument("--no-torch", action="store_true")
    return parser.parse_args()


ARGS = parse()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread counts are set)

try:
    if ARGS.no_torch:
        raise ImportError
    import torch

    torch.set_num_threads(ARGS.threads)
except ImportError:
    torch = None


def median_us(call, runs):
    """Median over `runs` of the mean time of one call, in microseconds."""
    call()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < 0.02:
        call()
        calls += 1
    results = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        results.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(results)


def report(workload, size, framework, us):
    print(json.dumps({
        "workload": workload,
        "size": size,
        "framework": framework,
        "threads": ARGS.threads,
        "median_us": round(us, 3),
    }), flush=True)


def elementwise():
    rng = np.random.default_rng(1)
    f32 = np.float32

    def arrays(*shape, count):
        return [rng.standard_normal(shape, dtype=f32) for _ in range(count)]

    a, b = f32(0.5), f32(-1.5)
    for n in (4096, 1 << 24):
        x, y, z = arrays(n, count=3)
        tmp = np.empty_like(z)

        def axpby():
            np.multiply(x, a, out=z)
            np.multiply(y, b, out=tmp)
            np.add(z, tmp, out=z)

        report("axpby", n, "numpy", median_us(axpby, ARGS.runs))
        if torch is not None:
            tx, ty, tz = (torch.from_numpy(v) for v in (x, y, z))
            report("axpby", n, "torch", median_us(lambda: torch.add(tx * a, ty, alpha=b, out=tz), ARGS.runs))
    for n in (1024, 1 << 18):
        x, y = arrays(n, count=2)
        report("l2", n, "numpy", median_us(lambda: np.dot(x - y, x - y), ARGS.runs))
        if torch is not None:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            report("l2", n, "torch", median_us(lambda: ((tx - ty) ** 2).sum(), ARGS.runs))
    side = 4096
    x, y, z = arrays(side, side, count=3)
    report("transposed add", side * side, "numpy", median_us(lambda: np.add(x, y.T, out=z), ARGS.runs))
    report("outer sum", side * side, "numpy", median_us(lambda: x.sum(axis=0), ARGS.runs))
    if torch is not None:
        tx, ty, tz = (torch.from_numpy(v) for v in (x, y, z))
        report("transposed add", side * side, "torch", median_us(lambda: torch.add(tx, ty.T, out=tz), ARGS.runs))
        report("outer sum", side * side, "torch", median_us(lambda: tx.sum(dim=0), ARGS.runs))
    n = 1 << 24
    x, y, z = arrays(n, count=3)
    tmp = np.empty_like(z)

    def tanh_exp():
        np.tanh(x, out=z)
        np.multiply(z, y, out=z)
        np.negative(x, out=tmp)
        np.exp(tmp, out=tmp)
        np.add(z, tmp, out=z)

    report("tanh exp", n, "numpy", median_us(tanh_exp, ARGS.runs))
    if torch is not None:
        tx, ty, tz = (torch.from_numpy(v) for v in (x, y, z))
        report("tanh exp", n, "torch", median_us(lambda: torch.add(torch.tanh(tx) * ty, torch.exp(-tx), out=tz), ARGS.runs))


def matmul():
    rng = np.random.default_rng(2)
    for n in (64, 128, 256, 512, 1024, 2048):
        x, y, z = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(3))
        report("matmul", n, "numpy", median_us(lambda: np.matmul(x, y, out=z), ARGS.runs))
        if torch is not None:
            tx, ty, tz = (torch.from_numpy(v) for v in (x, y, z))
            report("matmul", n, "torch", median_us(lambda: torch.matmul(tx, ty, out=tz), ARGS.runs))


def main():
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            print(json.dumps({"blas": pool.get("internal_api"), "version": pool.get("version"),
                              "threads": pool.get("num_threads"), "kernel": pool.get("architecture")}))
    except ImportError:
        pass
    if ARGS.only in (None, "elementwise"):
        elementwise()
    if ARGS.only in (None, "matmul"):
        matmul()


if __name__ == "__main__":
    main()
