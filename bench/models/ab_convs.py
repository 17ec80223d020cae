#!/usr/bin/python3
"""Per-convolution A/B of two kiln builds: each conv alone, paired rounds, best of them.

Usage: ab_convs.py --kiln-a A --kiln-b B --convs DIR [--target T] [--rounds 7] [--repeat 30]
                   [--threads 1] [--build-args "--no-shipped-logs"] [--work DIR] [--force]
                   [NAME ...]

DIR holds one-Conv models (conv_layers.py writes them; NAME ... picks some by file name
without .onnx). For each, kiln A and kiln B build a package (with --build-args: by default
--no-shipped-logs, so the two fallbacks are compared). Where the two mod.so are identical the
conv is reported as "same code" and not timed (--force times it anyway: a build against
itself). Otherwise each round runs both packages, in random order, with `kiln run --profile
--repeat N` (KILN_NUM_THREADS=--threads) on the same random input, and reads the GFLOP/s of
the convolution's kernel (the slowest profile row whose op types name a conv template).
Prints, per conv, each side's best and median and B/A of both (> 1: B is faster), then the
geometric mean of B/A (best) over the convs timed.

Why the best of paired rounds on one thread: on a shared VM whose speed moves in bursts
(one kernel read 41 and 82 GFLOP/s minutes apart, bench/models/results/
window-convs-2026-11-29-zen4.md), the fastest of several rounds is the steadiest estimate of
what the code can do, and one thread does not wait on a descheduled second one. A conv is a
small share of a model, so a whole-model A/B (ab_packages.py) hides what this shows.
"""

import argparse
import hashlib
import os
import random
import statistics
import subprocess
import sys
import tarfile

import numpy as np
import onnx


def fail(msg):
    sys.exit(f"ab_convs.py: {msg}")


def write_input(model_path, npz_path, rng):
    graph = onnx.load(model_path).graph
    inits = {i.name for i in graph.initializer}
    first = next(i for i in graph.input if i.name not in inits)
    shape = [d.dim_value for d in first.type.tensor_type.shape.dim]
    if not shape or min(shape) < 1:
        fail(f"{model_path}: input {first.name} has no static shape")
    np.savez(npz_path, **{first.name: rng.standard_normal(shape).astype(np.float32)})


def build(kiln, model, out, target, build_args):
    cmd = [kiln, "build", model, "-o", out] + build_args
    if target:
        cmd += ["--target", target]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")


def library_digest(package):
    with tarfile.open(package) as t:
        return hashlib.sha256(t.extractfile("mod.so").read()).hexdigest()


def conv_gflops(kiln, package, inputs, repeat, threads):
    """GFLOP/s of the slowest profile row whose op types name a conv template."""
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    p = subprocess.run([kiln, "run", package, "--inputs", inputs, "--repeat", str(repeat),
                        "--profile"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail(f"kiln run {package} failed: {p.stderr.strip()}")
    best = None  # (total ms, GFLOP/s)
    for line in p.stdout.splitlines():
        cols = line.split()
        # kernel, op types, calls, total (ms), mean (ms), %, GFLOP/s
        if len(cols) != 7 or "conv" not in cols[1].split(",")[0].lower():
            continue
        try:
            row = (float(cols[3]), float(cols[6]))
        except ValueError:
            continue
        if best is None or row[0] > best[0]:
            best = row
    if best is None:
        fail(f"{package}: no convolution kernel in the profile")
    return best[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln-a", required=True)
    ap.add_argument("--kiln-b", required=True)
    ap.add_argument("--convs", required=True, help="a directory of one-Conv .onnx models")
    ap.add_argument("--target", help="kiln build --target (default: this machine)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--build-args", default="--no-shipped-logs")
    ap.add_argument("--work", help="packages and inputs (default: CONVS/ab_convs)")
    ap.add_argument("--force", action="store_true", help="time convs whose code is the same")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeat < 1 or args.threads < 1:
        fail("--rounds, --repeat and --threads must be >= 1")
    for k in (args.kiln_a, args.kiln_b):
        if not os.access(k, os.X_OK):
            fail(f"no kiln executable at {k}")
    names = args.names or sorted(f[:-5] for f in os.listdir(args.convs) if f.endswith(".onnx"))
    if not names:
        fail(f"no .onnx models in {args.convs}")
    work = args.work or os.path.join(args.convs, "ab_convs")
    os.makedirs(work, exist_ok=True)
    build_args = args.build_args.split()
    rng = np.random.default_rng(7)
    order = random.Random(11)
    ratios = []
    for name in names:
        model = os.path.join(args.convs, name + ".onnx")
        if not os.path.exists(model):
            fail(f"no model {model}")
        inputs = os.path.join(work, name + ".npz")
        write_input(model, inputs, rng)
        kiln = {"A": args.kiln_a, "B": args.kiln_b}
        pkg = {s: os.path.join(work, f"{name}.{s}.tar") for s in kiln}
        for s in kiln:
            build(kiln[s], model, pkg[s], args.target, build_args)
        if not args.force and library_digest(pkg["A"]) == library_digest(pkg["B"]):
            print(f"{name:44s} same code", flush=True)
            continue
        got = {"A": [], "B": []}
        for _ in range(args.rounds):
            sides = ["A", "B"]
            order.shuffle(sides)
            for s in sides:
                got[s].append(conv_gflops(kiln[s], pkg[s], inputs, args.repeat, args.threads))
        best = {s: max(v) for s, v in got.items()}
        med = {s: statistics.median(v) for s, v in got.items()}
        ratios.append(best["B"] / best["A"])
        print(f"{name:44s} best A {best['A']:7.1f} B {best['B']:7.1f} B/A {ratios[-1]:.3f} | "
              f"median A {med['A']:7.1f} B {med['B']:7.1f} B/A {med['B'] / med['A']:.3f} GFLOP/s",
              flush=True)
    if ratios:
        print(f"geomean B/A (best) {statistics.geometric_mean(ratios):.3f} over {len(ratios)} convs")
    else:
        print("no conv differs")


if __name__ == "__main__":
    main()
