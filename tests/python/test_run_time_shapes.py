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
