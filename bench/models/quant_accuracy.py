#!/usr/bin/env python3
"""How far an int8 model is from its float original, on many inputs.

    quant_accuracy.py MODEL.onnx (--qdq MODEL.qdq.onnx | --calibration DATA [--calibrate M])
                      [--runner ort|kiln] [--samples 500] [--inputs STACKED.npz] [--seed 0]
                      [--quantize-also OPS] [--reduce-range]
                      [--kiln build/kiln] [--min-cosine C] [--min-top1 T] [--work DIR]

Inputs: --inputs gives them ([N, *input shape] per model input, kiln quantize's --calibration
form; the first --samples are used); otherwise --samples of them are generated, standard normal,
in the model's input shapes (those must be static). Calibrating on the evaluation inputs
flatters the result: pass different ones.

Runners, each running the float and the int8 model on every input:
  ort   ONNX Runtime (bench/peers/ort_run.py samples, in the peers' venv bench/.venv) on
        MODEL.onnx and on the QDQ file (--qdq, or written here by `kiln quantize` from
        --calibration).
  kiln  kiln's packages: `kiln build` and `kiln build --precision int8 --calibration DATA`, each
        run by `kiln run`. Until kiln imports QDQ models the int8 build fails; this runner then
        prints kiln's message and exits 3.
  kiln-vs-ort  not float against int8 but kiln's int8 package against ONNX Runtime on the QDQ
        file `kiln quantize` writes with the same options: both implement ONNX's QDQ semantics,
        so they should agree to within a quantization step of the output (--max-abs bounds it).

Per model output it prints the cosine similarity of float and int8 results (mean and worst over
the inputs, each input's output flattened), the max relative error (max |int8 - float| over
max |float|) and, when the output's last axis has more than one element, the top-1 agreement
(argmax along that axis). --min-cosine / --min-top1 make it exit 1 below those (for tests).

Why a script and not a kiln command: the peer runner (ONNX Runtime) lives in the peers' Python
venv, and kiln itself must never need Python or ORT; this is a bench tool, like run_bench.py.
The runners that need ORT exit 77 (the tests' skip code), saying what is missing, without it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
import ort_run  # noqa: E402  (bench/peers: ONNX Runtime in the peers' venv)


def fail(msg, code=1):
    print(f"quant_accuracy: {msg}", file=sys.stderr)
    sys.exit(code)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
    return p.stdout


def model_inputs(path):
    m = onnx.load(path)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        out.append((i.name, onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type], dims))
    return out


def make_inputs(args, work):
    """The stacked input file the runners read, and the sample count."""
    inputs = model_inputs(args.model)
    if args.inputs:
        data = dict(np.load(args.inputs))
        n = min(args.samples, min(data[name].shape[0] for name, _, _ in inputs))
        stacked = {name: data[name][:n] for name, _, _ in inputs}
    else:
        rng = np.random.default_rng(args.seed)
        stacked = {}
        for name, dtype, dims in inputs:
            if any(d is None for d in dims):
                fail(f"input '{name}' has dynamic axes {dims}: give --inputs")
            if not np.issubdtype(dtype, np.floating):
                fail(f"input '{name}' is {dtype}: give --inputs")
            stacked[name] = rng.standard_normal([args.samples] + dims).astype(dtype)
        n = args.samples
    path = os.path.join(work, "inputs.npz")
    np.savez(path, **stacked)
    return path, stacked, n


def ort_outputs(model, inputs_npz, work, tag):
    out = os.path.join(work, f"ort_{tag}.npz")
    run(ort_run.command("samples", model, inputs_npz, out))
    names = [o.name for o in onnx.load(model, load_external_data=False).graph.output]
    with np.load(out) as got:
        return [(name, got[f"output_{i}"]) for i, name in enumerate(names)]


def kiln_runtime(kiln):
    """kiln's Python runtime from the build that holds `kiln` (build/python), or None.

    Loading a package once and running every input in-process is ~100x faster than one
    `kiln run` per input, which is what makes 500 inputs of ResNet-50 or the encoder fit."""
    pydir = os.path.join(os.path.dirname(os.path.abspath(kiln)), "python")
    if not os.path.isdir(os.path.join(pydir, "kiln")):
        return None
    sys.path.insert(0, pydir)
    try:
        import kiln.runtime as rt
        return rt
    except ImportError:
        return None
    finally:
        sys.path.remove(pydir)


def kiln_outputs(kiln, package, stacked, n, work, tag):
    rt = kiln_runtime(kiln)
    if rt is not None:
        m = rt.load(package)
        outs = [[] for _ in range(m.num_outputs)]
        for k in range(n):
            got = m.run(**{name: np.ascontiguousarray(a[k]) for name, a in stacked.items()})
            for acc, g in zip(outs, got):
                acc.append(g)
        return [(f"output_{i}", np.stack(acc)) for i, acc in enumerate(outs)]
    results = None
    for k in range(n):
        sample = os.path.join(work, "sample.npz")
        np.savez(sample, **{name: a[k] for name, a in stacked.items()})
        out = os.path.join(work, f"kiln_{tag}.npz")
        run([kiln, "run", package, "--inputs", sample, "--output", out])
        got = np.load(out)
        names = sorted(got.files, key=lambda s: int(s.split("_")[-1]))
        if results is None:
            results = [(name, []) for name in names]
        for (name, acc), key in zip(results, names):
            acc.append(got[key])
    return [(name, np.stack(acc)) for name, acc in results]


def metrics(ref, got):
    a = ref.reshape(ref.shape[0], -1).astype(np.float64)
    b = got.reshape(got.shape[0], -1).astype(np.float64)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    cos = np.where(na * nb > 0, (a * b).sum(1) / np.maximum(na * nb, 1e-300),
                   np.where(na == nb, 1.0, 0.0))
    rel = np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)
    top1 = None
    if ref.ndim >= 2 and ref.shape[-1] > 1:
        top1 = float((ref.argmax(-1) == got.argmax(-1)).mean())
    return float(cos.mean()), float(cos.min()), float(rel), top1


def top1_margins(ref, got):
    """Why top-1 agreement can be low while cosine is high: per row of the last axis, the float
    model's margin (top-1 minus top-2 logit) against the int8 error in that row. A row whose
    margin exceeds twice its largest error cannot change its argmax, so every disagreement is
    on a near-tied row (margin <= 2x error). The share of near-tied rows says how much of the
    top-1 miss is the model's outputs being near ties (random weights) rather than the error
    being large. Returns (share of near-tied rows, top-1 agreement on them,
    median margin / logit std)."""
    r = ref.reshape(-1, ref.shape[-1]).astype(np.float64)
    g = got.reshape(-1, got.shape[-1]).astype(np.float64)
    top2 = np.sort(r, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    err = np.abs(r - g).max(axis=1)
    tied = margin <= 2 * err
    agree = r.argmax(1) == g.argmax(1)
    share = float(tied.mean())
    agree_tied = float(agree[tied].mean()) if tied.any() else float("nan")
    spread = np.median(margin / np.maximum(r.std(axis=1), 1e-30))
    return share, agree_tied, float(spread)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--qdq")
    ap.add_argument("--calibration")
    ap.add_argument("--calibrate", default="max")
    ap.add_argument("--quantize-also", default=None,
                    help="passed to kiln quantize / kiln build --precision int8 (e.g. MatMul: "
                         "attention's activation x activation MatMuls in int8 too)")
    ap.add_argument("--reduce-range", action="store_true",
                    help="passed to kiln quantize / kiln build --precision int8: 7-bit weights")
    ap.add_argument("--runner", choices=["ort", "kiln", "kiln-vs-ort"], default="ort")
    ap.add_argument("--max-abs", type=float)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--min-cosine", type=float)
    ap.add_argument("--min-top1", type=float)
    ap.add_argument("--work")
    args = ap.parse_args()
    if args.samples < 1:
        fail("--samples must be at least 1")
    if args.runner == "ort" and not (args.qdq or args.calibration):
        fail("the ort runner needs --qdq MODEL.qdq.onnx or --calibration DATA")
    if args.runner != "ort" and not args.calibration:
        fail(f"the {args.runner} runner needs --calibration DATA (kiln build --precision int8)")
    if args.runner != "kiln" and ort_run.missing():
        fail(f"SKIP: the {args.runner} runner needs ONNX Runtime: {ort_run.missing()}",
             ort_run.SKIP)

    also = ["--quantize-also", args.quantize_also] if args.quantize_also else []
    if args.reduce_range:
        also += ["--reduce-range"]
    with tempfile.TemporaryDirectory(prefix="kiln-quant-accuracy-") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        inputs_npz, stacked, n = make_inputs(args, work)
        try:
            if args.runner == "ort":
                qdq = args.qdq
                if not qdq:
                    qdq = os.path.join(work, "model.qdq.onnx")
                    run([args.kiln, "quantize", args.model, "-o", qdq, "--calibration",
                         args.calibration, "--calibrate", args.calibrate] + also)
                ref = ort_outputs(args.model, inputs_npz, work, "fp32")
                got = ort_outputs(qdq, inputs_npz, work, "int8")
            else:
                fp32, int8 = os.path.join(work, "fp32.tar"), os.path.join(work, "int8.tar")
                try:
                    run([args.kiln, "build", args.model, "-o", int8, "--precision", "int8",
                         "--calibration", args.calibration, "--calibrate", args.calibrate] + also)
                except RuntimeError as e:
                    fail(f"kiln cannot build the int8 model:\n{e}", 3)
                got = kiln_outputs(args.kiln, int8, stacked, n, work, "int8")
                if args.runner == "kiln":
                    run([args.kiln, "build", args.model, "-o", fp32])
                    ref = kiln_outputs(args.kiln, fp32, stacked, n, work, "fp32")
                else:
                    qdq = os.path.join(work, "model.qdq.onnx")
                    run([args.kiln, "quantize", args.model, "-o", qdq, "--calibration",
                         args.calibration, "--calibrate", args.calibrate] + also)
                    ref = ort_outputs(qdq, inputs_npz, work, "qdq")
        except RuntimeError as e:
            fail(str(e))

    ok = True
    for (name, r), (_, g) in zip(ref, got):
        cmean, cmin, rel, top1 = metrics(r, g)
        line = (f"{name} {list(r.shape[1:])}: cosine mean {cmean:.6f} min {cmin:.6f}, "
                f"max rel err {rel:.3e}")
        if top1 is not None:
            line += f", top-1 agreement {100 * top1:.1f}%"
            share, agree_tied, spread = top1_margins(r, g)
            line += (f" (near-tied rows, top-1 margin <= 2x the int8 error: {100 * share:.1f}%, "
                     + (f"agreement on them {100 * agree_tied:.1f}%" if share > 0 else "none")
                     + f"; median margin "
                     f"{spread:.3f} logit std)")
        absdiff = float(np.abs(r.astype(np.float64) - g).max())
        if args.runner == "kiln-vs-ort":
            line += f", max abs diff {absdiff:.3e}"
        print(line + f" ({n} inputs, {args.runner})")
        if args.max_abs is not None and absdiff > args.max_abs:
            print(f"  FAIL: max abs diff {absdiff:.3e} > {args.max_abs}")
            ok = False
        if args.min_cosine is not None and cmin < args.min_cosine:
            print(f"  FAIL: worst cosine {cmin:.6f} < {args.min_cosine}")
            ok = False
        if args.min_top1 is not None and top1 is not None and top1 < args.min_top1:
            print(f"  FAIL: top-1 agreement {top1:.3f} < {args.min_top1}")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
