#!/usr/bin/python3
"""Writes quantized (QDQ) ONNX models for kiln's int8 path, in ONNX Runtime's QDQ format.

For each model this writes DIR/<name>/:
  model.onnx   the QDQ model
  input.npz    one array per ONNX input (random, a seed apart from the calibration data)
  info.json    the output's quantization scale (to count differences in quantized units)

The QDQ format is ORT's quantizer's default (docs/quantization.md):
  - activations: uint8, asymmetric, per tensor; range [min(0, lo), max(0, hi)] over the
    calibration runs (MinMax), scale = range / 255, zero point = round(-min / scale);
  - weights: int8, symmetric (zero point 0), per output channel (axis 0 of a Conv weight and of
    a transB=1 Gemm weight, axis 1 of a [K, N] MatMul weight), scale = max|w| / 127
    (--reduce-range: max|w| / 64, weights in [-64, 64], ORT's reduce_range);
  - biases: int32, zero point 0, scale = x_scale * w_scale[c];
  - a QuantizeLinear -> DequantizeLinear pair on every input of a Conv / Gemm / MatMul with a
    constant weight and on its output, after a Relu / Clip that is its only reader (ORT fuses
    those into the op before quantizing), so kiln's fold_qdq sees DQ -> op [-> Relu] -> Q.
The float models are bench/models/generate.py's (exported here with BatchNorm fused into the
convolutions, as ORT's quantizer sees them after its optimizer), plus `tiny_qdq` (a few
layers, for the tests) and, with --models torch_qlinear, a PyTorch-quantized model exported by
torch.onnx (QLinearConv / QLinearMatMul nodes, QOperator format).

Calibration: the float model runs on --calib random inputs in ONNX Runtime (bench/peers/ort_run.py
in the peers' venv bench/.venv, every calibrated tensor made a graph output); min and max per
tensor, in numpy.

Usage: quantized_models.py --out DIR [--models tiny_qdq,resnet18,mobilenet_v2,encoder]
                           [--calib 4] [--reduce-range]
Needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy, and onnxruntime
in the peers' venv (scripts/peers-venv.sh; bench/models/README.md).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

try:
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    import torch
    import torch.nn as nn
except ImportError as e:
    sys.exit(f"quantized_models.py: missing Python package ({e}); run scripts/install-deps.sh")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402  (the zoo's model builders)
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import ort_run  # noqa: E402  (bench/peers: ONNX Runtime in the peers' venv)

ZOO = ["resnet18", "mobilenet_v2", "encoder"]
# resnet50 on request (bench/models/int8_bench.py): not in the default set.
ALL = ["tiny_qdq"] + ZOO + ["resnet50", "torch_qlinear", "tiny_qoperator", "tiny_dynamic"]
SEED = 20261124


class TinyQ(nn.Module):
    """Every folded pattern once: Conv+BN+Relu, a residual Add, MaxPool, a depthwise Conv with
    ReLU6 (Clip), a 1x1 Conv, GlobalAveragePool, a bias-free Linear (MatMul) + Relu, Linear (Gemm)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 32, 1)
        self.fc0 = nn.Linear(32, 32, bias=False)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(y + torch.relu(self.conv2(y)))
        y = self.pool(y)
        y = torch.clamp(self.dw(y), 0.0, 6.0)
        y = self.pw(y).mean(dim=(2, 3))
        return self.fc(torch.relu(self.fc0(y)))


def build(name):
    if name == "tiny_qdq":
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED + 1)
        model = TinyQ()
        with torch.no_grad():
            generate.randomize_norm_stats(model, gen)
        model.eval()
        return model, {"input": torch.randn(1, 3, 16, 16, generator=gen)}, 13
    model, inputs = generate.build_model(name)
    opset = 17 if name in generate.ENCODER_MODELS else 13
    return model, inputs, opset


def export_float(model, inputs, path, opset):
    names = list(inputs)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs[n] for n in names), path, input_names=names,
                          output_names=["output_0"], opset_version=opset,
                          do_constant_folding=True, training=torch.onnx.TrainingMode.EVAL)
    return onnx.load(path)


