#!/usr/bin/python3
"""Models outside the zoo that check operator coverage and speed on architectures kiln was
not developed on.

Same layout as generate.py: DIR/<name>/model.onnx, input.npz (key "input"), expected.npz
(output_0, ...); random weights, fixed seed, eval mode, fp32.

Two sets:
  small (default): tiny models that the e2e tests build, run and compare with PyTorch, one per
    path that a model of the zoo does not take: 1-D convolutions and pools (a keyword-spotting
    net), transposed convolutions (a U-Net and a DCGAN-style generator), dilated convolutions
    whose taps fall in the padding (DeepLab's ASPP), activations beyond ReLU and GELU (an MLP
    with SELU, ELU, PReLU, Softsign and Mish), and a GPT-style decoder (token embedding, causal
    mask through Where, tanh GELU), a LLaMA-style decoder (RMSNorm, rotary Sin/Cos of CumSum
    positions, a Trilu mask, Einsum attention, TopK, GatherElements, ArgMax), LSTM and GRU
    layers (a sequence tagger), and InstanceNorm and GroupNorm (a style-transfer net),
    PixelShuffle (an ESPCN super-resolution net), and ShuffleNetV2's channel split with
    branches of 58 channels (padded to whole vectors).
  torchvision: 19 torchvision models that neither generate.py nor extra_models.py has
    (resnet34 ... swin_t, deeplabv3_mobilenet_v3_large, resnext101_32x8d), 1x3x224x224 input,
    for bench/models/run_bench.py --models-dir.

Usage: coverage_models.py --out DIR [--set small|torchvision] [--models a,b,...]
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extra_models  # noqa: E402  (write, OutOnly, and the ViT export fix)
import generate  # noqa: E402  (SEED)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402


def _gen():
    return torch.Generator().manual_seed(generate.SEED + 1)


class KeywordSpotter(nn.Module):
    """Conv1d / BatchNorm1d / ReLU / MaxPool1d blocks on raw audio, a ConvTranspose1d, then a
    global average, L2-normalized (F.normalize: ReduceL2)."""

    def __init__(self):
        super().__init__()
        layers, c = [], 1
        for out, k, stride, dilation in [(16, 40, 4, 1), (16, 3, 1, 2), (32, 3, 1, 1)]:
            layers += [nn.Conv1d(c, out, k, stride=stride, dilation=dilation, padding=k // 2),
                       nn.BatchNorm1d(out), nn.ReLU(), nn.MaxPool1d(3, stride=2, padding=1)]
            c = out
        self.features = nn.Sequential(*layers, nn.AvgPool1d(2))
        self.up = nn.ConvTranspose1d(c, 8, 4, stride=2, padding=1)
        self.fc = nn.Linear(8, 12)

    def forward(self, x):
        y = self.up(self.features(x))
        return self.fc(F.normalize(F.adaptive_avg_pool1d(y, 1).flatten(1), dim=1))


class UNet(nn.Module):
    """Two levels; upsampling by ConvTranspose2d (2x2 stride 2, and 3x3 stride 2 with
    output_padding) and by bilinear Resize."""

    def __init__(self):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.e1, self.e2, self.e3 = block(3, 16), block(16, 32), block(32, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.d2 = block(64, 32)
        self.up1 = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
        self.d1 = block(32, 16)
        self.up0 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(F.max_pool2d(a, 2))
        c = self.e3(F.max_pool2d(b, 2))
        d = self.d2(torch.cat([self.up2(c), b], 1))
        e = self.d1(torch.cat([self.up1(d), a], 1))
        return self.out(self.up0(e))


class Generator(nn.Module):
    """DCGAN-style: 4x4 stride-2 pad-1 transposed convs, one grouped, Tanh at the end."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(16, 32, 4, stride=1, padding=0), nn.BatchNorm2d(32), nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1, groups=2), nn.BatchNorm2d(16),
            nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class Aspp(nn.Module):
    """DeepLab's atrous spatial pyramid pooling on a 7x7 map: at dilations 6 and 12 the corner
    taps read only padding."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, stride=4, padding=1), nn.ReLU())
        self.branches = nn.ModuleList(
            [nn.Conv2d(24, 16, 1)] +
            [nn.Conv2d(24, 16, 3, padding=d, dilation=d) for d in (2, 6, 12)])
        self.project = nn.Conv2d(64, 8, 1)

    def forward(self, x):
        y = self.stem(x)
        return self.project(torch.cat([F.relu(b(y)) for b in self.branches], 1))


class TabularMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(40, 128), nn.BatchNorm1d(128), nn.SELU(), nn.Dropout(0.1),
            nn.Linear(128, 64), nn.ELU(0.5), nn.Linear(64, 64), nn.PReLU(64),
            nn.Linear(64, 32), nn.Softsign(), nn.Linear(32, 32), nn.LayerNorm(32), nn.Mish(),
            nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = F.softmax(att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab=512, d=64, heads=4, layers=2, context=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context,
                                                                                  context))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]).unsqueeze(0))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.ln(x))


class RmsNorm(nn.Module):
    """LLaMA's RMSNorm (no mean, no bias): exported as Pow, ReduceMean, Add, Sqrt, Div, Mul."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class LlamaBlock(nn.Module):
    """Pre-norm block: rotary q and k, attention as two Einsums, a SiLU-gated MLP."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.attn_norm, self.mlp_norm = RmsNorm(d), RmsNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (w(h).view(b, t, self.heads, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(self.head_dim)) + mask
        o = torch.einsum("bhqk,bkhd->bqhd", F.softmax(s, dim=-1), v)
        x = x + self.wo(o.reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """A LLaMA-style decoder whose position and mask arithmetic stays in the graph: positions
    are the cumulative sum (CumSum) of a not-padding mask computed from the token ids (as
    Hugging Face derives position_ids from attention_mask), so neither they nor the rotary
    tables (Sin, Cos) fold to constants; the causal mask is torch.triu (Trilu) of the same
    mask, combined with it (padding keys are masked too). The outputs
    are the logits, the top 5 tokens' log-probabilities (ReduceLogSumExp, then GatherElements
    at TopK's indices), the top 5 token ids (TopK) and the argmax (ArgMax)."""

    def __init__(self, vocab=100, d=64, heads=4, layers=2, ffn=172, pad=-1):
        super().__init__()
        self.pad = pad  # not a token id: every position counts
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, ffn) for _ in range(layers)])
        self.norm = RmsNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd))

    def forward(self, ids):
        t = ids.shape[1]
        keep = ids.ne(self.pad)
        pos = (torch.cumsum(keep.long(), dim=1) - 1).float()
        freqs = pos[:, :, None] * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)[:, :, None, :]  # broadcast over heads
        cos, sin = torch.cos(emb), torch.sin(emb)
        # [batch, query, key]: 1 where the key is a token. A query sees no later key (above
        # the diagonal) and no padding key. A triu of a constant would be folded at build
        # time; this one runs as a kernel.
        valid = keep[:, None, :].float().expand(-1, t, -1)
        blocked = torch.triu(valid, diagonal=1) + (1 - valid)
        mask = torch.zeros_like(blocked).masked_fill(blocked > 0, float("-inf"))[:, None]
        x = self.tok(ids)
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        logits = self.head(self.norm(x))
        logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        top = torch.topk(logits, 5, dim=-1)
        return logits, torch.gather(logp, -1, top.indices), top.indices, logits.argmax(-1)


