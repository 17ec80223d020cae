"""Run-time shaped tensors (runtime/host_op.h) end to end against numpy:
operators whose output shapes depend on input values (NonZero, Unique,
Compress, NonMaxSuppression, TopK with a run-time k, Reshape/Expand/Tile/
Slice/Pad fed at run time), the operators that read them, a compiled static
part feeding them, and one package run many times at changing shapes."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import kiln

RNG = np.random.default_rng(11)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def load(tmp_path, nodes, inputs, outputs, inits=None, opset=13, shapes=None):
    inits = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return kiln.build(path, input_shapes=shapes).load()


def expect(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_nonzero_after_compiled_kernels_changes_size_per_run(tmp_path):
    # Relu(x - t) is compiled; NonZero of it and the Gather of the kept values
    # run on the host with a count that differs every run.
    m = load(tmp_path, [
        helper.make_node("Sub", ["x", "t"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Flatten", ["r"], ["flat"], axis=0),
        helper.make_node("Reshape", ["flat", "minus1"], ["line"]),
        helper.make_node("Transpose", ["nz"], ["coords"]),
    ], [vi("x", TP.FLOAT, [4, 37]), vi("t", TP.FLOAT, [1])],
        [vi("coords", TP.INT64, ["n", 2]), vi("r", TP.FLOAT, [4, 37])],
        inits={"minus1": np.array([-1], np.int64)})
    for threshold in [0.9, 0.5, 0.0, 2.0, 0.999]:  # 2.0: nothing is left
        x = RNG.random((4, 37), dtype=np.float32)
        t = np.array([threshold], np.float32)
        r = np.maximum(x - t, 0)
        expect(m.run(x=x, t=t), [np.transpose(np.nonzero(r)).astype(np.int64), r])


@pytest.mark.parametrize("shape", [[2, 3, 4], [24], [4, -1], [0, 3, 4], [2, 0], [0, -1]])
def test_reshape_to_a_run_time_shape(tmp_path, shape):
    m = load(tmp_path, [helper.make_node("Reshape", ["x", "s"], ["y"])],
             [vi("x", TP.FLOAT, [2, 12]), vi("s", TP.INT64, [len(shape)])],
             [vi("y", TP.FLOAT, ["a"] * len(shape))])
    x = RNG.random((2, 12), dtype=np.float32)
    s = np.array(shape, np.int64)
    want = x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(shape)])
    expect(m.run(x=x, s=s), [want])


def test_reshape_to_a_wrong_shape_is_a_clear_error(tmp_path):
    m = load(tmp_path, [helper.make_node("Reshape", ["x", "s"], ["y"])],
             [vi("x", TP.FLOAT, [2, 12]), vi("s", TP.INT64, [2])], [vi("y", TP.FLOAT, ["a", "b"])])
    with pytest.raises(Exception, match=r"node 'Reshape_0' \(Reshape\): cannot reshape"):
        m.run(x=np.zeros((2, 12), np.float32), s=np.array([5, 5], np.int64))
    # The module still works after a failed run.
    expect(m.run(x=np.ones((2, 12), np.float32), s=np.array([3, 8], np.int64)),
           [np.ones((3, 8), np.float32)])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8])
def test_expand_tile_slice_at_run_time(tmp_path, dtype):
    elem = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
    m = load(tmp_path, [
        helper.make_node("Expand", ["x", "shape"], ["e"]),
        helper.make_node("Tile", ["x", "reps"], ["t"]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
    ], [vi("x", elem, [3, 1, 5]), vi("shape", TP.INT64, [3]), vi("reps", TP.INT64, [3]),
        vi("starts", TP.INT64, [2]), vi("ends", TP.INT64, [2]), vi("axes", TP.INT64, [2]),
        vi("steps", TP.INT64, [2])],
        [vi("e", elem, ["a", "b", "c"]), vi("t", elem, ["a", "b", "c"]),
         vi("s", elem, ["a", "b", "c"])])
    x = (RNG.random((3, 1, 5)) * 100).astype(dtype)
    for shape, reps, starts, ends, axes, steps in [
        ([3, 4, 5], [1, 2, 3], [0, 1], [3, 5], [0, 2], [1, 2]),
        ([1, 7, 1], [2, 1, 1], [-1, 4], [-4, -100], [0, -1], [-1, -2]),
        ([3, 1, 5], [0, 3, 1], [1, 0], [100, 100], [2, 1], [3, 1]),
    ]:
        e, t, s = m.run(x=x, shape=np.array(shape, np.int64), reps=np.array(reps, np.int64),
                        starts=np.array(starts, np.int64), ends=np.array(ends, np.int64),
                        axes=np.array(axes, np.int64), steps=np.array(steps, np.int64))
        sl = [slice(None)] * 3
        for a, b, c, d in zip(starts, ends, axes, steps):
            sl[c] = slice(a, b, d)
        expect([e, t, s], [x * np.ones(shape, dtype), np.tile(x, reps), x[tuple(sl)]])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_with_run_time_pads(tmp_path, mode):
    m = load(tmp_path, [helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode=mode)],
             [vi("x", TP.FLOAT, [3, 4]), vi("pads", TP.INT64, [4]), vi("value", TP.FLOAT, [])],
             [vi("y", TP.FLOAT, ["a", "b"])])
    x = RNG.random((3, 4), dtype=np.float32)
    for pads in [[1, 2, 0, 1], [0, 0, 2, 3], [2, 1, 2, 1]]:
        width = ((pads[0], pads[2]), (pads[1], pads[3]))
        kw = {"constant_values": 7.5} if mode == "constant" else {}
        want = np.pad(x, width, mode=mode, **kw)
        expect(m.run(x=x, pads=np.array(pads, np.int64), value=np.array(7.5, np.float32)), [want])


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_with_run_time_k(tmp_path, largest):
    m = load(tmp_path, [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)],
             [vi("x", TP.FLOAT, [5, 29]), vi("k", TP.INT64, [1])],
             [vi("v", TP.FLOAT, [5, "k"]), vi("i", TP.INT64, [5, "k"])])
    x = RNG.integers(-4, 4, (5, 29)).astype(np.float32)  # ties: lower index first
    for k in [1, 7, 29, 0]:
        order = np.argsort(-x if largest else x, axis=1, kind="stable")[:, :k]
        expect(m.run(x=x, k=np.array([k], np.int64)),
               [np.take_along_axis(x, order, 1), order.astype(np.int64)])
    with pytest.raises(Exception, match="k = 30 is out of range"):
        m.run(x=x, k=np.array([30], np.int64))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique_and_compress(tmp_path, axis):
    attrs = {} if axis is None else {"axis": axis}
    m = load(tmp_path, [
        helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], sorted=1, **attrs),
        helper.make_node("Greater", ["c", "zero"], ["keep"]),
        helper.make_node("Compress", ["x", "keep"], ["z"], **attrs),
    ], [vi("x", TP.INT64, [6, 4]), vi("c", TP.FLOAT, [24 if axis is None else [6, 4][axis]])],
        [vi("y", TP.INT64, ["u"] * (1 if axis is None else 2)), vi("idx", TP.INT64, ["u"]),
         vi("inv", TP.INT64, ["n"]), vi("cnt", TP.INT64, ["u"]),
         vi("z", TP.INT64, ["c"] * (1 if axis is None else 2))],
        inits={"zero": np.array(0, np.float32)})
    for _ in range(3):
        x = RNG.integers(0, 3, (6, 4)).astype(np.int64)
        x[3] = x[1]  # a repeated row for axis 0
        c = RNG.standard_normal(24 if axis is None else x.shape[axis]).astype(np.float32)
        y, idx, inv, cnt = np.unique(x, axis=axis, return_index=True, return_inverse=True,
                                     return_counts=True)
        got = m.run(x=x, c=c)
        expect(got, [y, idx.astype(np.int64), inv.reshape(-1).astype(np.int64),
                     cnt.astype(np.int64), np.compress(c > 0, x, axis=axis)])


def iou(a, b):
    y1, x1 = np.maximum(a[0], b[0]), np.maximum(a[1], b[1])
    y2, x2 = np.minimum(a[2], b[2]), np.minimum(a[3], b[3])
    inter = max(y2 - y1, 0) * max(x2 - x1, 0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0


def nms_reference(boxes, scores, max_out, iou_t, score_t):
    out = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in np.argsort(-s, kind="stable") if s[i] > score_t]
            kept = []
            for i in order:
                if len(kept) >= max_out:
                    break
                if all(iou(boxes[b, i], boxes[b, j]) <= iou_t for j in kept):
                    kept.append(i)
            out += [[b, c, i] for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


def test_non_max_suppression_then_gather(tmp_path):
    # Detector post-processing: NMS, then the selected boxes by index.
    m = load(tmp_path, [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "st"], ["sel"]),
        helper.make_node("Gather", ["sel", "two"], ["box_index"], axis=1),
        helper.make_node("Squeeze", ["boxes", "zero"], ["boxes2d"]),
        helper.make_node("Gather", ["boxes2d", "box_index"], ["picked"]),
    ], [vi("boxes", TP.FLOAT, [1, 40, 4]), vi("scores", TP.FLOAT, [1, 3, 40])],
        [vi("sel", TP.INT64, ["n", 3]), vi("picked", TP.FLOAT, ["n", 4])],
        inits={"max": np.array([5], np.int64), "iou": np.array([0.4], np.float32),
               "st": np.array([0.2], np.float32), "two": np.array(2, np.int64),
               "zero": np.array([0], np.int64)})
    for _ in range(4):
        corner = RNG.random((1, 40, 2), dtype=np.float32) * 10
        boxes = np.concatenate([corner, corner + 1 + RNG.random((1, 40, 2), dtype=np.float32) * 4],
                               axis=2)
        scores = RNG.random((1, 3, 40), dtype=np.float32)
        want = nms_reference(boxes, scores, 5, 0.4, 0.2)
        expect(m.run(boxes=boxes, scores=scores), [want, boxes[0][want[:, 2]]])


def test_static_op_after_a_run_time_shape_is_refused_by_name(tmp_path):
    with pytest.raises(kiln.ModelError,
                       match=r"node 'MatMul_1' \(MatMul\) reads 'nz'.*NonZero_0"):
        load(tmp_path, [helper.make_node("NonZero", ["x"], ["nz"]),
                        helper.make_node("MatMul", ["nz", "w"], ["y"])],
             [vi("x", TP.FLOAT, [4, 4])], [vi("y", TP.INT64, ["a", "b"])],
             inits={"w": np.ones((4, 2), np.int64)})


def test_profile_and_cli_outputs_carry_the_run_shape(tmp_path):
    import os
    import subprocess
    m = load(tmp_path, [helper.make_node("NonZero", ["x"], ["nz"])], [vi("x", TP.FLOAT, [3, 3])],
             [vi("nz", TP.INT64, [2, "n"])])
    x = np.diag([1.0, 0.0, 2.0]).astype(np.float32)
    expect(m.run(x=x), [np.array(np.nonzero(x), np.int64)])
    assert m.get_output(0).shape == (2, 2)
    package = str(tmp_path / "nz.tar")
    kiln.build(str(tmp_path / "model.onnx")).export(package)
    np.savez(str(tmp_path / "in.npz"), x=x)
    subprocess.run([os.environ.get("KILN_BINARY", "build/kiln"), "run", package, "--inputs",
                    str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")], check=True)
    out = np.load(str(tmp_path / "out.npz"))
    expect([out["output_0"]], [np.array(np.nonzero(x), np.int64)])


REDUCTIONS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
}


def reduce_reference(op, x, axes, keepdims):
    want = REDUCTIONS[op](x.astype(np.float64) if x.dtype.kind == "f" else x, tuple(axes),
                          bool(keepdims))
    return np.asarray(want).astype(x.dtype)


def out_rank(rank, axes, keepdims):
    """A symbolic output shape of a reduction's rank."""
    n = rank if keepdims else 0 if axes is None else rank - len(axes)
    return [f"d{i}" for i in range(n)]