def random_inputs(inputs, seed):
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in inputs.items():
        if v.dtype == torch.int64:
            out[k] = torch.randint(0, generate.ENC_VOCAB, tuple(v.shape), generator=gen).numpy()
        else:
            out[k] = torch.randn(*v.shape, generator=gen).numpy()
    return out


def run_ort(model_path, inputs, work):
    """Every output of the model on `inputs` through ONNX Runtime (bench/peers/ort_run.py, in
    the peers' venv), by output name."""
    npz = os.path.join(work, "ort_in.npz")
    out = os.path.join(work, "ort_out.npz")
    np.savez(npz, **inputs)
    cmd = ort_run.command("run", model_path, npz, out)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"quantized_models.py: {' '.join(cmd)} failed:\n{r.stderr}")
    names = [o.name for o in onnx.load(model_path, load_external_data=False).graph.output]
    with np.load(out) as got:
        return {n: got[f"output_{i}"] for i, n in enumerate(names)}


# ---- the QDQ rewrite ----------------------------------------------------------------------------

def quantizable(node, inits):
    """The weight input index and its channel axis for a Conv / Gemm / MatMul with a constant
    weight, else None."""
    if node.op_type == "Conv" and node.input[1] in inits:
        return 1, 0
    if node.op_type == "Gemm" and node.input[1] in inits:
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 1, 0 if trans_b else 1
    if node.op_type == "MatMul" and node.input[1] in inits and inits[node.input[1]].ndim == 2:
        return 1, 1
    return None


def activation_targets(graph, inits):
    """Tensors that get a Q -> DQ pair: inputs and outputs of the quantized ops (the output after
    a Relu / Clip that is its only reader). A MatMul whose only reader is an Add of a constant
    (a Linear layer's bias, as exporters write nn.Linear on 3-D inputs) is quantized after the
    Add, as ONNX Runtime's quantizer does, so that the bias joins the integer product."""
    readers = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    targets = []
    for n in graph.node:
        if not quantizable(n, inits):
            continue
        out = n.output[0]
        r = readers.get(out, [])
        if (n.op_type == "MatMul" and len(r) == 1 and r[0].op_type == "Add"
                and any(i in inits for i in r[0].input if i != out)):
            out = r[0].output[0]
            r = readers.get(out, [])
        if len(r) == 1 and r[0].op_type in ("Relu", "Clip"):
            out = r[0].output[0]
        for t in (n.input[0], out):
            if t not in targets:
                targets.append(t)
    return targets


def act_params(lo, hi):
    lo, hi = min(0.0, lo), max(0.0, hi)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zp


