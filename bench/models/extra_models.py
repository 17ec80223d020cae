#!/usr/bin/python3
"""Generates the wider torchvision zoo used to check kiln's operator coverage end to end.

Same layout as generate.py (whose export and randomize_norm_stats it reuses):
  DIR/<name>/model.onnx, input.npz (key "input"), expected.npz (output_0, ...)
Random weights (weights=None), fixed seed, eval mode, batch 1, fp32, 1x3x224x224 input.

Usage: extra_models.py --out DIR [--models shufflenet_v2_x0_5,densenet121,...]
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402  (reuses export, randomize_norm_stats, SEED)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402


class OutOnly(nn.Module):
    """Segmentation models return {"out": ..., "aux": ...}: export the "out" tensor only."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


# name -> (builder, opset)
MODELS = {
    "shufflenet_v2_x0_5": (_tv("shufflenet_v2_x0_5"), 13),
    "densenet121": (_tv("densenet121"), 13),
    "efficientnet_b0": (_tv("efficientnet_b0"), 14),
    "mnasnet0_5": (_tv("mnasnet0_5"), 13),
    "regnet_y_400mf": (_tv("regnet_y_400mf"), 13),
    "vgg11": (_tv("vgg11"), 13),
    "convnext_tiny": (_tv("convnext_tiny"), 17),
    "googlenet": (_tv("googlenet", aux_logits=False, init_weights=True), 13),
    "resnext50_32x4d": (_tv("resnext50_32x4d"), 13),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), 14),
    "vit_b_16": (_tv("vit_b_16", image_size=224), 17),
    "fcn_resnet50": (
        lambda: OutOnly(
            torchvision.models.segmentation.fcn_resnet50(
                weights=None, weights_backbone=None, aux_loss=False
            )
        ),
        13,
    ),
    "lraspp_mobilenet_v3_large": (
        lambda: OutOnly(
            torchvision.models.segmentation.lraspp_mobilenet_v3_large(
                weights=None, weights_backbone=None
            )
        ),
        13,
    ),
}


def build_model(name):
    torch.manual_seed(generate.SEED)
    gen = torch.Generator().manual_seed(generate.SEED + 1)
    builder, opset = MODELS[name]
    model = builder()
    inputs = {"input": torch.randn(1, 3, 224, 224, generator=gen)}
    with torch.no_grad():
        # Also covers ConvNeXt's LayerNorm2d (an nn.LayerNorm over the channel axis).
        generate.randomize_norm_stats(model, gen)
        # ViT zero-initializes its classifier head (and class token): its output would be all
        # zeros and match anything. Give every all-zero weight (rank >= 2) random values.
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    model.eval()
    return model, inputs, opset


def export(model, inputs, path, opset):
    """generate.export, except that ViT's nn.MultiheadAttention must be traced with grad enabled:
    under no_grad, eval mode takes the fused aten::_native_multi_head_attention fast path, which
    torch 1.13 cannot export. The traced graph computes the same function."""
    if not any(isinstance(m, nn.MultiheadAttention) for m in model.modules()):
        return generate.export(model, inputs, path, opset)
    no_grad = generate.torch.no_grad
    generate.torch.no_grad = torch.enable_grad
    try:
        return generate.export(model, inputs, path, opset)
    finally:
        generate.torch.no_grad = no_grad


def write(name, out_dir):
    model, inputs, opset = build_model(name)
    with torch.no_grad():
        outputs = model(*inputs.values())
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    final = os.path.join(out_dir, name)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir)
    try:
        proto = export(model, inputs, os.path.join(tmp, "model.onnx"), opset)
        np.savez(os.path.join(tmp, "input.npz"), **{k: v.numpy() for k, v in inputs.items()})
        np.savez(
            os.path.join(tmp, "expected.npz"),
            **{f"output_{i}": o.numpy() for i, o in enumerate(outputs)},
        )
        os.chmod(tmp, 0o755)
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}: opset {opset}, {len(proto.graph.node)} nodes; out "
          f"{', '.join(str(list(o.shape)) for o in outputs)}")
    print(f"  ops: {' '.join(ops)}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=",".join(MODELS))
    args = p.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        write(name, args.out)


if __name__ == "__main__":
    main()
