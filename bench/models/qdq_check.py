#!/usr/bin/python3
"""Builds and runs a quantized model with kiln and with ONNX Runtime on the same file and
compares the outputs in quantized units (the output's scale from info.json, written by
quantized_models.py):

  qdq_check.py --kiln build/kiln DIR/<model> [--max-units 1] [--time] [--repeat 20]

Prints one line per output: max |kiln - ort| in units of the output scale (integer outputs:
in their own units; a float output that is not quantized: relative, checked with --max-rel), the fraction of exactly equal elements, and with --time
kiln's and ORT's median latency (2 threads). Exit 1 when an output differs by more than
--max-units, 77 (the tests' skip code) when the peers' venv (bench/.venv) or its onnxruntime is
missing. ONNX Runtime runs through bench/peers/ort_run.py in that venv.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import ort_run  # noqa: E402  (bench/peers: ONNX Runtime in the peers' venv)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"qdq_check: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def median_ms(text):
    """The median of ort_run.py bench's line ("median X ms") or of kiln run --print-time's table
    (a header "mean (ms)  median (ms) ..." over one row of numbers)."""
    m = re.search(r"median ([0-9.]+) ms", text)
    if m:
        return float(m.group(1))
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "median (ms)" in line:
            return float(lines[i + 1].split()[1])
    return float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", required=True)
    p.add_argument("model_dir")
    p.add_argument("--max-units", type=float, default=1.0,
                   help="for the quantized output and integer outputs")
    p.add_argument("--max-rel", type=float, default=None,
                   help="for float outputs that are not quantized (default: report only)")
    p.add_argument("--time", action="store_true")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()

    if ort_run.missing():
        print(f"qdq_check: SKIP: {ort_run.missing()}")
        sys.exit(ort_run.SKIP)
    d = args.model_dir
    model, inputs = os.path.join(d, "model.onnx"), os.path.join(d, "input.npz")
    with open(os.path.join(d, "info.json")) as f:
        scale = json.load(f)["output_scale"]
    pkg, out = os.path.join(d, "kiln.tar"), os.path.join(d, "kiln_out.npz")
    run([args.kiln, "build", model, "-o", pkg])
    run([args.kiln, "run", pkg, "--inputs", inputs, "--output", out])
    ort_npz = os.path.join(d, "ort_out.npz")
    run(ort_run.command("run", model, inputs, ort_npz))
    ort = np.load(ort_npz)
    onames = [o.name for o in onnx.load(model, load_external_data=False).graph.output]
    got = np.load(out)
    name = os.path.basename(os.path.normpath(d))
    worst = 0.0
    failed = False
    for i, oname in enumerate(onames):
        o = ort[f"output_{i}"]
        ref = o.astype(np.float64)
        k = got[f"output_{i}"].astype(np.float64)
        diff = np.abs(k - ref)
        is_float = o.dtype == np.float32
        if (scale > 0 and i == 0) or not is_float:
            units = diff / scale if is_float else diff
            worst = max(worst, units.max())
            what = f"scale {scale:.4g}" if is_float else str(o.dtype)
            print(f"{name} {oname} {list(ref.shape)}: max diff {units.max():.3g} units "
                  f"({what}), {np.mean(units < 0.5) * 100:.2f}% exact")
        else:
            rel = diff.max() / max(np.abs(ref).max(), 1e-30)
            print(f"{name} {oname} {list(ref.shape)}: max abs diff {diff.max():.3g}, rel "
                  f"{rel:.3g} (float output), {np.mean(diff == 0) * 100:.2f}% equal")
            if args.max_rel is not None and not rel <= args.max_rel:
                print(f"qdq_check: FAIL: {name} {oname} differs from ONNX Runtime by {rel:.3g} "
                      f"relative (> {args.max_rel})")
                failed = True
    if args.time:
        k = run([args.kiln, "run", pkg, "--inputs", inputs, "--repeat", str(args.repeat),
                 "--print-time"])
        o = run(ort_run.command("bench", model, inputs, "--repeat", args.repeat,
                                "--warmup", 3))
        km, om = median_ms(k), median_ms(o)
        print(f"{name} latency median: kiln {km:.3f} ms, ort {om:.3f} ms, kiln/ort {km / om:.2f}")
    if worst > args.max_units:
        print(f"qdq_check: FAIL: {name} differs from ONNX Runtime by {worst:.3g} units "
              f"(> {args.max_units})")
        failed = True
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
