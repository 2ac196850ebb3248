"""The character-level GPT of `examples/gpt.rs`, in PyTorch: the same text, split, model,
initialisation, windows (SplitMix64 from the seed), schedule, clipping and steps. Prints the
validation bits per character as it trains and that of a bigram count model on the same
split, and writes `target/gpt/torch_curves.csv`, which `examples/gpt.rs` plots beside its own.

    python3 benches/gpt_torch.py [--steps 800] [--batch 32] [--seed 1] [--lr 3e-3] [--threads 2] [--device cpu]

`--device cuda` trains on the GPU (the peer of `examples/gpt.rs --device cuda`).
`--precision bf16` runs the forward pass and the loss under `torch.autocast` in bf16 (the peer
of `--precision bf16`), `--precision tf32` lets f32 products use TF32 (the peer of `--tf32`).
`--compile default|reduce-overhead` compiles the forward pass with the loss, and the clipping
with the optimizer's update, by `torch.compile` (`reduce-overhead`: CUDA graphs, the peer of
`--record` on CUDA).

With `--bench`, it only times training steps (the peer of `cargo bench --bench gpt_step`):
5 warm-up steps (more when compiling), then the median of 7 runs of 5 steps, printed as one
JSON line; on CUDA the line also gives the GPU's busy time a step (kernels and copies, summed
by `torch.profiler` over 5 steps).
"""

import argparse
import gzip
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTEXT = 128
MASK = (1 << 64) - 1


class SplitMix:
    """SplitMix64, as `examples/gpt.rs` draws its windows."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def batch(ids, size, rng):
    positions = len(ids) - CONTEXT - 1
    starts = [rng.next() % positions for _ in range(size)]
    x = torch.stack([ids[s : s + CONTEXT] for s in starts])
    y = torch.stack([ids[s + 1 : s + 1 + CONTEXT] for s in starts])
    return x, y


class Block(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + mlp(norm(x)) with GELU (tanh)."""

    def __init__(self, hidden, heads, head_dim, inner):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.norm1 = nn.LayerNorm(hidden)
        self.query = nn.Linear(hidden, heads * head_dim)
        self.key = nn.Linear(hidden, heads * head_dim)
        self.value = nn.Linear(hidden, heads * head_dim)
        self.out = nn.Linear(heads * head_dim, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        split = lambda p: p(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.query), split(self.key), split(self.value)
        mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(mixed.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, hidden=128, heads=4, head_dim=32, inner=512, layers=4):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.zeros(CONTEXT, hidden))
        self.blocks = nn.ModuleList(Block(hidden, heads, head_dim, inner) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)
        # As `axes::nn::transformer`: weights normal(0, 0.02), biases zero, norms' gains one.
        for name, p in self.named_parameters():
            if "norm" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def schedule(step, steps, peak, floor):
    """`axes::optim::WarmupCosine` with a warmup of a tenth of the steps."""
    warmup = max(steps // 10, 1)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min((step - warmup) / max(steps - warmup, 1), 1.0)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def bigram_bits(train, valid, vocab):
    """Validation bits per character of bigram counts from the train split (add-one)."""
    counts = torch.ones(vocab, vocab, dtype=torch.float64)
    counts.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64), accumulate=True)
    log_p = (counts / counts.sum(1, keepdim=True)).log2()
    return -log_p[valid[:-1], valid[1:]].mean().item()


def adamw(model, args):
    """AdamW as `examples/gpt.rs` takes it. A compiled update reads its rate from a tensor, so
    that a new rate each step is no new compilation."""
    lr = torch.tensor(1e-3, device=args.device) if args.compile != "none" else 1e-3
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def make_train_step(model, opt, args):
    """A training step (forward, loss, backward, clipping, AdamW) as `args` asks: in bf16 under
    autocast or in f32, compiled or eager."""
    autocast = args.precision == "bf16"

    def forward_loss(x, y):
        with torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16, enabled=autocast):
            return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    def update():
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    if args.compile != "none":
        mode = None if args.compile == "default" else args.compile
        forward_loss = torch.compile(forward_loss, mode=mode)
        update = torch.compile(update, mode=mode)

    def train_step(x, y):
        loss = forward_loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        update()
        return loss

    return train_step


