#!/usr/bin/env python3
"""Writes `tests/data/torch_layers.safetensors`, which `tests/torch_layers.rs` checks
`axes::spatial` and `axes::nn::Gru` against: inputs, weights and PyTorch's outputs (float32)
of a 1-, 2- and 3-D convolution with strides, padding and dilation, a 2-D max and average
pooling with padding, and a one-layer GRU over a sequence (PyTorch's parameter names and
gate order: reset, update, new).

Run from the repository root with PyTorch and safetensors installed:
`python3 tests/data/layers_torch.py`. The file is committed; this only remakes it.
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

torch.manual_seed(11)
t = {}

# Convolutions: input (batch, channels, spatial...), weight (out, in, kernel...), bias (out).
x = torch.randn(2, 3, 9, 7)
w = torch.randn(4, 3, 3, 2)
b = torch.randn(4)
t["conv2d.input"], t["conv2d.weight"], t["conv2d.bias"] = x, w, b
t["conv2d.output"] = F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2))

x = torch.randn(2, 2, 11)
w = torch.randn(3, 2, 4)
b = torch.randn(3)
t["conv1d.input"], t["conv1d.weight"], t["conv1d.bias"] = x, w, b
t["conv1d.output"] = F.conv1d(x, w, b, stride=2, padding=1, dilation=2)

x = torch.randn(1, 2, 5, 6, 4)
w = torch.randn(2, 2, 2, 3, 2)
b = torch.randn(2)
t["conv3d.input"], t["conv3d.weight"], t["conv3d.bias"] = x, w, b
t["conv3d.output"] = F.conv3d(x, w, b, stride=1, padding=(1, 0, 1))

# Poolings over (batch, channels, height, width).
x = torch.randn(2, 3, 9, 7)
t["pool.input"] = x
t["max_pool.output"] = F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
t["avg_pool.output"] = F.avg_pool2d(x, kernel_size=2, stride=2, padding=1)

# A GRU over (time, batch, features), from a zero state.
gru = torch.nn.GRU(input_size=3, hidden_size=4)
x = torch.randn(6, 2, 3)
with torch.no_grad():
    out, last = gru(x)
for name, value in gru.state_dict().items():
    t[f"gru.{name}"] = value
t["gru.input"], t["gru.output"], t["gru.last"] = x, out, last[0]

save_file(
    {k: v.detach().contiguous() for k, v in t.items()},
    os.path.join(HERE, "torch_layers.safetensors"),
    metadata={"format": "pt"},
)
