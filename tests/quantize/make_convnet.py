#!/usr/bin/env python3
"""A tiny convnet with trained (not random-uniform) weights, for the quantizer's tests.

Writes into OUT:
  model.onnx        Conv-BN-ReLU, MaxPool, Conv-BN-ReLU, a residual 1x1 Conv-BN block (Add,
                    ReLU), GlobalAveragePool, Flatten, Gemm (10 classes); opset 17; trained for --steps Adam steps on a synthetic task
                    (oriented gratings of 10 frequencies/angles plus noise), so that weight and
                    activation distributions look like a trained net's (long-tailed, per-channel
                    scales that differ), which random-uniform weights do not.
  calib.npz         'input': [N, 1, 3, 16, 16] calibration samples (stacked, new leading axis)
  calib_dir/*.npz   the first 4 of them as one file per sample (kiln run --inputs form)
  eval.npz          'input': [M, 1, 3, 16, 16] held-out samples of the same task

    make_convnet.py OUT [--steps 60] [--calib 32] [--eval 64] [--seed 0]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn


def gratings(n, gen):
    """Images of class k: a grating with angle and frequency set by k, random phase, noise."""
    labels = torch.randint(0, 10, (n,), generator=gen)
    ys, xs = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    imgs = []
    for k in labels.tolist():
        angle = (k % 5) * np.pi / 5
        freq = 0.3 + 0.25 * (k // 5)
        phase = float(torch.rand(1, generator=gen)) * 2 * np.pi
        g = torch.sin(freq * (xs * np.cos(angle) + ys * np.sin(angle)) + phase)
        chans = torch.stack([g, 0.5 * g + 0.2, -g]) + 0.3 * torch.randn(3, 16, 16, generator=gen)
        imgs.append(chans)
    return torch.stack(imgs), labels


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )
        self.block = nn.Sequential(nn.Conv2d(32, 32, 1), nn.BatchNorm2d(32))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.features(x)
        x = torch.relu(x + self.block(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--calib", type=int, default=32)
    ap.add_argument("--eval", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(a.steps):
        x, y = gratings(64, gen)
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    os.makedirs(a.out, exist_ok=True)
    torch.onnx.export(net, torch.zeros(1, 3, 16, 16), os.path.join(a.out, "model.onnx"),
                      input_names=["input"], output_names=["logits"], opset_version=17)
    calib, _ = gratings(a.calib, gen)
    calib = calib.numpy().astype(np.float32)[:, None]
    np.savez(os.path.join(a.out, "calib.npz"), input=calib)
    d = os.path.join(a.out, "calib_dir")
    os.makedirs(d, exist_ok=True)
    for i in range(min(4, a.calib)):
        np.savez(os.path.join(d, f"sample_{i:02d}.npz"), input=calib[i])
    ev, ey = gratings(a.eval, gen)
    with torch.no_grad():
        acc = (net(ev).argmax(1) == ey).float().mean().item()
    np.savez(os.path.join(a.out, "eval.npz"), input=ev.numpy().astype(np.float32)[:, None])
    print(f"make_convnet: trained {a.steps} steps, loss {loss.item():.3f}, "
          f"held-out accuracy {acc:.2f}")


if __name__ == "__main__":
    main()
