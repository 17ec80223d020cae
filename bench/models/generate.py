#!/usr/bin/python3
"""Generates the benchmark and end-to-end test models for kiln.

For each model this writes DIR/<name>/:
  model.onnx     the exported network (random weights, fixed seed, eval mode, batch 1, fp32)
  input.npz      one array per ONNX input, keyed by the ONNX input name
  expected.npz   PyTorch's outputs, keyed output_0, output_1, ... (kiln run's naming)

Usage: generate.py --out DIR [--models resnet18,encoder,...] [--opset-cnn 13] [--opset-encoder 17]

Needs Debian's python3-torch, python3-torchvision, python3-onnx and python3-numpy
(scripts/install-deps.sh installs them). The model builders are importable: torch_bench.py
rebuilds the same networks with build_model(name).
"""

import argparse
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

try:
    import onnx
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # The e2e tests grep for this message.
    sys.exit(f"generate.py: missing Python package ({e}); run scripts/install-deps.sh")

CNN_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1"]
ENCODER_MODELS = ["encoder", "encoder_float"]
# "tiny": a ResNet-style block small enough for the drivers' smoke tests (bench/smoke) to
# build, run and time in seconds; not part of the benchmark.
TINY_MODELS = ["tiny"]
ALL_MODELS = CNN_MODELS + ENCODER_MODELS + TINY_MODELS
DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "encoder"]

# BERT-style encoder dimensions (documented in README.md).
ENC_LAYERS = 4
ENC_D_MODEL = 256
ENC_HEADS = 4
ENC_FFN = 1024
ENC_SEQ = 128
ENC_VOCAB = 1000

SEED = 20240611


class EncoderLayer(nn.Module):
    """Post-LN transformer layer (BERT): attention written as MatMul + Softmax, exact GELU."""

    def __init__(self, d_model, heads, ffn):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln1 = nn.LayerNorm(d_model, eps=1e-12)
        self.fc1 = nn.Linear(d_model, ffn)
        self.gelu = nn.GELU()  # approximate='none': exported as x * 0.5 * (1 + erf(x / sqrt 2))
        self.fc2 = nn.Linear(ffn, d_model)
        self.ln2 = nn.LayerNorm(d_model, eps=1e-12)

    def split_heads(self, x):
        # Static batch and sequence: the exported Reshape gets a constant shape, no Shape ops.
        return x.reshape(1, ENC_SEQ, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q = self.split_heads(self.q(x))
        k = self.split_heads(self.k(x))
        v = self.split_heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (self.head_dim**0.5)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(1, ENC_SEQ, self.heads * self.head_dim)
        x = self.ln1(x + self.proj(ctx))
        return self.ln2(x + self.fc2(self.gelu(self.fc1(x))))


class Encoder(nn.Module):
    """BERT-style encoder. token_ids=True: int64 ids -> Embedding (Gather) + learned positions."""

    def __init__(self, token_ids):
        super().__init__()
        self.token_ids = token_ids
        if token_ids:
            self.embed = nn.Embedding(ENC_VOCAB, ENC_D_MODEL)
            self.positions = nn.Parameter(torch.randn(1, ENC_SEQ, ENC_D_MODEL) * 0.1)
        self.ln_embed = nn.LayerNorm(ENC_D_MODEL, eps=1e-12)
        self.layers = nn.ModuleList(
            [EncoderLayer(ENC_D_MODEL, ENC_HEADS, ENC_FFN) for _ in range(ENC_LAYERS)]
        )

    def forward(self, x):
        if self.token_ids:
            x = self.embed(x) + self.positions
        x = self.ln_embed(x)
        for layer in self.layers:
            x = layer(x)
        return x


class Tiny(nn.Module):
    """Conv-BN-ReLU, max pool, a residual conv block, global pool and a classifier: the
    operators of resnet18 on a [1, 3, 16, 16] input."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def randomize_norm_stats(model, gen):
    """Default BN/LN parameters are identities (mean 0, var 1, scale 1, shift 0), which would
    hide a wrong BatchNorm fold or LayerNorm affine: give them random values instead."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)
        elif isinstance(m, nn.LayerNorm):
            n = m.normalized_shape[0]
            m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def build_model(name):
    """Returns (module in eval mode, {onnx input name: tensor}); deterministic for a name."""
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    if name in CNN_MODELS:
        model = getattr(torchvision.models, name)(weights=None)
        inputs = {"input": torch.randn(1, 3, 224, 224, generator=gen)}
    elif name == "tiny":
        model = Tiny()
        inputs = {"input": torch.randn(1, 3, 16, 16, generator=gen)}
    elif name == "encoder":
        model = Encoder(token_ids=True)
        inputs = {"input_ids": torch.randint(0, ENC_VOCAB, (1, ENC_SEQ), generator=gen)}
    elif name == "encoder_float":
        model = Encoder(token_ids=False)
        inputs = {"inputs_embeds": torch.randn(1, ENC_SEQ, ENC_D_MODEL, generator=gen)}
    else:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(ALL_MODELS)})")
    with torch.no_grad():
        randomize_norm_stats(model, gen)
    model.eval()
    return model, inputs


def export(model, inputs, path, opset):
    names = list(inputs)
    # TrainingMode.EVAL would run _jit_pass_onnx_eval_peephole, which fuses BatchNorm into the
    # preceding Conv. PRESERVE on a model in eval mode exports the same inference graph with
    # BatchNormalization kept as its own node, so kiln's own BN folding is exercised.
    # Constant folding under PRESERVE warns that it could mutate trainable parameters; the model
    # is in eval mode, so the warning does not apply.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="It is recommended that constant folding")
        torch.onnx.export(
            model,
            tuple(inputs[n] for n in names),
            path,
            input_names=names,
            output_names=["output_0"],
            opset_version=opset,
            do_constant_folding=True,
            training=torch.onnx.TrainingMode.PRESERVE,
        )
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def generate(name, out_dir, opset):
    model, inputs = build_model(name)
    with torch.no_grad():
        outputs = model(*inputs.values())
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)

    # Write into a temporary folder and rename: a half-written model never looks complete.
    final = os.path.join(out_dir, name)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir)
    try:
        proto = export(model, inputs, os.path.join(tmp, "model.onnx"), opset)
        np.savez(os.path.join(tmp, "input.npz"), **{k: v.numpy() for k, v in inputs.items()})
        np.savez(
            os.path.join(tmp, "expected.npz"),
            **{f"output_{i}": o.numpy() for i, o in enumerate(outputs)},
        )
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    ops = sorted({n.op_type for n in proto.graph.node})
    shapes = ", ".join(str(list(o.shape)) for o in outputs)
    ins = ", ".join(f"{k} {list(v.shape)} {str(v.dtype).replace('torch.', '')}" for k, v in inputs.items())
    print(f"{name}: opset {opset}, {len(proto.graph.node)} nodes; in {ins}; out {shapes}")
    print(f"  ops: {' '.join(ops)}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help=f"comma-separated, from: {','.join(ALL_MODELS)}")
    p.add_argument("--opset-cnn", type=int, default=13)
    p.add_argument("--opset-encoder", type=int, default=17,
                   help="17 exports LayerNormalization; 14 decomposes it into ReduceMean etc.")
    args = p.parse_args()

    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in ALL_MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(ALL_MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        opset = args.opset_encoder if name in ENCODER_MODELS else args.opset_cnn  # tiny: a CNN
        generate(name, args.out, opset)


if __name__ == "__main__":
    main()
