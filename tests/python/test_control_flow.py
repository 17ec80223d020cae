"""Control flow, sequences and optionals end to end against numpy: If, Loop,
Scan and SequenceMap run their subgraphs in the executor (runtime/
host_ops/control_flow_ops.cc); sequences and optionals are values of the
host region (host_ops/sequence_ops.cc) and reach Python as lists and None;
an If whose condition folds to a constant is compiled as its branch
(frontend/constant_branches.h)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import kiln

RNG = np.random.default_rng(5)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name, elem):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def build(tmp_path, nodes, inputs, outputs, inits=None, opset=16, shapes=None):
    inits = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return kiln.build(path, input_shapes=shapes)


def load(*args, **kwargs):
    return build(*args, **kwargs).load()


def expect(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            expect(g, w)
            continue
        g = np.asarray(g)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


# ---- If ------------------------------------------------------------------------------------


def test_if_picks_a_branch_per_run_and_reads_compiled_and_outer_values(tmp_path):
    # r = Relu(x) is compiled; the branches read it and the graph input y.
    then_g = helper.make_graph([helper.make_node("Add", ["r", "y"], ["t"])], "then", [],
                               [vi("t", TP.FLOAT, [3, 5])])
    else_g = helper.make_graph([helper.make_node("Mul", ["r", "two"], ["e"])], "else", [],
                               [vi("e", TP.FLOAT, [3, 5])])
    m = load(tmp_path, [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
    ], [vi("x", TP.FLOAT, [3, 5]), vi("y", TP.FLOAT, [3, 5]), vi("c", TP.BOOL, [])],
        [vi("out", TP.FLOAT, [3, 5])], inits={"two": np.array(2, np.float32)})
    for c in [True, False, False, True]:
        x = RNG.standard_normal((3, 5)).astype(np.float32)
        y = RNG.standard_normal((3, 5)).astype(np.float32)
        r = np.maximum(x, 0)
        expect(m.run(x=x, y=y, c=np.array(c)), [r + y if c else r * 2])


def test_if_with_a_condition_known_at_build_time_is_compiled_as_its_branch(tmp_path):
    # The condition compares x's batch size, which --input-shapes fixes: the
    # If folds away and its MatMul (which the executor cannot run) compiles.
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [],
                               [vi("t", TP.FLOAT, ["n", 4])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                               [vi("e", TP.FLOAT, ["n", 4])])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Equal", ["n", "two"], ["c"]),
        helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
    ]
    w = RNG.standard_normal((4, 4)).astype(np.float32)
    inits = {"zero": np.array(0, np.int64), "two": np.array(2, np.int64), "w": w}
    for n in [2, 3]:
        m = load(tmp_path, nodes, [vi("x", TP.FLOAT, ["n", 4])], [vi("out", TP.FLOAT, ["n", 4])],
                 inits=inits, shapes={"x": (n, 4)})
        x = RNG.standard_normal((n, 4)).astype(np.float32)
        expect(m.run(x=x), [x @ w if n == 2 else x])


# ---- Loop ----------------------------------------------------------------------------------


def loop_body(extra_nodes=(), extra_outputs=()):
    """Body (i, cond, acc, prod) -> (i < limit, acc + x * i, prod * 2, *extra):
    reads x and limit from the graph."""
    nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Add", ["acc", "xi"], ["acc_next"]),
        helper.make_node("Mul", ["prod", "two"], ["prod_next"]),
        helper.make_node("Less", ["i", "limit"], ["go"]),
        *extra_nodes,
    ]
    return helper.make_graph(
        nodes, "body",
        [vi("i", TP.INT64, []), vi("cond", TP.BOOL, []), vi("acc", TP.FLOAT, [2, 3]),
         vi("prod", TP.FLOAT, [1])],
        [vi("go", TP.BOOL, []), vi("acc_next", TP.FLOAT, [2, 3]), vi("prod_next", TP.FLOAT, [1]),
         *extra_outputs])


def reference_loop(x, trips, limit):
    acc, prod, scans = np.zeros((2, 3), np.float32), np.ones(1, np.float32), []
    i, go = 0, True
    while i < trips and go:
        acc = acc + x * np.float32(i)
        prod = prod * 2
        scans.append(acc.copy())
        go = i < limit
        i += 1
    return acc, prod, scans


@pytest.mark.parametrize("trips,limit", [(5, 100), (5, 2), (0, 100), (1, 0), (40, 17)])
def test_loop_with_trip_count_condition_carried_values_and_scan_outputs(tmp_path, trips, limit):
    body = loop_body([helper.make_node("Identity", ["acc_next"], ["scan"])],
                     [vi("scan", TP.FLOAT, [2, 3])])
    m = load(tmp_path, [
        helper.make_node("Relu", ["x_in"], ["x"]),  # compiled, read by the body
        helper.make_node("Loop", ["m", "c", "acc0", "prod0"], ["acc", "prod", "scans"], body=body),
    ], [vi("x_in", TP.FLOAT, [2, 3]), vi("m", TP.INT64, []), vi("limit", TP.INT64, []),
        vi("c", TP.BOOL, [])],
        [vi("acc", TP.FLOAT, [2, 3]), vi("prod", TP.FLOAT, [1]),
         vi("scans", TP.FLOAT, ["n", 2, 3])],
        inits={"acc0": np.zeros((2, 3), np.float32), "prod0": np.ones(1, np.float32),
               "two": np.array(2, np.float32)})
    for _ in range(2):  # a second run reuses the memory and gives the same results
        x_in = RNG.standard_normal((2, 3)).astype(np.float32)
        acc, prod, scans = reference_loop(np.maximum(x_in, 0), trips, limit)
        got = m.run(x_in=x_in, m=np.array(trips, np.int64), limit=np.array(limit, np.int64),
                    c=np.array(True))
        want_scans = np.stack(scans) if scans else np.zeros((0,), np.float32)
        expect(got[:2], [acc, prod])
        np.testing.assert_allclose(got[2].reshape(want_scans.shape), want_scans, rtol=1e-5)


def test_loop_carried_values_that_swap_or_pass_through_are_not_mixed_up(tmp_path):
    # (a, b, k) -> (b, a + b, k): Fibonacci pairs; k passes through unchanged.
    body = helper.make_graph([
        helper.make_node("Identity", ["cond"], ["go"]),
        helper.make_node("Add", ["a", "b"], ["ab"]),
    ], "body", [vi("i", TP.INT64, []), vi("cond", TP.BOOL, []), vi("a", TP.INT64, [3]),
                vi("b", TP.INT64, [3]), vi("k", TP.INT64, [3])],
        [vi("go", TP.BOOL, []), vi("b", TP.INT64, [3]), vi("ab", TP.INT64, [3]),
         vi("k", TP.INT64, [3])])
    m = load(tmp_path, [helper.make_node("Loop", ["m", "", "a0", "b0", "k0"], ["a", "b", "k"],
                                         body=body)],
             [vi("m", TP.INT64, []), vi("a0", TP.INT64, [3]), vi("b0", TP.INT64, [3]),
              vi("k0", TP.INT64, [3])],
             [vi("a", TP.INT64, [3]), vi("b", TP.INT64, [3]), vi("k", TP.INT64, [3])])
    for trips in [0, 1, 2, 7, 30]:
        a, b = np.array([0, 1, 2], np.int64), np.array([1, 1, 3], np.int64)
        k = np.array([9, 8, 7], np.int64)
        got = m.run(m=np.array(trips, np.int64), a0=a, b0=b, k0=k)
        for _ in range(trips):
            a, b = b, a + b
        expect(got, [a, b, k])


def test_loop_whose_carried_value_grows_and_has_an_if_inside(tmp_path):
    # Each iteration appends [i] (or [-i] on odd i, through an If) to a
    # growing vector: a carried value whose shape changes every iteration.
    then_g = helper.make_graph([helper.make_node("Neg", ["i1"], ["t"])], "then", [],
                               [vi("t", TP.INT64, [1])])
    else_g = helper.make_graph([helper.make_node("Identity", ["i1"], ["e"])], "else", [],
                               [vi("e", TP.INT64, [1])])
    body = helper.make_graph([
        helper.make_node("Unsqueeze", ["i", "zero"], ["i1"]),
        helper.make_node("Mod", ["i", "two"], ["odd_i"]),
        helper.make_node("Equal", ["odd_i", "one"], ["odd"]),
        helper.make_node("If", ["odd"], ["v"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Concat", ["seq", "v"], ["seq_next"], axis=0),
        helper.make_node("Identity", ["cond"], ["go"]),
    ], "body", [vi("i", TP.INT64, []), vi("cond", TP.BOOL, []), vi("seq", TP.INT64, ["n"])],
        [vi("go", TP.BOOL, []), vi("seq_next", TP.INT64, ["m"])])
    m = load(tmp_path, [helper.make_node("Loop", ["m", "", "start"], ["out"], body=body)],
             [vi("m", TP.INT64, [])], [vi("out", TP.INT64, ["k"])],
             inits={"start": np.zeros((0,), np.int64), "zero": np.array([0], np.int64),
                    "two": np.array(2, np.int64), "one": np.array(1, np.int64)})
    for trips in [0, 1, 6, 25]:
        want = np.array([-i if i % 2 else i for i in range(trips)], np.int64)
        expect(m.run(m=np.array(trips, np.int64)), [want])


# ---- Scan ----------------------------------------------------------------------------------


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir",
                         [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 1, 1), (0, 0, 1, 1)])
def test_scan_running_sum_over_axes_and_directions(tmp_path, in_axis, in_dir, out_axis, out_dir):
    body = helper.make_graph([
        helper.make_node("Add", ["s", "row"], ["s_next"]),
        helper.make_node("Mul", ["s_next", "row"], ["y"]),
    ], "body", [vi("s", TP.FLOAT, [4]), vi("row", TP.FLOAT, [4])],
        [vi("s_next", TP.FLOAT, [4]), vi("y", TP.FLOAT, [4])])
    x_shape = [5, 4] if in_axis == 0 else [4, 5]
    m = load(tmp_path, [helper.make_node(
        "Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
        scan_input_axes=[in_axis], scan_input_directions=[in_dir], scan_output_axes=[out_axis],
        scan_output_directions=[out_dir])],
        [vi("s0", TP.FLOAT, [4]), vi("x", TP.FLOAT, x_shape)],
        [vi("s", TP.FLOAT, [4]), vi("ys", TP.FLOAT, ["a", "b"])])
    s0 = RNG.standard_normal(4).astype(np.float32)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    rows = x if in_axis == 0 else x.T
    order = range(5) if not in_dir else reversed(range(5))
    s, ys = s0.copy(), []
    for t in order:
        s = s + rows[t]
        ys.append(s * rows[t])
    ys = np.stack(ys[::-1] if out_dir else ys)
    expect(m.run(s0=s0, x=x), [s, ys if out_axis == 0 else ys.T])


# ---- sequences and optionals ---------------------------------------------------------------


def test_split_map_and_concat_a_sequence(tmp_path):
    body = helper.make_graph([helper.make_node("Mul", ["e", "k"], ["e2"])], "body",
                             [vi("e", TP.FLOAT, [1, 3]), vi("k", TP.FLOAT, [])],
                             [vi("e2", TP.FLOAT, [1, 3])])
    m = load(tmp_path, [
        helper.make_node("Sigmoid", ["x"], ["sx"]),  # compiled
        helper.make_node("SplitToSequence", ["sx"], ["parts"], axis=0),
        helper.make_node("SequenceMap", ["parts", "k"], ["scaled"], body=body),
        helper.make_node("SequenceLength", ["scaled"], ["n"]),
        helper.make_node("ConcatFromSequence", ["scaled"], ["stacked"], axis=0, new_axis=1),
        helper.make_node("SequenceErase", ["scaled", "zero"], ["rest"]),
    ], [vi("x", TP.FLOAT, [4, 3]), vi("k", TP.FLOAT, [])],
        [vi("stacked", TP.FLOAT, ["a", "b", "c"]), vi("n", TP.INT64, []),
         seq_vi("rest", TP.FLOAT)],
        inits={"zero": np.array(0, np.int64)}, opset=17)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    k = np.array(3, np.float32)
    sx = 1 / (1 + np.exp(-x))
    parts = [sx[i:i + 1] * k for i in range(4)]
    expect(m.run(x=x, k=k), [np.stack(parts), np.array(4, np.int64), parts[1:]])


def test_sequence_and_optional_inputs_and_outputs_through_python(tmp_path):
    # seq -> SequenceInsert(seq, x, pos) and SequenceAt(seq, -1); an optional
    # input's presence as a bool.
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(TP.FLOAT, [2]))
    m = load(tmp_path, [
        helper.make_node("SequenceInsert", ["seq", "x", "pos"], ["seq2"]),
        helper.make_node("SequenceAt", ["seq2", "minus1"], ["last"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
    ], [seq_vi("seq", TP.FLOAT), vi("x", TP.FLOAT, [2]), vi("pos", TP.INT64, []),
        helper.make_value_info("o", opt_type)],
        [seq_vi("seq2", TP.FLOAT), vi("last", TP.FLOAT, ["n"]), vi("has", TP.BOOL, [])],
        inits={"minus1": np.array(-1, np.int64)})
    info = {i.name: i for i in m.input_info()}
    assert info["seq"].kind == "sequence" and not info["seq"].optional
    assert info["o"].optional and info["o"].kind == "tensor"
    a, b = np.ones((3,), np.float32), np.arange(5, dtype=np.float32)
    x = np.array([7, 8], np.float32)
    got = m.run(seq=[a, b], x=x, pos=np.array(1, np.int64), o=None)
    expect(got, [[a, x, b], b, np.array(False)])
    got = m.run(seq=[], x=x, pos=np.array(0, np.int64), o=np.zeros(2, np.float32))
    expect(got, [[x], x, np.array(True)])
    with pytest.raises(kiln.KilnError, match="sequence"):
        m.run(seq=a, x=x, pos=np.array(0, np.int64), o=None)


# ---- errors --------------------------------------------------------------------------------


def test_a_subgraph_operator_the_executor_cannot_run_is_named(tmp_path):
    body = helper.make_graph([
        helper.make_node("Identity", ["cond"], ["go"]),
        helper.make_node("MatMul", ["acc", "w"], ["acc_next"], name="inner_mm"),
    ], "body", [vi("i", TP.INT64, []), vi("cond", TP.BOOL, []), vi("acc", TP.FLOAT, [2, 2])],
        [vi("go", TP.BOOL, []), vi("acc_next", TP.FLOAT, [2, 2])])
    with pytest.raises(kiln.KilnError,
                       match=r"node 'decode' \(Loop\) subgraph 'body': node 'decode/body/inner_mm' "
                             r"\(MatMul\): inside a subgraph"):
        build(tmp_path, [helper.make_node("Loop", ["m", "", "a0"], ["a"], body=body,
                                          name="decode")],
              [vi("m", TP.INT64, []), vi("a0", TP.FLOAT, [2, 2])], [vi("a", TP.FLOAT, [2, 2])],
              inits={"w": np.eye(2, dtype=np.float32)})


def test_run_time_errors_inside_subgraphs_name_the_node(tmp_path):
    m = load(tmp_path, [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
                        helper.make_node("SequenceAt", ["s", "p"], ["y"], name="pick")],
             [vi("x", TP.FLOAT, [3, 2]), vi("p", TP.INT64, [])], [vi("y", TP.FLOAT, ["a", "b"])])
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    expect(m.run(x=x, p=np.array(-1, np.int64)), [x[2:3]])
    with pytest.raises(kiln.KilnError, match=r"node 'pick' \(SequenceAt\): position 3"):
        m.run(x=x, p=np.array(3, np.int64))


def test_kiln_run_takes_and_writes_sequences_in_npz(tmp_path):
    # npz: a sequence input `seq` is `seq[0]`, `seq[1]`, ... (`seq[]` when
    # empty); sequence output k is `output_k[0]`, ...; an optional input left
    # out of the npz is empty.
    import os
    import subprocess
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(TP.FLOAT, [2]))
    pkg = build(tmp_path, [
        helper.make_node("SequenceInsert", ["seq", "x"], ["seq2"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
    ], [seq_vi("seq", TP.FLOAT), vi("x", TP.FLOAT, [2]), helper.make_value_info("o", opt_type)],
        [seq_vi("seq2", TP.FLOAT), vi("has", TP.BOOL, [])])
    kiln_binary = os.environ.get("KILN_BINARY", "build/kiln")
    package = pkg.export(tmp_path / "seq.tar")
    a, x = np.arange(3, dtype=np.float32), np.array([5, 6], np.float32)
    cases = [({"seq[0]": a, "x": x}, [a, x], False),
             ({"seq[]": np.zeros(0, np.float32), "x": x, "o": x}, [x], True)]
    for feeds, want, has in cases:
        np.savez(tmp_path / "in.npz", **feeds)
        subprocess.run([kiln_binary, "run", package, "--inputs", str(tmp_path / "in.npz"),
                        "--output", str(tmp_path / "out.npz")], check=True, capture_output=True)
        out = np.load(tmp_path / "out.npz")
        assert sorted(out.files) == sorted([f"output_0[{j}]" for j in range(len(want))] +
                                           ["output_1"])
        for j, w in enumerate(want):
            np.testing.assert_array_equal(out[f"output_0[{j}]"], w)
        assert bool(out["output_1"]) == has
    np.savez(tmp_path / "in.npz", **{"seq[1]": a, "x": x})
    r = subprocess.run([kiln_binary, "run", package, "--inputs", str(tmp_path / "in.npz")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "has no element 0 ('seq[0]')" in r.stderr