def quantize_model(proto, ranges, weight_max=127):
    g = proto.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    outputs = {o.name for o in g.output}
    new_inits, new_nodes = [], []
    act_scale = {}
    # Activations: Q -> DQ after the producer; readers (or the graph output) see the DQ.
    rename = {}
    post = {}  # tensor -> nodes to insert after its producer (or at the start for inputs)
    for t in activation_targets(g, inits):
        scale, zp = act_params(ranges[t]["min"], ranges[t]["max"])
        act_scale[t] = scale
        s, z = f"{t}/scale", f"{t}/zero_point"
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s),
                      numpy_helper.from_array(np.array(zp, np.uint8), z)]
        src = f"{t}/float" if t in outputs else t
        dq = t if t in outputs else f"{t}/dq"
        post[t] = [helper.make_node("QuantizeLinear", [src, s, z], [f"{t}/q"], name=f"{t}/Q"),
                   helper.make_node("DequantizeLinear", [f"{t}/q", s, z], [dq], name=f"{t}/DQ")]
        if t in outputs:
            rename[t] = src  # the producer writes t/float
        else:
            rename[t] = dq  # readers read t/dq
    # Weights and biases: int8 / int32 initializers behind a DequantizeLinear per node.
    for k, n in enumerate(g.node):
        q = quantizable(n, inits)
        if not q:
            continue
        wi, axis = q
        w = inits[n.input[wi]].astype(np.float32)
        red = tuple(d for d in range(w.ndim) if d != axis)
        ws = (np.abs(w).max(axis=red) / float(weight_max)).astype(np.float32)
        ws[ws == 0] = 1.0
        shape = [1] * w.ndim
        shape[axis] = -1
        wq = np.clip(np.round(w / ws.reshape(shape)), -weight_max, weight_max).astype(np.int8)
        base = f"{n.name or n.op_type + str(k)}"
        new_inits += [numpy_helper.from_array(wq, f"{base}/w_q"),
                      numpy_helper.from_array(ws, f"{base}/w_scale"),
                      numpy_helper.from_array(np.zeros(ws.shape, np.int8), f"{base}/w_zp")]
        pre = [helper.make_node("DequantizeLinear", [f"{base}/w_q", f"{base}/w_scale",
                                                    f"{base}/w_zp"], [f"{base}/w"],
                                name=f"{base}/DQ_w", axis=axis)]
        n.input[wi] = f"{base}/w"
        if len(n.input) > 2 and n.input[2] in inits and n.op_type in ("Conv", "Gemm"):
            b = inits[n.input[2]].astype(np.float32)
            bs = (act_scale[n.input[0]] * ws).astype(np.float32)
            bq = np.round(b / bs).astype(np.int32)
            new_inits += [numpy_helper.from_array(bq, f"{base}/b_q"),
                          numpy_helper.from_array(bs, f"{base}/b_scale"),
                          numpy_helper.from_array(np.zeros(bs.shape, np.int32), f"{base}/b_zp")]
            pre.append(helper.make_node("DequantizeLinear", [f"{base}/b_q", f"{base}/b_scale",
                                                            f"{base}/b_zp"], [f"{base}/b"],
                                        name=f"{base}/DQ_b", axis=0))
            n.input[2] = f"{base}/b"
        new_nodes.append(("before", n.name, pre))
    # Rebuild the node list: weight DQs before their node, activation QDQs after the producer.
    before = {name: pre for _, name, pre in new_nodes}
    nodes = []
    for t in g.input:
        if t.name in post:
            nodes += post[t.name]
    for n in g.node:
        for i, name in enumerate(n.input):
            if name in rename and rename[name].endswith("/dq"):
                n.input[i] = rename[name]
        nodes += before.get(n.name, [])
        for i, name in enumerate(n.output):
            if name in rename and rename[name].endswith("/float"):
                n.output[i] = rename[name]
        nodes.append(n)
        for name in list(n.output):
            key = name[:-len("/float")] if name.endswith("/float") else name
            if key in post:
                nodes += post[key]
    # The QDQ nodes themselves read the original tensor, not its /dq.
    for node in nodes:
        if node.op_type == "QuantizeLinear" and node.input[0].endswith("/dq"):
            node.input[0] = node.input[0][:-len("/dq")]
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    return act_scale


def name_nodes(proto):
    for k, n in enumerate(proto.graph.node):
        if not n.name:
            n.name = f"{n.op_type}_{k}"


def make_qdq(name, out_dir, n_calib, weight_max=127):
    model, inputs, opset = build(name)
    final = os.path.join(out_dir, name)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir)
    try:
        proto = export_float(model, inputs, os.path.join(tmp, "float.onnx"), opset)
        name_nodes(proto)
        inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
        targets = activation_targets(proto.graph, inits)
        # Calibration: the float model with every target as an extra output.
        calib = onnx.ModelProto()
        calib.CopyFrom(proto)
        have = {o.name for o in calib.graph.output}
        for t in targets:
            if t not in have:
                calib.graph.output.append(helper.make_empty_tensor_value_info(t))
        calib_path = os.path.join(tmp, "calib.onnx")
        onnx.save(calib, calib_path)
        ranges = {}
        for c in range(n_calib):
            r = run_ort(calib_path, random_inputs(inputs, SEED + 100 + c), tmp)
            for t in targets:
                lo, hi = float(r[t].min()), float(r[t].max())
                old = ranges.get(t, {"min": lo, "max": hi})
                ranges[t] = {"min": min(lo, old["min"]), "max": max(hi, old["max"])}
        scales = quantize_model(proto, ranges, weight_max)
        onnx.checker.check_model(proto, full_check=True)
        onnx.save(proto, os.path.join(tmp, "model.onnx"))
        np.savez(os.path.join(tmp, "input.npz"), **random_inputs(inputs, SEED + 7))
        out = proto.graph.output[0].name
        with open(os.path.join(tmp, "info.json"), "w") as f:
            json.dump({"output_scale": float(scales.get(out, 0.0)), "opset": opset}, f)
        # float.onnx stays: the fp32 side of int8_bench.py's comparison.
        for junk in ("calib.onnx", "ort_in.npz", "ort_out.npz"):
            if os.path.exists(os.path.join(tmp, junk)):
                os.remove(os.path.join(tmp, junk))
        os.chmod(tmp, 0o755)
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ops = {}
    for n in proto.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"{name}: opset {opset}, {len(proto.graph.node)} nodes: " +
          " ".join(f"{k} {v}" for k, v in sorted(ops.items())))