class StyleNet(nn.Module):
    """A style-transfer-like net: InstanceNorm2d (affine and not), GroupNorm, a residual
    block, and a transposed conv back up."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1),
                                  nn.InstanceNorm2d(16, affine=True), nn.ReLU())
        self.res = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
                                 nn.Conv2d(16, 16, 3, padding=1), nn.InstanceNorm2d(16))
        self.up = nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1)

    def forward(self, x):
        y = self.down(x)
        return torch.tanh(self.up(y + self.res(y)))


class SuperResolution(nn.Module):
    """ESPCN: convolutions at low resolution, then PixelShuffle (DepthToSpace) by 3."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.Tanh(),
                                 nn.Conv2d(32, 16, 3, padding=1), nn.Tanh(),
                                 nn.Conv2d(16, 9, 3, padding=1), nn.PixelShuffle(3))

    def forward(self, x):
        return self.net(x)


class SequenceTagger(nn.Module):
    """A two-layer bidirectional LSTM (batch first) and a GRU over its outputs."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(24, 32, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(64, 16, batch_first=True)
        self.fc = nn.Linear(16, 9)

    def forward(self, x):
        y, _ = self.lstm(x)
        z, _ = self.gru(y)
        return self.fc(z)


class ChannelSplitNet(nn.Module):
    """ShuffleNetV2 1.0x's units (torchvision's InvertedResidual): branches of 58 channels, whose
    only block divisors are 2 and 29, so pad_channels pads them to whole vectors."""

    def __init__(self):
        super().__init__()
        unit = torchvision.models.shufflenetv2.InvertedResidual
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1, bias=False), nn.BatchNorm2d(24),
                                  nn.ReLU())
        self.units = nn.Sequential(unit(24, 116, 2), unit(116, 116, 1), unit(116, 116, 1))
        self.fc = nn.Linear(116, 10)

    def forward(self, x):
        return self.fc(self.units(self.stem(x)).mean([2, 3]))


def _randn(*shape):
    return lambda: {"input": torch.randn(*shape, generator=_gen())}


# name -> (builder, opset, inputs)
SMALL = {
    "keyword_spotter": (KeywordSpotter, 13, _randn(1, 1, 4000)),
    "unet": (UNet, 13, _randn(1, 3, 64, 64)),
    "dcgan_generator": (Generator, 13, _randn(2, 16, 1, 1)),
    "aspp": (Aspp, 13, _randn(1, 3, 28, 28)),
    "tabular_mlp": (TabularMlp, 14, _randn(8, 40)),
    "gpt_decoder": (Gpt, 14, lambda: {"input": torch.randint(0, 512, (1, 32), generator=_gen())}),
    "llama_decoder": (Llama, 14,
                      lambda: {"input": torch.randint(0, 100, (1, 16), generator=_gen())}),
    "sequence_tagger": (SequenceTagger, 13, _randn(2, 16, 24)),
    "style_net": (StyleNet, 13, _randn(1, 3, 32, 32)),
    "super_resolution": (SuperResolution, 13, _randn(1, 1, 24, 24)),
    "channel_split": (ChannelSplitNet, 13, _randn(1, 3, 30, 34)),
}


_tv = extra_models._tv  # a torchvision builder with random weights

TORCHVISION = {
    "resnet34": (_tv("resnet34"), 13),
    "wide_resnet50_2": (_tv("wide_resnet50_2"), 13),
    "resnext101_32x8d": (_tv("resnext101_32x8d"), 13),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), 14),
    "efficientnet_b1": (_tv("efficientnet_b1"), 14),
    "efficientnet_v2_s": (_tv("efficientnet_v2_s"), 14),
    "regnet_x_800mf": (_tv("regnet_x_800mf"), 13),
    "regnet_y_1_6gf": (_tv("regnet_y_1_6gf"), 13),
    "squeezenet1_0": (_tv("squeezenet1_0"), 13),
    "mnasnet1_0": (_tv("mnasnet1_0"), 13),
    "shufflenet_v2_x1_0": (_tv("shufflenet_v2_x1_0"), 13),
    "densenet169": (_tv("densenet169"), 13),
    "inception_v3": (_tv("inception_v3", aux_logits=False, init_weights=True), 13),
    "alexnet": (_tv("alexnet"), 13),
    "vgg16_bn": (_tv("vgg16_bn"), 13),
    "convnext_small": (_tv("convnext_small"), 17),
    "swin_t": (_tv("swin_t"), 17),
    "vit_b_32": (_tv("vit_b_32"), 17),
    "deeplabv3_mobilenet_v3_large": (
        lambda: extra_models.OutOnly(torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, aux_loss=False)),
        13,
    ),
}


def randomize_norm_stats(model, gen):
    """generate.randomize_norm_stats, for BatchNorm1d, GroupNorm, InstanceNorm2d and RmsNorm
    (which has no bias) too."""
    generate.randomize_norm_stats(model, gen)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RmsNorm):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            if isinstance(m, (nn.GroupNorm, nn.InstanceNorm2d)) and m.weight is not None:
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
            if isinstance(m, nn.BatchNorm1d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)


def build_small(name):
    torch.manual_seed(generate.SEED)
    builder, opset, inputs = SMALL[name]
    model = builder()
    randomize_norm_stats(model, _gen())
    model.eval()
    inputs = inputs()
    if isinstance(model, Llama):
        # Its top-k ids and argmax must match exactly. A result within the e2e tolerance (each
        # logit off by at most 1e-4 of max |logits|) ranks a row's top 6 logits as PyTorch does
        # only if they are more than twice that apart: refuse inputs where they are not.
        with torch.no_grad():
            logits = model(*inputs.values())[0]
        top = logits.topk(6, dim=-1).values
        gap = float((top[..., :-1] - top[..., 1:]).min() / logits.abs().max())
        assert gap > 2e-4, f"{name}: two of the top 6 logits only {gap:.1e} (relative) apart"
    return model, inputs, opset


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--set", choices=["small", "torchvision"], default="small")
    p.add_argument("--models", help="comma-separated names (default: the whole set)")
    args = p.parse_args()
    models = SMALL if args.set == "small" else TORCHVISION
    names = [m for m in (args.models or ",".join(models)).split(",") if m]
    unknown = [m for m in names if m not in models]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} in set {args.set}; "
                f"known: {', '.join(models)}")
    # extra_models.write builds through its MODELS table and build_model: point both here.
    extra_models.MODELS.update({k: v[:2] for k, v in models.items()})
    if args.set == "small":
        extra_models.build_model = build_small
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        extra_models.write(name, args.out)


if __name__ == "__main__":
    main()