def busy_ms_per_step(train_step, x, y, steps):
    """The GPU's busy time a step (kernels, copies and fills, each event's span summed), by
    `torch.profiler` over `steps` steps; None off CUDA."""
    if torch.device(x.device).type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            train_step(x, y).item()
        torch.cuda.synchronize()
    spans = [e.time_range.elapsed_us() for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(spans) / steps / 1e3


def bench(args, vocab=73, runs=7, steps=5):
    """Times training steps on fixed random batches (the data does not change the cost)."""
    model = Gpt(vocab).to(args.device)
    opt = adamw(model, args)
    train_step = make_train_step(model, opt, args)
    ids = torch.randint(0, vocab, (args.batch, CONTEXT + 1))
    x, y = ids[:, :-1].contiguous().to(args.device), ids[:, 1:].contiguous().to(args.device)
    started = time.perf_counter()
    train_step(x, y).item()
    first_ms = (time.perf_counter() - started) * 1e3
    # CUDA graph trees record at the second or third call: warm up past them.
    for _ in range(4 if args.compile == "none" else 10):
        train_step(x, y).item()
    runs_ms = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(steps):
            train_step(x, y).item()  # each step reads its loss, as gpt_step does
        runs_ms.append((time.perf_counter() - start) / steps * 1e3)
    busy = busy_ms_per_step(train_step, x, y, steps)
    print(json.dumps({
        "framework": "pytorch",
        "version": torch.__version__,
        "threads": args.threads,
        "device": args.device,
        "precision": args.precision,
        "compile": args.compile,
        "first_step_ms": round(first_ms, 1),
        "median_ms_per_step": round(statistics.median(runs_ms), 2),
        "runs_ms": [round(r, 2) for r in runs_ms],
        "gpu_busy_ms_per_step": None if busy is None else round(busy, 3),
    }))


def main():
    args = argparse.ArgumentParser()
    args.add_argument("--steps", type=int, default=800)
    args.add_argument("--batch", type=int, default=32)
    args.add_argument("--seed", type=int, default=1)
    args.add_argument("--eval-every", type=int, default=50)
    args.add_argument("--threads", type=int, default=2)
    args.add_argument("--lr", type=float, default=3e-3)
    args.add_argument("--bench", action="store_true")
    args.add_argument("--device", default="cpu")
    args.add_argument("--precision", choices=["f32", "tf32", "bf16"], default="f32")
    args.add_argument("--compile", choices=["none", "default", "reduce-overhead"], default="none")
    args = args.parse_args()
    torch.set_num_threads(args.threads)
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(args.seed)
    if args.bench:
        bench(args)
        return
    with gzip.open(os.path.join(ROOT, "data/kjv/kjv.txt.gz"), "rt") as f:
        text = f.read()
    chars = sorted(set(text))
    table = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([table[c] for c in text], dtype=torch.long)
    split = len(ids) * 9 // 10
    train, valid = ids[:split], ids[split:]
    print(f"bigram count model: {bigram_bits(train, valid, len(chars)):.3f} bits/char on the validation split")
    model = Gpt(len(chars)).to(args.device)
    print(
        f"{sum(p.numel() for p in model.parameters())} parameters, {args.threads} threads, {args.device}, "
        f"{args.precision}, compile {args.compile}"
    )
    opt = adamw(model, args)
    train_step = make_train_step(model, opt, args)
    rng, eval_rng = SplitMix(args.seed), SplitMix(1000)
    on = lambda xy: (xy[0].to(args.device), xy[1].to(args.device))
    evals = [on(batch(valid, args.batch, eval_rng)) for _ in range(4)]
    curves = ["kind,step,bits"]
    started = time.perf_counter()
    for step in range(args.steps):
        x, y = on(batch(train, args.batch, rng))
        for group in opt.param_groups:
            rate = schedule(step, args.steps, args.lr, args.lr / 10)
            if torch.is_tensor(group["lr"]):
                group["lr"].fill_(rate)
            else:
                group["lr"] = rate
        loss = train_step(x, y)
        bits = loss.item() / math.log(2)
        curves.append(f"train,{step + 1},{bits}")
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            with torch.no_grad():
                nats = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item() for x, y in evals)
            valid_bits = nats / len(evals) / math.log(2)
            curves.append(f"validation,{step + 1},{valid_bits}")
            print(f"step {step + 1:>5}: train {bits:.3f} bits/char, validation {valid_bits:.3f}", flush=True)
    seconds = time.perf_counter() - started
    print(f"trained {args.steps} steps in {seconds:.0f} s ({1e3 * seconds / args.steps:.0f} ms per step)")
    out = os.path.join(ROOT, "target/gpt")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "torch_curves.csv"), "w") as f:
        f.write("\n".join(curves) + "\n")
    print(f"wrote {os.path.join(out, 'torch_curves.csv')}")


if __name__ == "__main__":
    main()
