"""kiln.runtime: load, inputs of every kind, outputs, errors, benchmark, threads."""

import os
import threading
import time

import numpy as np
import pytest

import kiln
from conftest import rel_err


@pytest.fixture()
def module(tiny_package):
    return kiln.runtime.load(tiny_package)


def test_info(module):
    assert module.input_info() == [("input", (1, 3, 16, 16), "float32", "tensor", False)]
    assert module.output_info() == [("output_0", (1, 10), "float32", "tensor", False)]
    assert module.input_info()[0].kind == "tensor" and not module.input_info()[0].optional
    assert module.num_outputs == 1 and module.num_kernels > 0


def test_run_matches_pytorch(module, tiny):
    _, inputs, expected = tiny
    out = module.run(**inputs)
    assert isinstance(out, list) and len(out) == 1
    assert out[0].dtype == np.float32 and out[0].shape == (1, 10)
    assert rel_err(out[0], expected) <= 1e-4


def test_set_input_run_get_output(module, tiny):
    _, inputs, expected = tiny
    module.set_input("input", inputs["input"])
    assert module.run() is None
    assert rel_err(module.get_output(0), expected) <= 1e-4
    module.set_input(0, inputs["input"])  # by index
    module.run()
    assert rel_err(module.get_output(0), expected) <= 1e-4


def test_output_view_without_copy(module, tiny):
    _, inputs, _ = tiny
    module.run(**inputs)
    view = module.get_output(0, copy=False)
    copy = module.get_output(0)
    assert not view.flags.writeable and np.array_equal(view, copy)
    # The view is kiln's storage: the next run overwrites it, the copy stays.
    module.run(input=inputs["input"] * 2)
    assert not np.array_equal(view, copy)
    del module
    assert np.isfinite(view).all()  # the view keeps the module (and its storage) alive


def test_input_view_without_copy(module, tiny):
    _, inputs, expected = tiny
    view = module.input_view("input")
    assert view.flags.writeable and view.shape == (1, 3, 16, 16) and view.dtype == np.float32
    assert view.ctypes.data % 64 == 0  # kiln's aligned storage itself
    np.copyto(view, inputs["input"])
    module.run()
    assert rel_err(module.get_output(0), expected) <= 1e-4
    module.set_input("input", inputs["input"] * 0)
    assert not view.any()  # set_input writes the same storage
    assert module.input_view(0).ctypes.data == view.ctypes.data
    with pytest.raises(IndexError):
        module.input_view(1)


def test_non_contiguous_and_converted_inputs(module, tiny):
    _, inputs, expected = tiny
    x = inputs["input"]
    fortran = np.asfortranarray(x)
    assert not fortran.flags.c_contiguous
    assert rel_err(module.run(input=fortran)[0], expected) <= 1e-4
    big = np.zeros((1, 3, 32, 32), np.float32)
    big[:, :, ::2, ::2] = x
    strided = big[:, :, ::2, ::2]
    assert not strided.flags.c_contiguous
    assert rel_err(module.run(input=strided)[0], expected) <= 1e-4
    swapped = x.astype(">f4")  # big-endian float32: converted to the machine's order
    assert rel_err(module.run(input=swapped)[0], expected) <= 1e-4
    as_list = x.tolist()  # not an array: converted to the input's dtype
    assert rel_err(module.run(input=as_list)[0], expected) <= 1e-4


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_])
def test_wrong_dtype_names_expected_inputs(module, tiny, dtype):
    x = tiny[1]["input"].astype(dtype)
    with pytest.raises(kiln.InvalidInputError) as e:
        module.set_input("input", x)
    msg = str(e.value)
    assert np.dtype(dtype).name in msg and "float32 [1, 3, 16, 16]" in msg
    assert isinstance(e.value, ValueError) and isinstance(e.value, kiln.KilnError)


def test_dtype_kiln_lacks(module):
    with pytest.raises(kiln.InvalidInputError, match="complex64.*expects"):
        module.set_input("input", np.zeros((1, 3, 16, 16), np.complex64))
    with pytest.raises(kiln.InvalidInputError):
        module.set_input("input", np.array([object()] * 768, dtype=object).reshape(1, 3, 16, 16))


