"""kiln.build: models as paths, bytes and ModelProtos; the report; a zoo model
against PyTorch; errors with kiln's messages."""

import os

import numpy as np
import onnx
import pytest

import kiln
from conftest import WORK_DIR, rel_err


def test_build_path_bytes_proto(tiny, tmp_path):
    path, inputs, expected = tiny
    proto = onnx.load(path)
    with open(path, "rb") as f:
        data = f.read()
    for model in (path, data, proto):
        pkg = kiln.build(model)
        out = pkg.export(tmp_path / "m.tar")
        assert os.path.isfile(out)
        assert rel_err(kiln.runtime.load(out).run(**inputs)[0], expected) <= 1e-4
    assert rel_err(pkg.load().run(**inputs)[0], expected) <= 1e-4


def test_report(tiny):
    r = kiln.build(tiny[0], shipped_logs=False).report
    assert r.total == 3 and r.tuned == 0 and len(r.fallbacks) == 3
    assert r.kernels == r.templated_kernels + r.generic_kernels
    # Untuned, the 3x3 stride-1 convolution runs Winograd (its untuned default).
    assert {w.key.split("(")[0] for w in r.workloads} == {
        "conv2d_NCHWc.x86", "conv2d_winograd_NCHWc.x86", "dense_pack.x86"}
    assert all(w.origin == "fallback" and not w.configured for w in r.workloads)
    text = str(r)
    assert "tuned: 0 of 3 workloads" in text and "fallback configs for:" in text


def test_unknown_config_key_is_noted(tiny):
    # A config whose workload key matches nothing is named, never silently ignored.
    r = kiln.build(tiny[0], shipped_logs=False,
                   configs={"dense_pack.x86(nope)": {"knobs": {}}}).report
    assert any("'dense_pack.x86(nope)' matches no workload" in n for n in r.notes)
    assert r.total == 3 and r.configured == 0


def test_shared_library_format(tiny, tmp_path):
    path, inputs, expected = tiny
    pkg = kiln.build(path, output_format="so")
    so = pkg.export(tmp_path / "m.so")
    assert rel_err(kiln.runtime.load(so).run(**inputs)[0], expected) <= 1e-4
    tar = pkg.export(tmp_path / "m.tar", format="tar")
    assert rel_err(kiln.runtime.load(tar).run(**inputs)[0], expected) <= 1e-4


def test_resnet18_against_pytorch(tmp_path):
    """ResNet-18 (torchvision, bench/models/generate.py's weights and BN
    statistics) exported with dynamic height and width, bound to 64x64 by
    input_shapes, built and run by kiln, compared with PyTorch."""
    import torch
    import generate
    torch.set_num_threads(2)
    model, _ = generate.build_model("resnet18")
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(7))
    path = str(tmp_path / "resnet18.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                          opset_version=13, dynamic_axes={"input": {2: "h", 3: "w"}})
        expected = model(x).numpy()
    pkg = kiln.build(path, input_shapes={"input": (1, 3, 64, 64)})
    assert pkg.report.total > 5
    m = pkg.load()
    assert m.input_info()[0].shape == (1, 3, 64, 64)
    assert rel_err(m.run(input=x.numpy())[0], expected) <= 1e-4


def test_model_errors(tmp_path):
    with pytest.raises(kiln.ModelError, match="missing.onnx"):
        kiln.build(tmp_path / "missing.onnx")
    with pytest.raises(kiln.ModelError, match="<model bytes>") as e:
        kiln.build(b"\x08\x07garbage, not a model")
    assert "kiln-pymodel" not in str(e.value)  # the temporary file is not named
    with pytest.raises(TypeError):
        kiln.build(12345)
    # An unsupported operator is named.
    node = onnx.helper.make_node("Frobnicate", ["x"], ["y"], name="the_det")
    g = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])])
    proto = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 13)])
    with pytest.raises(kiln.ModelError, match="'the_det' \\(Frobnicate\\)"):
        kiln.build(proto)


def test_option_errors(tiny, tmp_path):
    path = tiny[0]
    with pytest.raises(kiln.InvalidInputError, match="output_format"):
        kiln.build(path, output_format="zip")
    with pytest.raises(kiln.KilnError, match="mcpu|target"):
        kiln.build(path, target="llvm -mcpu=not-a-cpu")
    with pytest.raises(kiln.ModelError):
        kiln.build(path, input_shapes={"no_such_input": (1, 3, 16, 16)})
    with pytest.raises(kiln.KilnError, match="missing.db"):
        kiln.build(path, tuning_log=tmp_path / "missing.db")
    with pytest.raises(kiln.InvalidInputError, match="require_tuned"):
        kiln.build(path, require_tuned=True, shipped_logs=False)


def test_require_tuned_names_workloads(tiny, tmp_path):
    db = tmp_path / "empty.db"
    kiln.records.open(db, create=True)
    with pytest.raises(kiln.KilnError, match="3 of 3 workloads have no record") as e:
        kiln.build(tiny[0], tuning_log=db, require_tuned=True, shipped_logs=False)
    assert "conv2d_NCHWc.x86" in str(e.value)


