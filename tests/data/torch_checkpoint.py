#!/usr/bin/env python3
"""Writes the PyTorch checkpoints `tests/checkpoints.rs` loads: a 4-8-3 tanh MLP's
`state_dict` (PyTorch's names and layouts: each `nn.Linear` weight stored (out, in)) with an
input batch and the model's output, once in float32 and once in bfloat16 (the output then
computed from the bfloat16 weights, in float32).

Run from the repository root with PyTorch and safetensors installed:
`python3 tests/data/torch_checkpoint.py`. The files are committed; this only remakes them.
"""
import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
x = torch.randn(5, 4)

for dtype, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
    weights = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    exact = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    exact.load_state_dict({k: v.float() for k, v in weights.items()})
    with torch.no_grad():
        y = exact(x)
    save_file(
        {**weights, "input": x.contiguous(), "output": y.contiguous()},
        os.path.join(HERE, f"torch_mlp_{name}.safetensors"),
        metadata={"format": "pt"},
    )