def reduce_model(tmp_path, op, elem, rank, axes, keepdims):
    """x (flat) reshaped at run time to a rank-`rank` shape, then reduced over
    `axes`: a run-time input for ReduceSum (opset 13; the ONNX library kiln
    builds with stops at opset 17, before the others take axes as inputs), the
    attribute for the others (None: every axis)."""
    tmp_path.mkdir()
    attrs = {"keepdims": keepdims}
    inputs = ["y"]
    if op == "ReduceSum":
        inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = axes
    graph_inputs = [vi("x", elem, [120]), vi("s", TP.INT64, [rank])]
    if op == "ReduceSum":
        graph_inputs.append(vi("axes", TP.INT64, [len(axes or [])]))
    return load(tmp_path, [helper.make_node("Reshape", ["x", "s"], ["y"]),
                           helper.make_node(op, inputs, ["z"], **attrs)],
                graph_inputs, [vi("z", elem, out_rank(rank, axes, keepdims))])


def run_reduce(m, op, x, shape, axes):
    feeds = {"x": x, "s": np.array(shape, np.int64)}
    if op == "ReduceSum":
        feeds["axes"] = np.array(axes or [], np.int64)
    return m.run(**feeds)


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_over_run_time_shapes_and_axes(tmp_path, op, keepdims):
    shapes = {3: [[4, 5, 6], [2, 6, 10], [5, 1, 24]], 4: [[2, 3, 4, 5], [1, 5, 4, 6], [3, 2, 5, 4]]}
    cases = [(3, [1]), (3, [-1]), (3, [0, 2]), (3, [2, 0, 1]), (3, None),
             (4, [0, 2]), (4, [1, 3]), (4, [-1, 0, 1]), (4, [2])]
    for case, (rank, axes) in enumerate(cases):
        m = reduce_model(tmp_path / str(case), op, TP.FLOAT, rank, axes, keepdims)
        for shape in shapes[rank]:
            x = (RNG.random(120, dtype=np.float32) + 0.5).astype(np.float32)
            if op in ("ReduceMax", "ReduceMin", "ReduceL1", "ReduceSum", "ReduceMean"):
                x -= 1.0  # negative values too
            want_axes = range(rank) if axes is None else [a % rank for a in axes]
            expect(run_reduce(m, op, x, shape, axes),
                   [reduce_reference(op, x.reshape(shape), want_axes, keepdims)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean",
                                "ReduceSumSquare", "ReduceL1"])
