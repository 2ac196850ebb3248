"""PyTorch CPU peer of the criterion bench `benches/train_step.rs`.

One training step (forward, backward, Adam lr 1e-3) of a 64-256-256-10 ReLU MLP
(Linear, ReLU, Linear, ReLU, Linear) with mean softmax cross-entropy over integer
labels, batch 128, float32. Warms up 50 steps, then times 11 runs of 200 steps and
prints one JSON line with the median microseconds per step.

Run, after `pip install torch` per the README:

    python3 benches/train_step_torch.py --threads 2

`--device cuda` times it on the GPU (the peer of `AXES_BENCH_DEVICE=cuda:0 cargo bench --bench
train_step`); there each step reads its loss, as the axes step does, so both wait for the GPU.
"""

import argparse
import json
import statistics
import time

import torch

BATCH, IN, HIDDEN, CLASSES = 128, 64, 256, 10
WARMUP, RUNS, STEPS = 50, 11, 200


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    threads, device = args.threads, args.device
    torch.set_num_threads(threads)
    torch.manual_seed(0)

    model = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    ).to(device)
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, IN, dtype=torch.float32, device=device)
    y = torch.randint(0, CLASSES, (BATCH,), device=device)

    def step():
        adam.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        adam.step()
        if device != "cpu":
            loss.item()

    for _ in range(WARMUP):
        step()
    runs_us = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
        runs_us.append((time.perf_counter() - start) / STEPS * 1e6)

    print(json.dumps({
        "framework": "pytorch",
        "version": torch.__version__,
        "threads": threads,
        "device": device,
        "median_us_per_step": round(statistics.median(runs_us), 2),
        "runs_us": [round(r, 2) for r in runs_us],
    }))


if __name__ == "__main__":
    main()
