#!/usr/bin/python3
"""Times kiln packages of one model interleaved, for the layout-choice comparison
(bench/models/results/layout-dp-*.md): each round runs every package once with
`kiln run --repeat N --print-time` and keeps its median, so that the machine's
drift (a shared machine) hits every package alike. Prints, per package, the median
and min over rounds of the per-round medians, and its ratio to the first package;
checks every package's output against EXPECTED (rel. error).

usage: layout_dp_bench.py --kiln build/kiln --inputs input.npz [--expected expected.npz]
                          [--rounds 15] [--repeat 20] NAME=PACKAGE.tar [NAME=PACKAGE.tar ...]
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def median_ms(kiln, package, inputs, repeat, output=None):
    cmd = [kiln, "run", package, "--inputs", inputs, "--repeat", str(repeat), "--print-time"]
    if output:
        cmd += ["--output", output]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("mean (ms)"):
            return float(lines[i + 1].split()[1])
    sys.exit(f"no time summary in the output of {' '.join(cmd)}:\n{out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kiln", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--expected")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("packages", nargs="+", help="NAME=PACKAGE.tar")
    a = p.parse_args()
    pkgs = []
    for s in a.packages:
        if not re.match(r"^[^=]+=.+$", s):
            sys.exit(f"expected NAME=PACKAGE.tar, got '{s}'")
        pkgs.append(tuple(s.split("=", 1)))

    errors = {}
    if a.expected:
        want = np.load(a.expected)["output_0"]
        with tempfile.TemporaryDirectory() as d:
            for name, pkg in pkgs:
                out = f"{d}/{name}.npz"
                median_ms(a.kiln, pkg, a.inputs, 1, out)
                got = np.load(out)["output_0"]
                errors[name] = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))

    times = {name: [] for name, _ in pkgs}
    for _ in range(a.rounds):
        for name, pkg in pkgs:
            times[name].append(median_ms(a.kiln, pkg, a.inputs, a.repeat))
    base = statistics.median(times[pkgs[0][0]])
    print(f"| package | median of {a.rounds} round medians (ms) | min (ms) | max (ms) "
          f"| vs {pkgs[0][0]} | max rel. error |")
    print("|---|---|---|---|---|---|")
    for name, _ in pkgs:
        t = times[name]
        err = f"{errors[name]:.2e}" if name in errors else "-"
        print(f"| {name} | {statistics.median(t):.2f} | {min(t):.2f} | {max(t):.2f} "
              f"| {statistics.median(t) / base:.3f} | {err} |")


if __name__ == "__main__":
    main()