def test_integer_and_double_reductions(tmp_path, dtype, op):
    elem = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
    for case, axis in enumerate([0, 1, 2, -2]):
        m = reduce_model(tmp_path / str(case), op, elem, 3, [axis], 0)
        for shape in [[4, 3, 10], [2, 10, 6]]:
            x = RNG.integers(-3, 4, 120).astype(dtype)
            want = REDUCTIONS[op](x.reshape(shape), (axis,), False)
            if op == "ReduceMean" and dtype != np.float64:  # integer mean truncates toward zero
                want = np.trunc(np.sum(x.reshape(shape), axis=axis) / shape[axis])
            expect(run_reduce(m, op, x, shape, [axis]), [np.asarray(want).astype(dtype)])


@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_sum_with_empty_run_time_axes(tmp_path, noop):
    m = load(tmp_path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1,
                                         noop_with_empty_axes=noop)],
             [vi("x", TP.FLOAT, [3, 4]), vi("axes", TP.INT64, [0])], [vi("y", TP.FLOAT, ["a", "b"])])
    x = RNG.random((3, 4), dtype=np.float32)
    want = x if noop else np.sum(x, keepdims=True, dtype=np.float64).astype(np.float32)
    expect(m.run(x=x, axes=np.zeros(0, np.int64)), [want])


