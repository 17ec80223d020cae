#!/usr/bin/python3
"""One single-Conv ONNX model per distinct convolution of some models.

    conv_layers.py MODEL.onnx [MORE.onnx ...] --out DIR [--only-3x3-stride1]

Writes DIR/<C>x<H>x<W>_to_<OC>_k<KH>x<KW>_s<S>_p<pads>.onnx, each a graph
input [1, C, H, W] -> Conv (random weights and bias, fixed seed) -> output.
`kiln tune DIR/*.onnx` then tunes exactly those convolutions (with a 3x3
stride-1 one, both its direct and its Winograd implementation) without the
rest of the models' tasks: how bench/models/results/winograd-*.md tuned
the zoo's 3x3 convolutions.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference, TensorProto


def conv_shapes(path):
    """(C, H, W, OC, KH, KW, strides, pads, dilations, group) of every Conv."""
    model = shape_inference.infer_shapes(onnx.load(path))
    g = model.graph
    shapes = {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
        shapes[v.name] = dims
    inits = {i.name: list(i.dims) for i in g.initializer}
    out = []
    for n in g.node:
        if n.op_type != "Conv":
            continue
        x = shapes.get(n.input[0])
        w = inits.get(n.input[1])
        if not x or not w or len(x) != 4 or len(w) != 4:
            continue
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        out.append((x[1], x[2], x[3], w[0], w[2], w[3], tuple(a.get("strides", [1, 1])), pads,
                    tuple(a.get("dilations", [1, 1])), a.get("group", 1)))
    return out


def write_conv(path, c, h, w, oc, kh, kw, strides, pads, dilations, group, seed):
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((oc, c // group, kh, kw)) * 0.1).astype(np.float32)
    bias = (rng.standard_normal(oc) * 0.1).astype(np.float32)
    node = helper.make_node("Conv", ["input", "w", "b"], ["output"], strides=list(strides),
                            pads=list(pads), dilations=list(dilations), group=group)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, c, h, w])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, oc, None, None])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--only-3x3-stride1", action="store_true",
                   help="only the convolutions Winograd can take (3x3, stride 1, dilation 1, "
                        "groups 1)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    seen = set()
    for m in args.models:
        for s in conv_shapes(m):
            c, h, w, oc, kh, kw, strides, pads, dil, group = s
            if args.only_3x3_stride1 and ((kh, kw) != (3, 3) or strides != (1, 1) or
                                          dil != (1, 1) or group != 1):
                continue
            if s in seen:
                continue
            seen.add(s)
            name = "%dx%dx%d_to_%d_k%dx%d_s%d_p%s%s.onnx" % (
                c, h, w, oc, kh, kw, strides[0], "".join(map(str, pads)),
                "_g%d" % group if group != 1 else "")
            write_conv(os.path.join(args.out, name), c, h, w, oc, kh, kw, strides, pads, dil,
                       group, seed=len(seen))
            print(os.path.join(args.out, name))
    if not seen:
        print("conv_layers.py: no convolution found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
