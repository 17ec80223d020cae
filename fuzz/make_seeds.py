#!/usr/bin/env python3
"""Seed corpora for kiln's fuzz targets (scripts/fuzz.sh).

  make_seeds.py --kiln build/kiln --out DIR

writes DIR/onnx_import/*.onnx (small models covering the operators kiln
imports), DIR/npz/*.npz (every dtype, compressed or not, odd shapes),
DIR/package/*.tar (kiln build of three of those models, one with a host section; the first is the seed
package the package fuzzer loads once) and DIR/records_import/*.jsonl (a
short kiln tune's records, exported, plus hand-made lines).
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


def init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(dtype), name)


def model(name, nodes, inputs, outputs, inits, opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def onnx_models():
    """Small graphs: convolutions, dense, attention-like, pooling, shapes."""
    yield "conv_relu_gemm", model("conv_relu_gemm", [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], group=4),
        helper.make_node("Flatten", ["c2"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ], [vi("x", [1, 4, 6, 6])], [vi("y", [1, 5])],
        [init("w1", [8, 4, 3, 3]), init("b1", [8]), init("w2", [8, 2, 1, 1]),
         init("w3", [5, 288]), init("b3", [5])])
    yield "depthwise_pool_bn", model("depthwise_pool_bn", [
        helper.make_node("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Clip", ["n", "lo", "hi"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], ceil_mode=1),
        helper.make_node("GlobalAveragePool", ["p"], ["y"]),
    ], [vi("x", [1, 4, 9, 9])], [vi("y", [1, 4, 1, 1])],
        [init("w", [4, 1, 3, 3]), init("s", [4]), init("b", [4]), init("m", [4]),
         numpy_helper.from_array(np.abs(RNG.standard_normal(4)).astype(np.float32) + 1, "v"),
         numpy_helper.from_array(np.array(0, np.float32), "lo"),
         numpy_helper.from_array(np.array(6, np.float32), "hi")])
    yield "attention", model("attention", [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Div", ["s", "scale"], ["sd"]),
        helper.make_node("Softmax", ["sd"], ["a"], axis=-1),
        helper.make_node("MatMul", ["a", "x"], ["o"]),
        helper.make_node("ReduceMean", ["o"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["o", "mu"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd2"]),
        helper.make_node("Div", ["d", "sd2"], ["n"]),
        helper.make_node("Erf", ["n"], ["e"]),
        helper.make_node("Mul", ["n", "e"], ["y"]),
    ], [vi("x", [1, 6, 8])], [vi("y", [1, 6, 8])],
        [init("wq", [8, 8]), init("wk", [8, 8]),
         numpy_helper.from_array(np.array(2.8, np.float32), "scale"),
         numpy_helper.from_array(np.array(1e-5, np.float32), "eps")])
    yield "shapes", model("shapes", [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "minus1"], ["ns"], axis=0),
        helper.make_node("Reshape", ["x", "ns"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
        helper.make_node("Concat", ["u", "u"], ["c"], axis=1),
        helper.make_node("Slice", ["c", "st", "en", "ax"], ["sl"]),
        helper.make_node("Squeeze", ["sl", "ax"], ["y"]),
    ], [vi("x", [2, 3, 4])], [vi("y", [2, 12])],
        [numpy_helper.from_array(np.array([0], np.int64), "i"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
         numpy_helper.from_array(np.array([1], np.int64), "ax"),
         numpy_helper.from_array(np.array([0], np.int64), "st"),
         numpy_helper.from_array(np.array([1], np.int64), "en")])
    yield "resize_pad", model("resize_pad", [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
        helper.make_node("Resize", ["p", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("AveragePool", ["r"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["a"], ["g"]),
        helper.make_node("Mul", ["a", "g"], ["y"]),
    ], [vi("x", [1, 2, 5, 5])], [vi("y", [1, 2, 14, 14])],
        [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
         numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])

    # The paths the import grew for ONNX's whole operator set: an opset-7 model
    # (ONNX's version converter), a function-defined operator (its body
    # inlined), Einsum (its extents), and gathers, top-k and a cumulative sum.
    yield "opset7_upsample_bn", model("opset7_upsample_bn", [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Upsample", ["n"], ["y"], scales=[1.0, 1.0, 2.0, 2.0]),
    ], [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 6, 6])],
        [init("s", [2]), init("b", [2]), init("m", [2]),
         numpy_helper.from_array(np.ones(2, np.float32), "v")], opset=7)
    yield "nll_einsum_topk", model("nll_einsum_topk", [
        helper.make_node("Einsum", ["x", "w"], ["e"], equation="bi,ij->bj"),
        helper.make_node("LogSoftmax", ["e"], ["ls"], axis=1),
        helper.make_node("NegativeLogLikelihoodLoss", ["ls", "t"], ["loss"], reduction="none"),
        helper.make_node("TopK", ["e", "k"], ["tv", "ti"], axis=1),
        helper.make_node("GatherElements", ["e", "ti"], ["g"], axis=1),
        helper.make_node("CumSum", ["g", "ax"], ["y"]),
    ], [vi("x", [3, 4]), vi("t", [3], TensorProto.INT64)],
        [vi("loss", [3]), vi("y", [3, 2]), vi("tv", [3, 2])],
        [init("w", [4, 5]), numpy_helper.from_array(np.array([2], np.int64), "k"),
         numpy_helper.from_array(np.array(1, np.int64), "ax")])
    # Run-time shapes (the executor's host region): NonZero after a compiled
    # Relu, a Reshape to a shape fed at run time, NMS and a Gather of its picks.
    yield "run_time_shapes", model("run_time_shapes", [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Reshape", ["r", "s"], ["y"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max"], ["sel"]),
        helper.make_node("Gather", ["sel", "two"], ["picked"], axis=1),
    ], [vi("x", [2, 6]), vi("s", [2], TensorProto.INT64), vi("boxes", [1, 4, 4]),
        vi("scores", [1, 1, 4])],
        [vi("nz", [2, "n"], TensorProto.INT64), vi("y", ["a", "b"]),
         vi("picked", ["m"], TensorProto.INT64)],
        [numpy_helper.from_array(np.array([2], np.int64), "max"),
         numpy_helper.from_array(np.array(2, np.int64), "two")])


def npz_files():
    arrays = {
        "f32": RNG.standard_normal((2, 3)).astype(np.float32),
        "i64": np.arange(5, dtype=np.int64),
        "u8": np.arange(7, dtype=np.uint8).reshape(7, 1),
        "b": np.array([True, False]),
        "f16": np.ones((1, 2, 1), np.float16),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "fortran": np.asfortranarray(RNG.standard_normal((3, 2)).astype(np.float32)),
        "big_endian": np.arange(3, dtype=">f4"),
    }
    for name, a in arrays.items():
        for compressed in (False, True):
            buf = io.BytesIO()
            (np.savez_compressed if compressed else np.savez)(buf, **{name: a})
            yield f"{name}{'_z' if compressed else ''}", buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, **{k: v for k, v in arrays.items() if k in ("f32", "i64", "u8")})
    yield "three", buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True, help="the kiln binary (package and records seeds)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dirs = {t: os.path.join(a.out, t) for t in ("onnx_import", "npz", "package", "records_import")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    models = {}
    for name, m in onnx_models():
        path = os.path.join(dirs["onnx_import"], name + ".onnx")
        onnx.save(m, path)
        models[name] = path
    for name, data in npz_files():
        with open(os.path.join(dirs["npz"], name + ".npz"), "wb") as f:
            f.write(data)
    for name in ("conv_relu_gemm", "depthwise_pool_bn", "run_time_shapes"):
        subprocess.run([a.kiln, "build", models[name], "-o",
                        os.path.join(dirs["package"], name + ".tar")],
                       check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "seed.db")
        subprocess.run([a.kiln, "tune", models["conv_relu_gemm"], "--tuning-log", db,
                        "--trials", "2", "--tuner", "random", "--repeat", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([a.kiln, "records", "export", db, "-o",
                        os.path.join(dirs["records_import"], "tuned.jsonl")],
                       check=True, stdout=subprocess.DEVNULL)
    lines = open(os.path.join(dirs["records_import"], "tuned.jsonl")).read().splitlines()
    with open(os.path.join(dirs["records_import"], "one.jsonl"), "w") as f:
        f.write(lines[0] + "\n")
    with open(os.path.join(dirs["records_import"], "other_template.jsonl"), "w") as f:
        f.write('{"workload":"other.x86|[1]","target":"llvm -mcpu=x","config":{"knobs":{}},'
                '"times_ms":[1.0],"error":"ok","error_message":"","timestamp":1700000000,'
                '"kiln_version":"0.1.0","gflops":1.0}\n')
    print(f"make_seeds: {sum(len(os.listdir(d)) for d in dirs.values())} seeds in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
