"""Fixtures of the Python API tests (registered with ctest as python_*; see
python/CMakeLists.txt). Run them by hand with:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python

Models come from bench/models/generate.py (PyTorch, fixed seed) into
$KILN_TEST_WORK_DIR (build/python_tests under ctest), generated once and
shared by the test files under a lock.
"""

import contextlib
import fcntl
import os
import subprocess
import sys

import numpy as np
import pytest

SOURCE_DIR = os.environ.get(
    "KILN_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WORK_DIR = os.environ.get("KILN_TEST_WORK_DIR", os.path.join(SOURCE_DIR, "build", "python_tests"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench", "models"))  # generate.build_model


@contextlib.contextmanager
def locked(name):
    """Serializes the ctest processes that share WORK_DIR."""
    os.makedirs(WORK_DIR, exist_ok=True)
    with open(os.path.join(WORK_DIR, name + ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def generated_model(name):
    """WORK_DIR/models/NAME/{model.onnx,input.npz,expected.npz}, made once."""
    out = os.path.join(WORK_DIR, "models")
    with locked("models"):
        if not os.path.isfile(os.path.join(out, name, "expected.npz")):
            subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench/models/generate.py"),
                            "--models", name, "--out", out], check=True)
    return os.path.join(out, name)


@pytest.fixture(scope="session")
def tiny():
    """The "tiny" ResNet-style block: (model path, {input: array}, expected output 0)."""
    d = generated_model("tiny")
    inputs = dict(np.load(os.path.join(d, "input.npz")))
    expected = np.load(os.path.join(d, "expected.npz"))["output_0"]
    return os.path.join(d, "model.onnx"), inputs, expected


@pytest.fixture(scope="session")
def tiny_package(tiny, tmp_path_factory):
    import kiln
    path = str(tmp_path_factory.mktemp("pkg") / "tiny.tar")
    kiln.build(tiny[0]).export(path)
    return path


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))