def test_reductions_over_a_run_time_shaped_tensor(tmp_path):
    # Compress leaves a run-time row count (0 in the last run); attribute and
    # constant-input axes reduce along it or across it.
    m = load(tmp_path, [
        helper.make_node("Greater", ["c", "zero"], ["keep"]),
        helper.make_node("Compress", ["x", "keep"], ["z"], axis=0),
        helper.make_node("ReduceMax", ["z"], ["zmax"], axes=[1], keepdims=0),
        helper.make_node("ReduceSum", ["z", "axis0"], ["zsum"], keepdims=1),
        helper.make_node("ReduceMean", ["z"], ["zmean"], axes=[-1]),
        helper.make_node("ReduceLogSumExp", ["z"], ["zlse"]),
    ], [vi("x", TP.FLOAT, [6, 5]), vi("c", TP.FLOAT, [6])],
        [vi("zmax", TP.FLOAT, ["n"]), vi("zsum", TP.FLOAT, [1, 5]), vi("zmean", TP.FLOAT, ["n", 1]),
         vi("zlse", TP.FLOAT, [1, 1])],
        inits={"zero": np.array(0, np.float32), "axis0": np.array([0], np.int64)})
    for threshold in [0.0, -1.0, 0.5, 10.0]:
        x = RNG.standard_normal((6, 5)).astype(np.float32)
        c = (RNG.standard_normal(6) - threshold).astype(np.float32)
        z = x[c > 0].astype(np.float64)
        with np.errstate(divide="ignore"):
            lse = np.log(np.sum(np.exp(z), keepdims=True))
        expect(m.run(x=x, c=c), [np.max(z, axis=1).astype(np.float32),
                                 np.sum(z, axis=0, keepdims=True).astype(np.float32),
                                 np.mean(z, axis=-1, keepdims=True).astype(np.float32),
                                 lse.astype(np.float32)])


