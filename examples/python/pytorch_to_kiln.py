#!/usr/bin/python3
"""PyTorch -> ONNX -> kiln.build -> run, checked against PyTorch and timed
side by side with PyTorch and ONNX Runtime (the `onnxruntime` Python
package, in this Python or in kiln's peers' venv bench/.venv; see README.md
beside this file).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/pytorch_to_kiln.py
    ... --model resnet18 --size 224 --trials 32 --tuning-log resnet18.db   # tune first
    ... --smoke      # the test suite's run: a tiny network, results checked, no timing asserted
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_model(name):
    """An eval-mode PyTorch network: a torchvision model, or "tiny" (a conv
    block with BatchNorm, a residual add and a classifier)."""
    torch.manual_seed(0)
    if name == "tiny":
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    else:
        model = getattr(torchvision.models, name)(weights=None)
    return model.eval()


def to_onnx(model, x):
    """The model as ONNX bytes (kiln.build takes bytes, a path or an onnx.ModelProto)."""
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, (x,), buf, input_names=["input"], output_names=["output"],
                          opset_version=13)
    return buf.getvalue()


def time_ms(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def onnxruntime_ms(onnx_bytes, x, repeat):
    """ONNX Runtime's median ms and which one, or (None, why). The `onnxruntime`
    Python package when this Python imports it, else the one in kiln's peers'
    venv (bench/.venv, made by scripts/peers-venv.sh or scripts/install-deps.sh)
    through bench/peers/ort_run.py, on the same model and input."""
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
        return time_ms(lambda: sess.run(None, {"input": x}), repeat), "Python, in-process"
    except ImportError:
        pass
    sys.path.insert(0, os.path.join(REPO, "bench", "peers"))
    import ort_run  # bench/peers: where the peers' venv is, and its ORT runner
    why = ort_run.missing()
    if why:
        return None, f"no onnxruntime in this Python, and {why}"
    with tempfile.TemporaryDirectory(prefix="kiln-example-") as tmp:
        with open(os.path.join(tmp, "model.onnx"), "wb") as f:
            f.write(onnx_bytes)
        np.savez(os.path.join(tmp, "input.npz"), input=x)
        r = subprocess.run(ort_run.command("bench", os.path.join(tmp, "model.onnx"),
                                           os.path.join(tmp, "input.npz"), "--threads",
                                           kiln.runtime.num_threads(), "--repeat", repeat),
                           capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", r.stdout)
    if r.returncode != 0 or not m:
        return None, "ort_run.py bench failed: " + (r.stderr or r.stdout).strip()[-200:]
    return float(m.group(1)), "bench/.venv"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="resnet18", help="a torchvision model name, or 'tiny'")
    p.add_argument("--size", type=int, default=224, help="input height and width")
    p.add_argument("--tuning-log", help="records database (kiln tune's); used by the build")
    p.add_argument("--trials", type=int, default=0, help="tune this many trials per task first")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per runtime")
    p.add_argument("--output", help="also export the package here (model.tar)")
    p.add_argument("--smoke", action="store_true", help="tiny model, 16x16, 3 runs (tests)")
    a = p.parse_args()
    if a.smoke:
        a.model, a.size, a.repeat = "tiny", 16, 3
    torch.set_num_threads(kiln.runtime.num_threads())

    # 1. PyTorch -> ONNX.
    model = make_model(a.model)
    x = torch.randn(1, 3, a.size, a.size, generator=torch.Generator().manual_seed(1))
    onnx_bytes = to_onnx(model, x)
    with torch.no_grad():
        expected = model(x).numpy()

    # 2. Tune (optional) and build.
    if a.trials:
        if not a.tuning_log:
            p.error("--trials needs --tuning-log")
        kiln.tune(onnx_bytes, a.tuning_log, trials=a.trials, callbacks=kiln.print_progress)
    pkg = kiln.build(onnx_bytes, tuning_log=a.tuning_log)
    print(pkg.report)
    if a.output:
        pkg.export(a.output)

    # 3. Run and check against PyTorch.
    m = pkg.load()
    out = m.run(input=x.numpy())[0]
    err = float(np.max(np.abs(out - expected)) / np.max(np.abs(expected)))
    print(f"max relative error against PyTorch: {err:.2e}")
    if err > 1e-4:
        raise SystemExit(f"kiln's output differs from PyTorch's (relative error {err:.2e})")
    print("kiln's output matches PyTorch's")

    # 4. Time it side by side (median ms per run, same thread count).
    kiln_ms = m.benchmark(repeat=a.repeat).median_ms
    with torch.no_grad():
        torch_ms = time_ms(lambda: model(x), a.repeat)
    ort_ms, ort = onnxruntime_ms(onnx_bytes, x.numpy(), a.repeat)
    print(f"\n{a.model} [1, 3, {a.size}, {a.size}], {kiln.runtime.num_threads()} threads, "
          f"median of {a.repeat} runs:")
    print(f"  kiln          {kiln_ms:9.3f} ms  (tuned {pkg.report.tuned} of "
          f"{pkg.report.total} workloads)")
    print(f"  PyTorch       {torch_ms:9.3f} ms  ({torch_ms / kiln_ms:.2f}x kiln's time)")
    if ort_ms is None:
        print(f"  ONNX Runtime  not timed: {ort} (see examples/python/README.md)")
    else:
        print(f"  ONNX Runtime  {ort_ms:9.3f} ms  ({ort_ms / kiln_ms:.2f}x kiln's time; {ort})")


if __name__ == "__main__":
    main()