def make_torch_qlinear(out_dir):
    """A PyTorch-quantized model (torch.ao.quantization, eager mode, qnnpack) exported with
    torch.onnx: QuantizeLinear, QLinearConv, ... (QOperator format)."""
    import torch.ao.quantization as tq

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = tq.QuantStub()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
            self.dequant = tq.DeQuantStub()

        def forward(self, x):
            return self.dequant(self.conv2(self.relu(self.conv(self.quant(x)))))

    torch.manual_seed(SEED)
    torch.backends.quantized.engine = "qnnpack"  # Debian's torch has no FBGEMM
    m = Net().eval()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.fuse_modules(m, [["conv", "relu"]], inplace=True)
    tq.prepare(m, inplace=True)
    gen = torch.Generator().manual_seed(SEED + 1)
    for _ in range(4):
        m(torch.randn(1, 3, 16, 16, generator=gen))
    tq.convert(m, inplace=True)
    final = os.path.join(out_dir, "torch_qlinear")
    os.makedirs(final, exist_ok=True)
    x = torch.randn(1, 3, 16, 16, generator=gen)
    torch.onnx.export(m, (x,), os.path.join(final, "model.onnx"), input_names=["input"],
                      output_names=["output_0"], opset_version=13)
    np.savez(os.path.join(final, "input.npz"), input=x.numpy())
    scale = float(m.conv2.scale)
    with open(os.path.join(final, "info.json"), "w") as f:
        json.dump({"output_scale": scale, "opset": 13}, f)
    proto = onnx.load(os.path.join(final, "model.onnx"))
    print("torch_qlinear: " + " ".join(sorted({n.op_type for n in proto.graph.node})))


def write_handmade(name, out_dir, graph, inputs, output_scale):
    """Saves a hand-written opset-13 graph with its input and info.json."""
    final = os.path.join(out_dir, name)
    os.makedirs(final, exist_ok=True)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, os.path.join(final, "model.onnx"))
    np.savez(os.path.join(final, "input.npz"), **inputs)
    with open(os.path.join(final, "info.json"), "w") as f:
        json.dump({"output_scale": output_scale, "opset": 13}, f)
    print(f"{name}: " + " ".join(n.op_type for n in graph.node))


