"""examples/python/pytorch_to_kiln.py runs (--smoke: a tiny network, its
result checked against PyTorch by the example itself; no timing asserted)."""

import os
import subprocess
import sys

from conftest import SOURCE_DIR


def test_example_smoke():
    example = os.path.join(SOURCE_DIR, "examples", "python", "pytorch_to_kiln.py")
    r = subprocess.run([sys.executable, example, "--smoke"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kiln's output matches PyTorch's" in r.stdout
    assert "tuned 0 of 2 workloads" in r.stdout or "tuned" in r.stdout
    for runtime in ("kiln", "PyTorch", "ONNX Runtime"):
        assert f"  {runtime}" in r.stdout, r.stdout