def cumsum_reference(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(np.float64) if x.dtype.kind == "f" else y, axis=axis)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis)), np.delete(c, -1, axis)], axis)
    return (np.flip(c, axis) if reverse else c).astype(x.dtype)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cumsum_with_run_time_axis(tmp_path, exclusive, reverse, dtype):
    elem = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
    m = load(tmp_path, [helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive,
                                         reverse=reverse)],
             [vi("x", elem, [3, 4, 5]), vi("axis", TP.INT64, [])], [vi("y", elem, [3, 4, 5])],
             opset=14)
    for axis in [0, 1, 2, -1, -3]:
        x = (RNG.standard_normal((3, 4, 5)) * 10).astype(dtype)
        expect(m.run(x=x, axis=np.array(axis, np.int64)),
               [cumsum_reference(x, axis, exclusive, reverse)])
    with pytest.raises(Exception, match=r"CumSum.*axis 3 is out of range"):
        m.run(x=x, axis=np.array(3, np.int64))


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
def test_one_hot_with_run_time_depth(tmp_path, axis):
    m = load(tmp_path, [helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)],
             [vi("i", TP.INT64, [3, 4]), vi("depth", TP.INT64, []), vi("values", TP.FLOAT, [2])],
             [vi("y", TP.FLOAT, ["a", "b", "c"])], opset=11)
    values = np.array([-2.5, 4.0], np.float32)
    for depth in [5, 1, 8]:
        i = RNG.integers(-depth - 2, depth + 2, (3, 4)).astype(np.int64)  # some out of range
        wrapped = np.where(i < 0, i + depth, i)
        hot = np.expand_dims(wrapped, axis % 3) == np.arange(depth).reshape(
            [-1 if d == axis % 3 else 1 for d in range(3)])
        want = np.where(hot, values[1], values[0]).astype(np.float32)
        expect(m.run(i=i, depth=np.array(depth, np.int64), values=values), [want])


def test_cumsum_axis_computed_by_a_kernel_and_the_refusal_after_it(tmp_path):
    # The axis is a kernel's output (Add of a graph input): CumSum runs on the
    # host after it; the compiled Relu before CumSum stays a kernel.
    m = load(tmp_path, [helper.make_node("Relu", ["x"], ["r"]),
                        helper.make_node("Add", ["a", "one"], ["axis"]),
                        helper.make_node("CumSum", ["r", "axis"], ["y"])],
             [vi("x", TP.FLOAT, [4, 6]), vi("a", TP.INT64, [])], [vi("y", TP.FLOAT, [4, 6])],
             inits={"one": np.array(1, np.int64)}, opset=14)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    for a in [-1, 0, -2]:
        expect(m.run(x=x, a=np.array(a, np.int64)),
               [cumsum_reference(np.maximum(x, 0), a + 1, 0, 0)])
    with pytest.raises(kiln.ModelError,
                       match=r"node 'MatMul_1' \(MatMul\) reads 'y', which the executor computes "
                       r"after the kernels \(node 'CumSum_0' \(CumSum\) takes 'axis'"):
        load(tmp_path, [helper.make_node("CumSum", ["x", "axis"], ["y"]),
                        helper.make_node("MatMul", ["y", "w"], ["z"])],
             [vi("x", TP.FLOAT, [4, 4]), vi("axis", TP.INT64, [])], [vi("z", TP.FLOAT, [4, 2])],
             inits={"w": np.ones((4, 2), np.float32)}, opset=14)


# ---- Resize: a port of ONNX's reference (onnx/reference/ops/op_resize.py), point by point --------


