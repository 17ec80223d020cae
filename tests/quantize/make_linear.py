#!/usr/bin/env python3
"""A tiny stack of Linear layers on a rank-3 activation, for the quantizer's Linear-with-bias tests.

PyTorch exports nn.Linear on a [B, S, D] input as MatMul followed by Add of the bias vector (Gemm
only takes 2-D inputs), the form a transformer's projections have. Writes into OUT:
  model.onnx   x [1, 8, 16] -> Linear(16, 32) -> ReLU -> Linear(32, 24) -> Tanh
               -> Linear(24, 10) -> y; opset 17; three MatMul + Add(bias) pairs, the last Add
               writing the graph output
  calib.npz    'x': [N, 1, 8, 16] calibration samples (stacked along a new leading axis)
  eval.npz     'x': [M, 1, 8, 16] held-out samples

    make_linear.py OUT [--calib 16] [--eval 16] [--seed 0]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 24)
        self.fc3 = nn.Linear(24, 10)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--calib", type=int, default=16)
    ap.add_argument("--eval", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    net = Net()
    with torch.no_grad():
        # Biases of the order of the products (default init makes them small), so that a bias
        # quantized or added wrongly shows in the output.
        for fc in (net.fc1, net.fc2, net.fc3):
            fc.bias.uniform_(-0.5, 0.5)
    net.eval()
    os.makedirs(a.out, exist_ok=True)
    torch.onnx.export(net, torch.zeros(1, 8, 16), os.path.join(a.out, "model.onnx"),
                      input_names=["x"], output_names=["y"], opset_version=17)
    rng = np.random.default_rng(a.seed)
    for name, n in (("calib", a.calib), ("eval", a.eval)):
        x = rng.standard_normal((n, 1, 8, 16)).astype(np.float32)
        np.savez(os.path.join(a.out, name + ".npz"), x=x)


if __name__ == "__main__":
    main()