def test_wrong_name_shape_index(module, tiny):
    x = tiny[1]["input"]
    with pytest.raises(kiln.InvalidInputError, match="no input 'image'; its inputs are: 'input' float32"):
        module.set_input("image", x)
    with pytest.raises(kiln.InvalidInputError, match=r"\[1, 3, 8, 8\] but the model expects"):
        module.set_input("input", x[:, :, :8, :8])
    with pytest.raises(kiln.InvalidInputError, match="no input 'image'"):
        module.run(image=x)
    with pytest.raises(IndexError):
        module.set_input(3, x)
    with pytest.raises(IndexError):
        module.get_output(1)
    with pytest.raises(TypeError):
        module.set_input(None, x)
    with pytest.raises(kiln.InvalidInputError, match=r"float32 \[\] but the model expects"):
        module.set_input("input", np.float32(1))  # a 0-d array stays 0-d
    with pytest.raises(kiln.InvalidInputError):
        module.set_input("input", None)


def test_get_output_index_out_of_range(module):
    """Issue 65 #17: get_output(-1) gave pybind's "incompatible function arguments"."""
    for index in (-1, 1, 2**40):
        with pytest.raises(IndexError, match=rf"output index {index} is out of range \(1 output: valid 0 to 0\)"):
            module.get_output(index)
        with pytest.raises(IndexError, match="valid 0 to 0"):
            module._m.get_output(index)
    with pytest.raises(TypeError, match="an output is named by its index, not str"):
        module.get_output("output")
    assert module.get_output(np.int64(0)).shape == module.get_output(0).shape


def test_bad_packages(tmp_path):
    with pytest.raises(kiln.KilnError, match="missing.tar"):
        kiln.runtime.load(tmp_path / "missing.tar")
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar file at all" * 10)
    with pytest.raises(kiln.CorruptPackageError, match="bad.tar"):
        kiln.runtime.load(bad)
    empty = tmp_path / "empty.tar"
    empty.write_bytes(b"")
    with pytest.raises(kiln.KilnError):
        kiln.runtime.load(empty)


def test_benchmark(module, tiny):
    module.set_input("input", tiny[1]["input"])
    b = module.benchmark(repeat=7)
    assert len(b.times_ms) == 7
    assert 0 < b.min_ms <= b.median_ms <= b.max_ms and b.min_ms <= b.mean_ms <= b.max_ms
    assert b.std_ms >= 0 and "mean (ms)" in str(b)
    with pytest.raises(kiln.InvalidInputError):
        module.benchmark(repeat=0)
    profile = module.profile()
    assert len(profile) == module.num_kernels and all(k["ms"] >= 0 for k in profile)


