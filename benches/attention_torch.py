"""The peer of `cargo bench --bench attention`: PyTorch's causal
`scaled_dot_product_attention`, forward and backward, at batch 8 × 4 heads × 32, f32, on the
CPU. Prints the median milliseconds of one forward + backward as one JSON line.

    python3 benches/attention_torch.py --context 128 --threads 1
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shape = (8, 4, args.context, 32)
    q, k, v = (torch.rand(shape).mul_(2).sub_(1).requires_grad_() for _ in range(3))

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.sum().backward()
        q.grad = k.grad = v.grad = None

    for _ in range(3):
        step()
    times = []
    for _ in range(15):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times)}))


if __name__ == "__main__":
    main()
