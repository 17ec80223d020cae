#!/usr/bin/env python3
"""Writes one ONNX model per convolution workload of the tuner benchmark.

Each model is a single Conv (batch 1, float32, no bias), so `kiln tune` on it
has exactly one task: the conv2d_NCHWc.x86 workload named by the file. The
three are layers of the benchmark zoo chosen to differ in kind:
  resnet18_3x3_64_56   ResNet-18 layer1: 64->64, 3x3, 56x56, stride 1
  resnet50_1x1_256_14  ResNet-50 layer3: 256->1024, 1x1, 14x14 (a 1x1 GEMM-like conv)
  resnet18_7x7_3_224   the stem: 3->64, 7x7, 224x224, stride 2 (three input channels)

With --tiny, three small convolutions of the same three kinds instead (3x3, 1x1, 7x7 stride
2 with three input channels), for the scripts' smoke test (bench/smoke/tuner_scripts_smoke.sh).

usage: make_conv_models.py [--tiny] OUT_DIR
"""
import os
import sys

import torch

WORKLOADS = {
    # name: (in channels, out channels, kernel, stride, padding, input size)
    "resnet18_3x3_64_56": (64, 64, 3, 1, 1, 56),
    "resnet50_1x1_256_14": (256, 1024, 1, 1, 0, 14),
    "resnet18_7x7_3_224": (3, 64, 7, 2, 3, 224),
}

TINY_WORKLOADS = {
    "tiny_3x3_16_8": (16, 16, 3, 1, 1, 8),
    "tiny_1x1_32_7": (32, 64, 1, 1, 0, 7),
    "tiny_7x7_3_32": (3, 16, 7, 2, 3, 32),
}


def main():
    args = sys.argv[1:]
    tiny = "--tiny" in args
    args = [a for a in args if a != "--tiny"]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, (cin, cout, k, s, p, hw) in (TINY_WORKLOADS if tiny else WORKLOADS).items():
        conv = torch.nn.Conv2d(cin, cout, k, stride=s, padding=p, bias=False).eval()
        x = torch.randn(1, cin, hw, hw)
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(conv, x, path, input_names=["x"], output_names=["y"], opset_version=13)
        print(path)


if __name__ == "__main__":
    main()
