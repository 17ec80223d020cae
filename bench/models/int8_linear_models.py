#!/usr/bin/python3
"""Writes small QDQ models of a transformer's quantized matrix products, to compare kiln's
int8 path with ONNX Runtime on the same file (qdq_check.py):

  int8_linear_models.py --out DIR
  for m in DIR/*; do qdq_check.py --kiln build/kiln $m --max-units 1; done

Each DIR/<name>/ has model.onnx (opset 13), input.npz and info.json (output_scale 0: the
output is the uint8 value of the final QuantizeLinear, compared in its own units):

  gemm_dq_bias      x [8, 61] -> DQ, Gemm(transB=1, DQ(w s8 per row), DQ(b int32)) -> Q
  gemm_float_bias   x [8, 61] -> DQ, Gemm(DQ(w s8 per column), C float [37]) -> Q
  matmul_add_bias   x [2, 9, 61] -> DQ, MatMul(DQ(w s8 per column)) -> Add(float [37]) -> Q
                    (a Linear layer as torch.onnx writes it for inputs of rank 3)
  attention_u8u8    DQ(a u8 [1, 4, 19, 24]) x DQ(b u8 [1, 4, 24, 23]) -> MatMul -> Q
  attention_u8s8    the same with b int8

Needs Debian's python3-onnx and python3-numpy.
"""
import argparse
import json
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

SEED = 20261124


def q_params(name, scale, zp, dtype):
    return [numpy_helper.from_array(np.array(scale, np.float32), name + ".scale"),
            numpy_helper.from_array(np.array(zp, dtype), name + ".zp")]


def qdq(name, x, scale, zp, dtype, nodes, inits):
    inits += q_params(name, scale, zp, dtype)
    nodes.append(helper.make_node("QuantizeLinear", [x, name + ".scale", name + ".zp"],
                                  [name + ".q"], name=name + "_q"))
    nodes.append(helper.make_node("DequantizeLinear", [name + ".q", name + ".scale", name + ".zp"],
                                  [name + ".f"], name=name + "_dq"))
    return name + ".f"


def weight(rng, shape, axis, nodes, inits):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    ws = rng.uniform(0.002, 0.01, shape[axis]).astype(np.float32)
    inits += [numpy_helper.from_array(w, "w"), numpy_helper.from_array(ws, "w.scale"),
              numpy_helper.from_array(np.zeros(shape[axis], np.int8), "w.zp")]
    nodes.append(helper.make_node("DequantizeLinear", ["w", "w.scale", "w.zp"], ["w.f"],
                                  name="w_dq", axis=axis))
    return ws


def output(y, scale, k, nodes, inits):
    # Output scale: the products spread over some tens of quanta.
    inits += q_params("y", scale * np.sqrt(k), 128, np.uint8)
    nodes.append(helper.make_node("QuantizeLinear", [y, "y.scale", "y.zp"], ["y"], name="y_q"))


def linear(kind, rng):
    M, K, N = 8, 61, 37
    nodes, inits = [], []
    xshape = [2, 9, K] if kind == "matmul_add_bias" else [M, K]
    xf = qdq("x", "x", 2 / 255, 120, np.uint8, nodes, inits)
    xs = np.float32(2 / 255)
    if kind == "gemm_dq_bias":
        ws = weight(rng, [N, K], 0, nodes, inits)
        b = rng.integers(-3000, 3000, N).astype(np.int32)
        inits += [numpy_helper.from_array(b, "b"),
                  numpy_helper.from_array((xs * ws).astype(np.float32), "b.scale"),
                  numpy_helper.from_array(np.zeros(N, np.int32), "b.zp")]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "b.scale", "b.zp"], ["b.f"],
                                      name="b_dq", axis=0))
        nodes.append(helper.make_node("Gemm", [xf, "w.f", "b.f"], ["mm"], name="gemm", transB=1))
    elif kind == "gemm_float_bias":
        weight(rng, [K, N], 1, nodes, inits)
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, N).astype(np.float32), "c"))
        nodes.append(helper.make_node("Gemm", [xf, "w.f", "c"], ["mm"], name="gemm"))
    else:
        weight(rng, [K, N], 1, nodes, inits)
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, N).astype(np.float32), "c"))
        nodes.append(helper.make_node("MatMul", [xf, "w.f"], ["m0"], name="matmul"))
        nodes.append(helper.make_node("Add", ["c", "m0"], ["mm"], name="add"))
    output("mm", 0.006 * 2 / 255 * 40, K, nodes, inits)
    out_shape = xshape[:-1] + [N]
    return nodes, inits, {"x": xshape}, out_shape


def attention(kind, rng):
    B, H, M, K, N = 1, 4, 19, 24, 23
    nodes, inits = [], []
    af = qdq("a", "a", 2 / 255, 131, np.uint8, nodes, inits)
    if kind == "attention_u8u8":
        bf = qdq("b", "b", 2 / 255, 117, np.uint8, nodes, inits)
    else:
        bf = qdq("b", "b", 2 / 255, 3, np.int8, nodes, inits)
    nodes.append(helper.make_node("MatMul", [af, bf], ["mm"], name="matmul"))
    output("mm", 0.03 / 8, K, nodes, inits)
    return nodes, inits, {"a": [B, H, M, K], "b": [B, H, K, N]}, [B, H, M, N]


MODELS = {"gemm_dq_bias": linear, "gemm_float_bias": linear, "matmul_add_bias": linear,
          "attention_u8u8": attention, "attention_u8s8": attention}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    for i, (name, make) in enumerate(MODELS.items()):
        rng = np.random.default_rng(SEED + i)
        nodes, inits, inputs, out_shape = make(name, rng)
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
            [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        save(model, os.path.join(d, "model.onnx"))
        np.savez(os.path.join(d, "input.npz"),
                 **{k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in inputs.items()})
        with open(os.path.join(d, "info.json"), "w") as f:
            json.dump({"output_scale": 0}, f)
        print(f"{name}: {d}")


if __name__ == "__main__":
    main()