def test_two_modules_in_two_threads(tiny_package, tiny):
    """Each thread runs its own GraphModule on its own inputs; the GIL is
    released while kernels run, and the results match a single-threaded run."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 3, 16, 16), dtype=np.float32) for _ in range(2)]
    reference = [kiln.runtime.load(tiny_package).run(input=x)[0] for x in xs]
    errors, results = [], [None, None]

    def work(i):
        try:
            m = kiln.runtime.load(tiny_package)
            for _ in range(50):
                results[i] = m.run(input=xs[i])[0]
                np.testing.assert_array_equal(results[i], reference[i])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not np.array_equal(reference[0], reference[1])


def test_one_module_shared_by_threads(tiny_package, tiny):
    """Calls on one module from several threads are serialized, never torn."""
    m = kiln.runtime.load(tiny_package)
    x = tiny[1]["input"]
    want = m.run(input=x)[0]
    errors = []

    def work():
        try:
            for _ in range(30):
                m.run()
                np.testing.assert_array_equal(m.get_output(0), want)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_run_with_inputs_is_one_call_across_threads(tiny_package):
    """run(input=x) from 8 threads on one module, 500 calls each with its
    own input: every output is the one of that call's input (set_input, run
    and get_output used to be three separately locked calls, and threads
    got each other's outputs)."""
    m = kiln.runtime.load(tiny_package)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 16, 16), dtype=np.float32) for _ in range(8)]
    want = [m.run(input=x)[0] for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(500):
                np.testing.assert_array_equal(m.run(input=xs[i])[0], want[i])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert len({w.tobytes() for w in want}) == 8


def test_run_with_none_names_the_input(module):
    with pytest.raises(kiln.InvalidInputError, match="input 'input' is None, not an array"):
        module.run(input=None)


def test_gil_released_while_kernels_run(module, tiny):
    """Python threads keep running while a module runs: during a benchmark of
    about two seconds in another thread, this thread's loop runs throughout
    and never stalls for long (holding the GIL would stall it for the whole call)."""
    module.set_input("input", tiny[1]["input"])
    one = module.benchmark(repeat=200).median_ms
    repeat = int(min(max(2000 / max(one, 1e-4), 1000), 2_000_000))
    t = threading.Thread(target=module.benchmark, kwargs={"repeat": repeat})
    start = time.perf_counter()
    t.start()
    first = last = None
    longest = 0.0
    while t.is_alive():
        now = time.perf_counter()
        if first is None:
            first = last = now
        longest, last = max(longest, now - last), now
    t.join()
    total = time.perf_counter() - start
    if total < 0.5:
        pytest.skip(f"the benchmark took only {total:.2f} s")
    assert first is not None and last - first > 0.5 * total, (first, last, total)
    assert longest < 0.5 * total, (longest, total)


def test_argument_errors_name_the_argument(module):
    """Found by fuzz/python_api_fuzz.py: numbers out of the C++ range and wrong types gave
    pybind11's "incompatible function arguments" with C++ signatures."""
    for repeat in (2 ** 31, 2 ** 64, -2 ** 40):
        with pytest.raises(kiln.InvalidInputError, match="repeat must be from"):
            module.benchmark(repeat=repeat)
    with pytest.raises(kiln.InvalidInputError, match="warmup must be from 0"):
        module.benchmark(repeat=1, warmup=-1)
    with pytest.raises(kiln.InvalidInputError, match="n must be from"):
        kiln.runtime.set_num_threads(2 ** 64)
    with pytest.raises(IndexError, match="output index 9223372036854775808 is out of range"):
        module.get_output(np.uint64(2 ** 63))
    with pytest.raises(TypeError, match="copy must be True or False, not str"):
        module.get_output(0, copy="no")


def test_build_argument_types(tiny):
    with pytest.raises(TypeError, match="input_shapes must be a dict"):
        kiln.build(tiny[0], input_shapes=["input", 1])
    with pytest.raises(TypeError, match="configs must be a dict"):
        kiln.build(tiny[0], configs=[1])
    with pytest.raises(TypeError, match="target must be a string or None, not int"):
        kiln.build(tiny[0], target=5)
    with pytest.raises(TypeError, match="format must be a string or None, not int"):
        kiln.build(tiny[0]).export("x.tar", format=5)


def _cast_model(tmp_path, to_bf16):
    """x -> Cast -> y, float32 <-> bfloat16, plus a CastLike whose `like`
    input is declared [3, 4] (only its dtype is read)."""
    import onnx
    from onnx import TensorProto, helper
    src, dst = (TensorProto.FLOAT, TensorProto.BFLOAT16) if to_bf16 else (
        TensorProto.BFLOAT16, TensorProto.FLOAT)
    g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=dst),
         helper.make_node("CastLike", ["x", "like"], ["z"])],
        "cast",
        [helper.make_tensor_value_info("x", src, [3, 4]),
         helper.make_tensor_value_info("like", dst, [3, 4])],
        [helper.make_tensor_value_info("y", dst, [3, 4]),
         helper.make_tensor_value_info("z", dst, [3, 4])])
    path = str(tmp_path / f"cast_{int(to_bf16)}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), path)
    return path


def test_bfloat16_as_uint16_bits(tmp_path):
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact in bfloat16
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    # float32 -> bfloat16: uint16 bits come back (round to nearest even of x).
    m = kiln.build(_cast_model(tmp_path, True)).load()
    assert [i.dtype for i in m.input_info()] == ["float32", "bfloat16"]
    y, z = m.run(x=widened, like=np.zeros((1,), np.uint16))  # `like`: any shape
    assert y.dtype == np.uint16 and np.array_equal(y, bits) and np.array_equal(z, bits)
    # bfloat16 -> float32: the input takes the bits.
    m = kiln.build(_cast_model(tmp_path, False)).load()
    y, z = m.run(x=bits, like=np.zeros((3, 4), np.float32))
    assert y.dtype == np.float32 and np.array_equal(y, widened) and np.array_equal(z, widened)
    with pytest.raises(kiln.InvalidInputError, match="bits as a uint16 array"):
        m.run(x=widened, like=np.zeros((3, 4), np.float32))