def make_tiny_qoperator(out_dir):
    """ORT's QOperator format, written by hand: QuantizeLinear -> QLinearConv (per-channel s8
    weights, int32 bias, stride 2) -> Reshape -> QLinearMatMul (per-column s8 weights) ->
    DequantizeLinear."""
    rng = np.random.default_rng(SEED)
    c = lambda name, a: numpy_helper.from_array(a, name)  # noqa: E731
    m, k = 8, 8 * 4 * 4
    inits = [
        c("xs", np.array(0.02, np.float32)), c("xz", np.array(118, np.uint8)),
        c("w", rng.integers(-127, 128, (m, 3, 3, 3)).astype(np.int8)),
        c("ws", rng.uniform(0.002, 0.01, m).astype(np.float32)),
        c("wz", np.zeros(m, np.int8)),
        c("ys", np.array(0.05, np.float32)), c("yz", np.array(0, np.uint8)),
        c("b", rng.integers(-2000, 2000, m).astype(np.int32)),
        c("shape", np.array([1, k], np.int64)),
        c("m2", rng.integers(-127, 128, (k, 10)).astype(np.int8)),
        c("m2s", rng.uniform(0.002, 0.01, 10).astype(np.float32)),
        c("m2z", np.zeros(10, np.int8)),
        c("os", np.array(0.1, np.float32)), c("oz", np.array(128, np.uint8)),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["input", "xs", "xz"], ["xq"], name="q_in"),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                         ["yq"], name="qconv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Reshape", ["yq", "shape"], ["flat"], name="flatten"),
        helper.make_node("QLinearMatMul", ["flat", "ys", "yz", "m2", "m2s", "m2z", "os", "oz"],
                         ["oq"], name="qmatmul"),
        helper.make_node("DequantizeLinear", ["oq", "os", "oz"], ["output_0"], name="dq_out"),
    ]
    g = helper.make_graph(nodes, "tiny_qoperator",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("output_0", TensorProto.FLOAT, [1, 10])],
                          inits)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    write_handmade("tiny_qoperator", out_dir, g, {"input": x}, 0.1)


def make_tiny_dynamic(out_dir):
    """ORT's dynamic quantization, written by hand: DynamicQuantizeLinear -> MatMulInteger (with
    per-column weight zero points) -> Cast -> Mul by x_scale * w_scale (a float output), and
    DynamicQuantizeLinear -> ConvInteger (an int32 output)."""
    rng = np.random.default_rng(SEED + 1)
    c = lambda name, a: numpy_helper.from_array(a, name)  # noqa: E731
    inits = [
        c("w", rng.integers(-127, 128, (16, 6)).astype(np.int8)),
        c("wz", rng.integers(-3, 4, 6).astype(np.int8)),
        c("ws", np.array(0.01, np.float32)),
        c("k", rng.integers(0, 256, (4, 2, 3, 3)).astype(np.uint8)),
        c("kz", np.array(128, np.uint8)),  # ORT 1.30: per-tensor only for ConvInteger
    ]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["a"], ["aq", "as", "az"], name="dq_a"),
        helper.make_node("MatMulInteger", ["aq", "w", "az", "wz"], ["acc"], name="mmi"),
        helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["as", "ws"], ["s"], name="scale"),
        helper.make_node("Mul", ["accf", "s"], ["output_0"], name="rescale"),
        helper.make_node("DynamicQuantizeLinear", ["img"], ["iq", "is", "iz"], name="dq_img"),
        helper.make_node("ConvInteger", ["iq", "k", "iz", "kz"], ["output_1"], name="convi",
                         pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(nodes, "tiny_dynamic",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 16]),
                           helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("output_0", TensorProto.FLOAT, [5, 6]),
                           helper.make_tensor_value_info("output_1", TensorProto.INT32,
                                                         [1, 4, 6, 6])],
                          inits)
    inputs = {"a": rng.uniform(-2, 3, (5, 16)).astype(np.float32),
              "img": rng.standard_normal((1, 2, 6, 6)).astype(np.float32)}
    write_handmade("tiny_dynamic", out_dir, g, inputs, 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="tiny_qdq," + ",".join(ZOO),
                   help=f"comma-separated, from: {','.join(ALL)}")
    p.add_argument("--calib", type=int, default=4, help="random calibration inputs")
    p.add_argument("--reduce-range", action="store_true",
                   help="7-bit weights: [-64, 64], scale = max|w| / 64 (ORT's reduce_range; "
                        "kiln quantize --reduce-range)")
    args = p.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in ALL]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(ALL)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        if name == "torch_qlinear":
            make_torch_qlinear(args.out)
        elif name == "tiny_qoperator":
            make_tiny_qoperator(args.out)
        elif name == "tiny_dynamic":
            make_tiny_dynamic(args.out)
        else:
            make_qdq(name, args.out, args.calib, 64 if args.reduce_range else 127)


if __name__ == "__main__":
    main()
