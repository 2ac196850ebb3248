"""PyTorch twin of `examples/cnn.rs`, and the peer of the criterion bench `benches/cnn_step.rs`.

The same network: Conv2d(1, 16, 3, padding=1), ReLU, Conv2d(16, 32, 3, padding=1), ReLU,
MaxPool2d(2), Flatten, Linear(512, 64), ReLU, Linear(64, 10); mean softmax cross-entropy,
AdamW (lr 3e-3, weight decay 1e-2) with a cosine decay to 0, batch 32, images shifted by up
to a pixel each epoch, on the digits split 80/20.

    python3 benches/cnn_torch.py                  # trains 30 epochs, prints the test accuracy
    python3 benches/cnn_torch.py --bench --threads 2
                                                  # one JSON line: median µs per training step
"""

import argparse
import gzip
import json
import os
import statistics
import time

import torch

BATCH, EPOCHS, LR, WEIGHT_DECAY = 32, 30, 3e-3, 1e-2
WARMUP, RUNS, STEPS = 20, 11, 50


def network():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 4 * 4, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )


def digits(seed):
    here = os.path.dirname(os.path.abspath(__file__))
    with gzip.open(os.path.join(here, "..", "data", "digits", "digits.csv.gz"), "rt") as f:
        rows = [[float(v) for v in line.split(",")] for line in f if line.strip()]
    data = torch.tensor(rows)
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))
    x = (data[order, :64] / 16.0).reshape(-1, 1, 8, 8)
    y = data[order, 64].long()
    test = len(rows) // 5
    return (x[test:], y[test:]), (x[:test], y[:test])


def shifted(x, generator):
    out = torch.zeros_like(x)
    shifts = torch.randint(-1, 2, (len(x), 2), generator=generator)
    for i, (dy, dx) in enumerate(shifts.tolist()):
        out[i] = torch.roll(x[i], (dy, dx), (1, 2))
        if dy == 1:
            out[i, :, 0, :] = 0
        elif dy == -1:
            out[i, :, -1, :] = 0
        if dx == 1:
            out[i, :, :, 0] = 0
        elif dx == -1:
            out[i, :, :, -1] = 0
    return out


def train(seed):
    torch.manual_seed(seed)
    (x, y), (tx, ty) = digits(seed)
    model = network()
    steps = EPOCHS * ((len(x) + BATCH - 1) // BATCH)
    adam = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adam, steps)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for epoch in range(1, EPOCHS + 1):
        xs = shifted(x, generator)
        order = torch.randperm(len(x), generator=generator)
        for i in range(0, len(x), BATCH):
            batch = order[i:i + BATCH]
            loss = torch.nn.functional.cross_entropy(model(xs[batch]), y[batch])
            adam.zero_grad(set_to_none=True)
            loss.backward()
            adam.step()
            schedule.step()
        with torch.no_grad():
            accuracy = (model(tx).argmax(1) == ty).float().mean().item()
        print(f"epoch {epoch:3}: loss {loss.item():.4f}  test {100 * accuracy:.2f}%")
    print(f"trained {EPOCHS} epochs in {time.perf_counter() - start:.2f} s; "
          f"test accuracy {100 * accuracy:.2f}%")


def bench(threads):
    torch.manual_seed(0)
    model = network()
    adam = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    x = torch.rand(BATCH, 1, 8, 8)
    y = torch.randint(0, 10, (BATCH,))

    def step():
        adam.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        adam.step()

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
        "median_us_per_step": round(statistics.median(runs_us), 2),
        "runs_us": [round(r, 2) for r in runs_us],
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.bench:
        bench(args.threads)
    else:
        train(args.seed)


if __name__ == "__main__":
    main()