def resize_cubic_coeffs(ratio, a):
    r1, q = ratio + 1, 1 - ratio
    return [((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
            ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
            ((a + 2) * q - (a + 3)) * q * q + 1,
            ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a]


def resize_nearest_coeffs(ratio, mode):
    if float(ratio).is_integer():
        return [0, 1]
    return {"round_prefer_floor": [ratio <= 0.5, ratio > 0.5],
            "round_prefer_ceil": [ratio < 0.5, ratio >= 0.5],
            "floor": [1, 0], "ceil": [0, 1]}[mode]


def resize_1d(data, scale, out_int, x, coeffs, roi, extrapolation, transform, exclude):
    in_w = len(data)
    out_w = scale * in_w
    if transform == "align_corners":
        x_ori = 0.0 if out_w == 1 else x * (in_w - 1) / (out_w - 1)
    elif transform == "asymmetric":
        x_ori = x / scale
    elif transform == "tf_crop_and_resize":
        span = (roi[1] - roi[0]) * (in_w - 1)
        x_ori = span / 2 if out_int == 1 else x * span / (out_int - 1)
        x_ori += roi[0] * (in_w - 1)
        if x_ori < 0 or x_ori > in_w - 1:
            return extrapolation
    elif transform == "tf_half_pixel_for_nn":
        x_ori = (x + 0.5) / scale
    elif transform == "pytorch_half_pixel":
        x_ori = -0.5 if out_w == 1 else (x + 0.5) / scale - 0.5
    else:  # half_pixel
        x_ori = (x + 0.5) / scale - 0.5
    ratio = 1 if float(x_ori).is_integer() else x_ori - np.floor(x_ori)
    c = np.array(coeffs(ratio), np.float64)
    n = len(c)
    pad = int(np.ceil(n / 2))
    padded = np.pad(data, pad, mode="edge")
    idx = np.array(sorted(sorted(range(len(padded)), key=lambda i: (abs(x_ori + pad - i), i))[:n]))
    if exclude:
        c[(idx - pad < 0) | (idx - pad >= in_w)] = 0
        c /= c.sum()
    return float(np.dot(c, padded[idx]))


def resize_nd(data, coeffs, out_size, scales, roi, x, **kw):
    r = data.ndim
    if r == 1:
        return resize_1d(data, scales[0], out_size[0], x[0], coeffs, roi, **kw)
    inner_roi = None if roi is None else list(roi[1:r]) + list(roi[r + 1:])
    rows = np.array([resize_nd(data[i], coeffs, out_size[1:], scales[1:], inner_roi, x[1:], **kw)
                     for i in range(data.shape[0])])
    return resize_1d(rows, scales[0], out_size[0], x[0], coeffs,
                     None if roi is None else [roi[0], roi[r]], **kw)


def resize_reference(x, scales=None, sizes=None, roi=None, mode="nearest",
                     transform="half_pixel", nearest_mode="round_prefer_floor", cubic_a=-0.75,
                     exclude=False, extrapolation=0.0):
    if sizes is not None:
        out_size = list(sizes)
        scales = np.array(sizes) / np.array(x.shape)
    else:
        out_size = list((np.array(scales) * np.array(x.shape)).astype(int))
    coeffs = {"nearest": lambda r: resize_nearest_coeffs(r, nearest_mode),
              "linear": lambda r: [1 - r, r],
              "cubic": lambda r: resize_cubic_coeffs(r, cubic_a)}[mode]
    out = np.zeros(out_size, np.float64)
    for point in np.ndindex(*out_size):
        out[point] = resize_nd(x.astype(np.float64), coeffs, out_size, [float(s) for s in scales],
                               roi, point, extrapolation=extrapolation, transform=transform,
                               exclude=exclude)
    return out.astype(x.dtype)


RESIZE_TRANSFORMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                     "tf_crop_and_resize", "tf_half_pixel_for_nn"]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("transform", RESIZE_TRANSFORMS)
def test_resize_with_run_time_scales_and_sizes(tmp_path, mode, transform):
    extra = {"nearest": [{"nearest_mode": m} for m in ["round_prefer_floor", "round_prefer_ceil",
                                                         "floor", "ceil"]],
             "linear": [{}],
             "cubic": [{}, {"cubic_coeff_a": -0.5, "exclude_outside": 1}]}[mode]
    tf = transform == "tf_crop_and_resize"
    for case, attrs in enumerate(extra):
        attrs = dict(attrs, mode=mode, coordinate_transformation_mode=transform)
        if tf:
            attrs["extrapolation_value"] = 10.0
        d = tmp_path / str(case)
        (d / "scales").mkdir(parents=True)
        (d / "sizes").mkdir()
        roi_input = [vi("roi", TP.FLOAT, [8])] if tf else []
        by_scales = load(d / "scales", [helper.make_node(
            "Resize", ["x", "roi" if tf else "", "scales"], ["y"], **attrs)],
            [vi("x", TP.FLOAT, [1, 2, 5, 6]), vi("scales", TP.FLOAT, [4])] + roi_input,
            [vi("y", TP.FLOAT, ["a", "b", "c", "d"])])
        by_sizes = load(d / "sizes", [helper.make_node(
            "Resize", ["x", "roi" if tf else "", "", "sizes"], ["y"], **attrs)],
            [vi("x", TP.FLOAT, [1, 2, 5, 6]), vi("sizes", TP.INT64, [4])] + roi_input,
            [vi("y", TP.FLOAT, ["a", "b", "c", "d"])])
        ref_attrs = {"mode": mode, "transform": transform,
                     "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor"),
                     "cubic_a": attrs.get("cubic_coeff_a", -0.75),
                     "exclude": bool(attrs.get("exclude_outside", 0)),
                     "extrapolation": attrs.get("extrapolation_value", 0.0)}
        x = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
        roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], np.float32)
        feeds = {"x": x, **({"roi": roi} if tf else {})}
        roi_ref = [float(r) for r in roi] if tf else None
        for scales in [[1, 1, 2, 1.5], [1, 1, 0.6, 0.5], [1, 2, 1.7, 0.8]]:
            s = np.array(scales, np.float32)
            expect(by_scales.run(scales=s, **feeds),
                   [resize_reference(x, scales=s, roi=roi_ref, **ref_attrs)])
        for sizes in [[1, 2, 8, 3], [1, 1, 3, 9], [2, 2, 5, 6], [1, 2, 1, 1]]:
            s = np.array(sizes, np.int64)
            expect(by_sizes.run(sizes=s, **feeds),
                   [resize_reference(x, sizes=sizes, roi=roi_ref, **ref_attrs)])


