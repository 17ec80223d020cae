#!/usr/bin/python3
"""kiln --precision bf16 against kiln fp32 (kiln's own packages), in one run.

For each model directory written by generate.py (model.onnx, input.npz): builds the model
twice with kiln, fp32 and --precision bf16, both untuned (fallback configs: the builds get
--no-shipped-logs, since kiln's shipped logs hold fp32 records only; --shipped-logs keeps
them, --tuning-log DB uses a database), then
  - accuracy: runs both packages on --samples random inputs (standard normal, seed
    --seed, the shapes of input.npz) and reports, over the samples, the output cosine
    similarity of bf16 to fp32 (min and mean) and the max relative error
    max|bf16 - fp32| / max|fp32| (max and median);
  - latency: times both in interleaved rounds (kiln run --repeat N --print-time, fp32 then
    bf16 in each round) and reports the medians of the rounds' medians and their ratio.
Prints a markdown table (and each round's times) to stdout.

  bf16_bench.py --kiln build/kiln DIR/resnet18 DIR/resnet50 [--samples 50] [--rounds 5]
                [--repeat 20] [--tuning-log DB] [--shipped-logs] [--work DIR]

Exit 77 (the tests' skip code) when numpy is missing or kiln refuses --precision bf16 on
this machine (no avx512bf16); 1 when a step fails.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("bf16_bench: SKIP: numpy missing (python3-numpy)")
    sys.exit(77)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if "needs avx512bf16" in r.stderr:
            print(f"bf16_bench: SKIP: {r.stderr.strip()}")
            sys.exit(77)
        sys.exit(f"bf16_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def median_ms(text):
    """The median of kiln run --print-time's table (a header "... median (ms) ..." over
    one row of numbers)."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "median (ms)" in line:
            cols = line.split("(ms)")
            idx = [j for j, c in enumerate(cols) if "median" in c][0]
            return float(lines[i + 1].split()[idx])
    m = re.search(r"median[^0-9]*([0-9.]+)", text)
    if m:
        return float(m.group(1))
    sys.exit(f"bf16_bench: no median in kiln run's output:\n{text}")


def outputs(kiln, pkg, inputs, out):
    run([kiln, "run", pkg, "--inputs", inputs, "--output", out])
    with np.load(out) as f:
        return [f[k].astype(np.float64).ravel() for k in sorted(f.files)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", required=True)
    p.add_argument("model_dirs", nargs="+")
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tuning-log", default=None)
    p.add_argument("--shipped-logs", action="store_true",
                   help="let the builds use kiln's shipped (fp32) records")
    p.add_argument("--work", default=None, help="folder for packages and samples (default: a "
                   "temporary one)")
    args = p.parse_args()
    tune = ["--tuning-log", args.tuning_log] if args.tuning_log else []
    if not args.shipped_logs:
        tune.append("--no-shipped-logs")
    tmp = tempfile.TemporaryDirectory(prefix="bf16_bench-")
    work = args.work or tmp.name
    os.makedirs(work, exist_ok=True)
    rows = []
    for d in args.model_dirs:
        name = os.path.basename(os.path.normpath(d))
        model, given = os.path.join(d, "model.onnx"), os.path.join(d, "input.npz")
        pk32 = os.path.join(work, f"{name}_fp32.tar")
        pk16 = os.path.join(work, f"{name}_bf16.tar")
        rep32 = run([args.kiln, "build", model, "-o", pk32] + tune).splitlines()
        rep16 = run([args.kiln, "build", model, "-o", pk16, "--precision", "bf16"] + tune
                    ).splitlines()
        with np.load(given) as f:
            shapes = {k: (f[k].shape, f[k].dtype) for k in f.files}
        rng = np.random.default_rng(args.seed)
        cos, rel = [], []
        for s in range(args.samples):
            sample = os.path.join(work, f"{name}_sample.npz")
            np.savez(sample, **{k: rng.standard_normal(shape).astype(dt)
                                for k, (shape, dt) in shapes.items()})
            o32 = outputs(args.kiln, pk32, sample, os.path.join(work, f"{name}_o32.npz"))
            o16 = outputs(args.kiln, pk16, sample, os.path.join(work, f"{name}_o16.npz"))
            a, b = np.concatenate(o32), np.concatenate(o16)
            cos.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
            rel.append(float(np.max(np.abs(b - a)) / max(np.max(np.abs(a)), 1e-30)))
        times = {"fp32": [], "bf16": []}
        for _ in range(args.rounds):
            for key, pkg in (("fp32", pk32), ("bf16", pk16)):
                times[key].append(median_ms(run([args.kiln, "run", pkg, "--inputs", given,
                                                 "--repeat", str(args.repeat), "--print-time"])))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((name, med, times, cos, rel, rep32[0] if rep32 else "",
                     rep16[0] if rep16 else ""))
    print(f"| model | fp32 ms | bf16 ms | fp32 / bf16 | cosine min | cosine mean "
          f"| max rel err (max) | max rel err (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, med, _, cos, rel, _, _ in rows:
        print(f"| {name} | {med['fp32']:.2f} | {med['bf16']:.2f} | "
              f"{med['fp32'] / med['bf16']:.2f}x | {min(cos):.6f} | {statistics.mean(cos):.6f} | "
              f"{max(rel):.2e} | {statistics.median(rel):.2e} |")
    print()
    for name, _, times, cos, _, r32, r16 in rows:
        print(f"{name}: {len(cos)} samples; rounds (ms) " +
              "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in times.items()))
        print(f"{name} fp32: {r32}")
        print(f"{name} bf16: {r16}")


if __name__ == "__main__":
    main()