def test_export_refuses_model_path(tiny, tmp_path):
    model = tmp_path / "m.onnx"
    with open(tiny[0], "rb") as f:
        model.write_bytes(f.read())
    pkg = kiln.build(model)
    with pytest.raises(kiln.KilnError, match="refusing to overwrite"):
        pkg.export(model)
    with pytest.raises(kiln.KilnError):
        pkg.export(tmp_path / "no" / "such" / "dir" / "m.tar")
    keep = tmp_path / "keep.tar"
    keep.write_bytes(b"kept")
    keep.chmod(0o444)
    with pytest.raises(kiln.KilnError, match="keep.tar"):
        pkg.export(keep)
    assert keep.read_bytes() == b"kept"
    assert not os.path.exists(tmp_path / "no")


def test_builds_from_two_threads(tiny):
    """Concurrent kiln.build calls are safe (they take turns in the compiler)."""
    import threading
    path, inputs, expected = tiny
    results, errors = [None, None], []

    def work(i):
        try:
            results[i] = kiln.build(path).load().run(**inputs)[0]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(rel_err(r, expected) <= 1e-4 for r in results)


def test_precision_int8_matches_the_cli(tiny, tmp_path):
    """precision="int8" runs kiln quantize's code on calibration= and builds the QDQ model,
    as `kiln build --precision int8 --calibration` does: the same kernels and the same
    outputs; calibrate= and keep_float= are --calibrate and --keep-float."""
    import subprocess
    path, inputs, expected = tiny
    calib = tmp_path / "calib.npz"
    rng = np.random.default_rng(0)
    np.savez(calib, input=rng.standard_normal((8, 1, 3, 16, 16), dtype=np.float32))
    pkg = kiln.build(path, precision="int8", calibration=calib)
    assert any(n.startswith("quantized: 3 of 3 Conv/MatMul/Gemm nodes (8 calibration samples, "
                            "max)") for n in pkg.report.notes), pkg.report.notes
    kernels = [k["op_types"] for k in pkg.graph_json["kernels"]]
    assert any(t.startswith("conv2d_NCHWc_int8") for k in kernels for t in k), kernels
    got = pkg.load().run(**inputs)[0]
    # int8 against the float model (random weights): close, not equal.
    cos = float(np.dot(got.ravel(), expected.ravel())
                / (np.linalg.norm(got) * np.linalg.norm(expected)))
    assert cos >= 0.99 and 0 < rel_err(got, expected) <= 0.1, (cos, rel_err(got, expected))

    tar = tmp_path / "cli.tar"
    subprocess.run([os.environ.get("KILN_BINARY", os.path.join(WORK_DIR, "..", "kiln")), "build",
                    path, "-o", str(tar), "--precision", "int8", "--calibration", str(calib)],
                   check=True, capture_output=True)
    cli = kiln.runtime.load(str(tar))
    assert cli.run(**inputs)[0].tolist() == got.tolist()
    import json
    import tarfile
    with tarfile.open(tar) as t:
        mod = json.load(t.extractfile("mod.json"))
    assert [k["op_types"] for k in mod["kernels"]] == kernels

    kept = kiln.build(path, precision="int8", calibration=calib, calibrate="kl",
                      keep_float=["/fc/Gemm"])
    assert any("quantized: 2 of 3" in n and ", kl)" in n for n in kept.report.notes)
    assert "dense_pack.x86" in {w.key.split("(")[0] for w in kept.report.workloads}

    # reduce_range= is --reduce-range: 7-bit weights, which a target without
    # VNNI multiplies with vpmaddubsw (weight_range=[7] in its workload keys).
    narrow = kiln.build(path, precision="int8", calibration=calib, reduce_range=True,
                        target="llvm -mcpu=haswell")
    keys = [w.key for w in narrow.report.workloads]
    assert any("weight_range=[7]" in k for k in keys), keys
    tar7 = tmp_path / "cli7.tar"
    subprocess.run([os.environ.get("KILN_BINARY", os.path.join(WORK_DIR, "..", "kiln")), "build",
                    path, "-o", str(tar7), "--precision", "int8", "--calibration", str(calib),
                    "--reduce-range", "--target", "llvm -mcpu=haswell"],
                   check=True, capture_output=True)
    with tarfile.open(tar7) as t:
        mod7 = json.load(t.extractfile("mod.json"))
    assert [k["op_types"] for k in mod7["kernels"]] == \
        [k["op_types"] for k in narrow.graph_json["kernels"]]


def test_precision_errors(tiny, tmp_path):
    path = tiny[0]
    with pytest.raises(kiln.InvalidInputError, match="unknown precision 'int4'"):
        kiln.build(path, precision="int4")
    with pytest.raises(kiln.InvalidInputError, match="needs calibration="):
        kiln.build(path, precision="int8")
    with pytest.raises(kiln.InvalidInputError, match='need precision="int8"'):
        kiln.build(path, calibration=tmp_path / "c.npz")
    with pytest.raises(kiln.InvalidInputError, match='need precision="int8"'):
        kiln.build(path, reduce_range=True)
    with pytest.raises(kiln.KilnError, match="missing.npz: no such calibration file"):
        kiln.build(path, precision="int8", calibration=tmp_path / "missing.npz")
    with pytest.raises(kiln.InvalidInputError, match="valid: max, percentile, kl"):
        np.savez(tmp_path / "c.npz", input=np.zeros((1, 1, 3, 16, 16), np.float32))
        kiln.build(path, precision="int8", calibration=tmp_path / "c.npz", calibrate="l2")
    with pytest.raises(kiln.KilnError, match="avx512bf16"):
        kiln.build(path, precision="bf16", target="llvm -mcpu=haswell")
