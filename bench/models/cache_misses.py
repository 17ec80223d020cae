#!/usr/bin/python3
"""A convolution's cache misses under a simulated L1 and L2 (valgrind's cachegrind).

Usage: cache_misses.py --model CONV.onnx [--kiln build/kiln] [--target "llvm -mcpu=znver3"]
                       [--l2 524288 --l2 1048576] [--l1 32768] [--repeat 3]
                       [--knobs '{"oc_group": 0}' ...] [--work DIR]

CONV.onnx holds one convolution (conv_layers.py writes them). Its conv template workload's
fallback config is built (`kiln build --config`, the fallback read back from a one-trial
`kiln tune`), and so is each --knobs variant: the fallback with those knobs replaced. Each
package runs under cachegrind on one thread (`kiln run --repeat N`, after one warm-up run),
once for each --l2 size, with the L1 data cache of --l1 bytes and the L2 as cachegrind's last
level (8 ways, 64-byte lines; the L3 behind it is not simulated). Prints, for the kernel with
the most instructions, per call: instructions, L1 and L2 read misses, L2 write misses.

What it is for: a machine without the CPU a rule is meant for can still count that CPU's L2
misses. For example, the Zen 3's 512 KiB L2 on a Zen 4 with 1 MiB (bench/models/results/
oc-group-l2-2026-11-29-zen4.md). Counts, not times: the hardware prefetchers hide part of
each miss. x86 AVX2 code only, because valgrind cannot run AVX-512 instructions.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx


def fail(msg):
    sys.exit(f"cache_misses.py: {msg}")


def run(cmd, what, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail(f"{what} failed (exit {p.returncode}):\n{(p.stderr or p.stdout).strip()[-2000:]}")
    return p.stdout


def fallback_record(kiln, model, target, work):
    """The conv template's fallback record of the model's (only) convolution."""
    db = os.path.join(work, "fallback.db")
    if os.path.exists(db):
        os.remove(db)
    run([kiln, "tune", model, "--tuning-log", db, "--trials", "1", "--in-graph", "0",
         "--target", target], "kiln tune (the fallback)")
    out = run([kiln, "records", "export", db, "-o", "-"], "kiln records export")
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if r["workload"].startswith(("conv2d_NCHWc", "group_conv2d", "depthwise_conv2d")):
                return r["workload"], r["config"]["knobs"]
    fail(f"{model} has no conv template workload")


def kernel_counts(annotated):
    """(Ir, D1mr, DLmr, DLmw) of the kiln kernel function with the most instructions."""
    best = None
    for line in annotated.splitlines():
        if "kiln_k" not in line:
            continue
        # Nine counts (a zero has no percentage after it), then file:function.
        fields = re.sub(r"\(\s*[0-9.]+%\)", " ", line).split()
        if len(fields) < 10 or not all(re.fullmatch(r"[0-9,]+", f) for f in fields[:9]):
            continue
        nums = [int(f.replace(",", "")) for f in fields[:9]]
        ir, d1mr, dlmr, dlmw = nums[0], nums[4], nums[5], nums[8]
        if best is None or ir > best[0]:
            best = (ir, d1mr, dlmr, dlmw)
    if best is None:
        fail("cg_annotate listed no kiln kernel")
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--target", default="llvm -mcpu=znver3")
    ap.add_argument("--l1", type=int, default=32768)
    ap.add_argument("--l2", type=int, action="append")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--knobs", action="append", default=[])
    ap.add_argument("--work", default="/tmp/kiln_cache_misses")
    a = ap.parse_args()
    for tool in ("valgrind", "cg_annotate"):
        if not shutil.which(tool):
            fail(f"{tool} not found (Debian: apt-get install valgrind)")
    l2_sizes = a.l2 or [524288]
    os.makedirs(a.work, exist_ok=True)

    workload, fallback = fallback_record(a.kiln, a.model, a.target, a.work)
    variants = [("fallback", fallback)]
    for text in a.knobs:
        knobs = dict(fallback)
        knobs.update(json.loads(text))
        variants.append((text, knobs))

    graph_input = onnx.load(a.model).graph.input[0]
    shape = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    inputs = os.path.join(a.work, "input.npz")
    np.savez(inputs, **{graph_input.name: np.random.rand(*shape).astype(np.float32)})

    calls = a.repeat + 1  # kiln run's warm-up call is counted too
    print(f"{workload}, target {a.target}, L1 {a.l1} B, one thread; per call:")
    print("| variant | L2 bytes | instructions | L1 read misses | L2 read misses | L2 write misses |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, (name, knobs) in enumerate(variants):
        config = os.path.join(a.work, f"config_{i}.jsonl")
        with open(config, "w") as f:
            f.write(json.dumps({"workload": workload, "config": {"knobs": knobs}}) + "\n")
        package = os.path.join(a.work, f"variant_{i}.so")
        run([a.kiln, "build", a.model, "-o", package, "--output-format", "so", "--target",
             a.target, "--config", config, "--no-shipped-logs"], f"kiln build ({name})")
        for l2 in l2_sizes:
            out = os.path.join(a.work, f"cachegrind_{i}_{l2}.out")
            env = dict(os.environ, KILN_NUM_THREADS="1")
            run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--I1={a.l1},8,64",
                 f"--D1={a.l1},8,64", f"--LL={l2},8,64", f"--cachegrind-out-file={out}",
                 a.kiln, "run", package, "--inputs", inputs, "--repeat", str(a.repeat)],
                f"cachegrind ({name}, L2 {l2})", env)
            ir, d1mr, dlmr, dlmw = kernel_counts(
                run(["cg_annotate", "--threshold=0", out], "cg_annotate"))
            print(f"| {name} | {l2} | {ir // calls} | {d1mr // calls} | {dlmr // calls} | "
                  f"{dlmw // calls} |")


if __name__ == "__main__":
    main()
