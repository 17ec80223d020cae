"""Indexing and ordering operators end to end (kiln.build, then the runtime)
against numpy, in the forms ONNX's conformance data cannot show: build-time
inputs as initializers (TopK's K, CumSum's axis, OneHot's depth, Trilu's k),
opsets those cases do not use (EyeLike, ReverseSequence, Hardmax before 13),
and the operators fused with their neighbours."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import kiln

RNG = np.random.default_rng(7)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def load(tmp_path, nodes, inputs, outputs, inits=None, opset=13):
    inits = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return kiln.build(path).load()


def expect(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("largest,k", [(1, 5), (0, 5), (1, 37)])  # selection, network
def test_topk_constant_k(tmp_path, largest, k):
    x = RNG.integers(-5, 5, (3, 37)).astype(np.float32)  # ties
    m = load(tmp_path, [helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest)],
             [vi("x", TP.FLOAT, [3, 37])], [vi("v", TP.FLOAT, [3, k]), vi("i", TP.INT64, [3, k])],
             {"k": np.array([k], np.int64)})
    order = np.argsort(-x if largest else x, axis=-1, kind="stable")[:, :k]
    expect(m.run(x=x), [np.take_along_axis(x, order, -1), order])


def test_cumsum_constant_axis(tmp_path):
    x = RNG.standard_normal((4, 33)).astype(np.float32)
    m = load(tmp_path, [helper.make_node("CumSum", ["x", "a"], ["y"], reverse=1, exclusive=1)],
             [vi("x", TP.FLOAT, [4, 33])], [vi("y", TP.FLOAT, [4, 33])],
             {"a": np.array(-1, np.int64)})
    inclusive = np.flip(np.cumsum(np.flip(x, 1), 1), 1)
    expect(m.run(x=x), [inclusive - x])


def test_onehot_constant_depth(tmp_path):
    # ONNX 1.12 infers no depth axis; the frontend types it from the constant.
    ind = np.array([[1, 9], [-2, 12]], np.int64)
    m = load(tmp_path, [helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1)],
             [vi("i", TP.INT64, [2, 2]), vi("v", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2, 10, 2])],
             {"d": np.array([10], np.int64)})
    want = np.where(np.arange(10)[None, :, None] == np.where(ind < 0, ind + 10, ind)[:, None, :],
                    3.0, 1.0).astype(np.float32)
    expect(m.run(i=ind, v=np.array([1, 3], np.float32)), [want])


def test_trilu_constant_k(tmp_path):
    x = RNG.standard_normal((2, 5, 7)).astype(np.float32)
    m = load(tmp_path, [helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)],
             [vi("x", TP.FLOAT, [2, 5, 7])], [vi("y", TP.FLOAT, [2, 5, 7])],
             {"k": np.array(-1, np.int64)}, opset=14)
    expect(m.run(x=x), [np.tril(x, -1)])


def test_eyelike_and_size(tmp_path):
    m = load(tmp_path, [helper.make_node("EyeLike", ["x"], ["e"], k=1, dtype=TP.INT32),
                        helper.make_node("Size", ["x"], ["n"])],
             [vi("x", TP.FLOAT, [4, 6])], [vi("e", TP.INT32, [4, 6]), vi("n", TP.INT64, [])])
    expect(m.run(x=np.zeros((4, 6), np.float32)),
           [np.eye(4, 6, 1, dtype=np.int32), np.array(24, np.int64)])


def test_hardmax_opset11_coerces_to_2d(tmp_path):
    x = RNG.integers(-3, 3, (2, 3, 4)).astype(np.float32)
    m = load(tmp_path, [helper.make_node("Hardmax", ["x"], ["y"], axis=1)],
             [vi("x", TP.FLOAT, [2, 3, 4])], [vi("y", TP.FLOAT, [2, 3, 4])], opset=11)
    flat = x.reshape(2, 12)
    want = np.zeros_like(flat)
    want[np.arange(2), np.argmax(flat, 1)] = 1
    expect(m.run(x=x), [want.reshape(2, 3, 4)])


def test_reverse_sequence(tmp_path):
    x = RNG.standard_normal((5, 3, 2)).astype(np.float32)
    lens = np.array([5, 2, 0], np.int64)
    m = load(tmp_path, [helper.make_node("ReverseSequence", ["x", "l"], ["y"])],
             [vi("x", TP.FLOAT, [5, 3, 2]), vi("l", TP.INT64, [3])], [vi("y", TP.FLOAT, [5, 3, 2])])
    want = x.copy()
    for b, n in enumerate(lens):
        want[:n, b] = x[:n, b][::-1]
    expect(m.run(x=x, l=lens), [want])


def test_fused_neighbours(tmp_path):
    x = RNG.standard_normal((4, 6, 9)).astype(np.float32)
    idx = RNG.integers(-6, 6, (4, 3, 9)).astype(np.int64)
    upd = RNG.standard_normal((4, 3, 9)).astype(np.float32)
    m = load(tmp_path, [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("GatherElements", ["r", "i"], ["g"], axis=1),
        helper.make_node("Add", ["g", "g"], ["y0"]),
        helper.make_node("ArgMax", ["x"], ["a"], axis=-1, keepdims=0),
        helper.make_node("Cast", ["a"], ["y1"], to=TP.FLOAT),
        helper.make_node("ScatterElements", ["r", "i", "u"], ["y2"], axis=1, reduction="add"),
    ], [vi("x", TP.FLOAT, [4, 6, 9]), vi("i", TP.INT64, [4, 3, 9]), vi("u", TP.FLOAT, [4, 3, 9])],
        [vi("y0", TP.FLOAT, [4, 3, 9]), vi("y1", TP.FLOAT, [4, 6]), vi("y2", TP.FLOAT, [4, 6, 9])],
        opset=16)
    r = np.maximum(x, 0)
    wrapped = np.where(idx < 0, idx + 6, idx)
    scattered = r.copy()
    for a, b, c in np.ndindex(*idx.shape):
        scattered[a, wrapped[a, b, c], c] += upd[a, b, c]
    expect(m.run(x=x, i=idx, u=upd),
           [2 * np.take_along_axis(r, wrapped, 1), np.argmax(x, -1).astype(np.float32), scattered])


def test_constant_index_out_of_range_names_the_node(tmp_path):
    g = helper.make_graph(
        [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1, name="my_gather")], "g",
        [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 2])],
        [numpy_helper.from_array(np.array([[0, 3], [1, 2]], np.int64), "i")])
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(kiln.KilnError, match="my_gather.*index 3 is out of range"):
        kiln.build(path)


@pytest.mark.parametrize("op", ["Gather", "GatherElements"])
def test_run_time_index_out_of_range_fails_the_run(tmp_path, op):
    # ONNX: an index outside [-5, 4] on an axis of 5 is an error (issue 65, item 2).
    table = RNG.standard_normal((5, 3)).astype(np.float32)
    ishape, oshape = ([2], [2, 3]) if op == "Gather" else ([2, 3], [2, 3])
    m = load(tmp_path, [helper.make_node(op, ["t", "i"], ["g"], axis=0, name="my_gather"),
                        helper.make_node("Relu", ["g"], ["y"])],
             [vi("i", TP.INT64, ishape)], [vi("y", TP.FLOAT, oshape)], {"t": table})
    r = np.maximum(table, 0)

    def ids(a, b):
        return np.array([a, b], np.int64) if op == "Gather" else np.array([[a] * 3, [b] * 3],
                                                                          np.int64)
    for bad in (ids(7, 0), ids(0, -9), ids(5, 1), ids(-6, 1)):
        with pytest.raises(kiln.KilnError,
                           match=r"'my_gather' \(" + op + r"\).*index read at run time was out of range"):
            m.run(i=bad)
    # -5 and 4: the first and the last row; the module stays usable after the errors.
    got = m.run(i=ids(-5, 4))[0]
    np.testing.assert_array_equal(got, r[[0, 4]] if op == "Gather" else r[[0, 4], :])
    m.set_input("i", ids(9, 0))
    with pytest.raises(RuntimeError, match="out of range"):
        m.run()


def test_constant_gather_index_out_of_range_names_the_node(tmp_path):
    g = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="lookup")], "g",
        [vi("x", TP.FLOAT, [5, 3])], [vi("y", TP.FLOAT, [1, 3])],
        [numpy_helper.from_array(np.array([99], np.int64), "i")])
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(kiln.KilnError,
                       match=r"'lookup' \(Gather\).*index 99 is out of range for axis 0 of size 5"):
        kiln.build(path)
