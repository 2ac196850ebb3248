#!/usr/bin/env python3
"""PyTorch reads the safetensors files `axes` writes: `tests/checkpoints.rs`
(`writes_a_file_for_pytorch`) leaves two files in `target/tmp`; this loads them with
`safetensors.torch.load_file` and checks element types, shapes and values, then runs the
saved parameters in a PyTorch model against the output PyTorch recorded for them."""
import os
import sys

import torch
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = os.path.join(ROOT, "target", "tmp")

tensors = load_file(os.path.join(TMP, "axes-for-pytorch.safetensors"))
x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
checks = [
    ("x is f32 (Batch, Pixel)", tensors["x"].dtype == torch.float32 and torch.equal(tensors["x"], x)),
    ("x_bf16 is bf16", tensors["x_bf16"].dtype == torch.bfloat16 and torch.equal(tensors["x_bf16"].float(), x)),
    (
        "x_f64_transposed is f64 (Pixel, Batch)",
        tensors["x_f64_transposed"].dtype == torch.float64
        and torch.equal(tensors["x_f64_transposed"], x.double().T),
    ),
    ("ids is i64", tensors["ids"].dtype == torch.int64 and tensors["ids"].tolist() == [7, -1]),
]

# The typed model's parameters, saved by axes with each weight as (in, out), back into
# PyTorch's nn.Linear layout (out, in): the model gives the output PyTorch recorded.
params = load_file(os.path.join(TMP, "axes-params-for-pytorch.safetensors"))
reference = load_file(os.path.join(ROOT, "tests", "data", "torch_mlp_f32.safetensors"))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
model.load_state_dict({k: (v.T if k.endswith("weight") else v) for k, v in params.items()})
with torch.no_grad():
    y = model(reference["input"])
checks.append(("saved parameters: PyTorch's output", torch.allclose(y, reference["output"], atol=1e-6)))

for name, ok in checks:
    print(("ok   " if ok else "FAIL ") + name)
failed = sum(not ok for _, ok in checks)
print(f"PyTorch {torch.__version__} read the files axes wrote: {len(checks) - failed} of {len(checks)} checks hold")
sys.exit(1 if failed else 0)