@pytest.mark.parametrize("step", [1, -1, -3])
def test_slice_of_an_empty_axis_is_empty(tmp_path, step):
    m = load(tmp_path, [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
             [vi("x", TP.FLOAT, [0, 4]), vi("starts", TP.INT64, [1]), vi("ends", TP.INT64, [1]),
              vi("axes", TP.INT64, [1]), vi("steps", TP.INT64, [1])],
             [vi("y", TP.FLOAT, ["a", "b"])])
    for start, end in [(0, 5), (-1, -10), (3, 0)]:
        got = m.run(x=np.zeros((0, 4), np.float32), starts=np.array([start], np.int64),
                    ends=np.array([end], np.int64), axes=np.array([0], np.int64),
                    steps=np.array([step], np.int64))
        expect(got, [np.zeros((0, 4), np.float32)])


def test_max_unpool_with_run_time_output_shape(tmp_path):
    # MaxPool (compiled, with its Indices) -> MaxUnpool to the pool's input
    # size, which comes at run time: the executor's scatter, each index in
    # the output's shape; an index past the output is a clear error.
    m = load(tmp_path, [
        helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxUnpool", ["p", "i", "shape"], ["y"], kernel_shape=[2, 2],
                         strides=[2, 2]),
    ], [vi("x", TP.FLOAT, [2, 3, 5, 7]), vi("shape", TP.INT64, [4])],
        [vi("y", TP.FLOAT, ["n", "c", "h", "w"])], opset=11)
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for shape in ([2, 3, 5, 7], [2, 3, 6, 8]):
        # The indices address x (5 x 7); a larger output keeps those flat positions.
        flat = x[:, :, :4, :6].reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5)
        flat = flat.reshape(2, 3, 2, 3, 4)
        rows, cols = np.divmod(flat.argmax(-1), 2)
        h = np.arange(2)[:, None] * 2 + rows
        w = np.arange(3)[None, :] * 2 + cols
        plane = np.arange(6).reshape(2, 3, 1, 1)
        idx = plane * 35 + h * 7 + w
        want = np.zeros(int(np.prod(shape)), np.float32)
        want[idx.ravel()] = flat.max(-1).ravel()
        expect(m.run(x=x, shape=np.array(shape, np.int64)), [want.reshape(shape)])
    with pytest.raises(kiln.KilnError, match="MaxUnpool.*out of range"):
        m.run(x=x, shape=np.array([2, 3, 2, 2], np.int64))
