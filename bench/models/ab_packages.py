#!/usr/bin/python3
"""Paired A/B timing of two kiln packages of one model, in random order.

Usage: ab_packages.py --kiln build/kiln --inputs input.npz [--rounds 15] [--repeat 10] A.tar B.tar

Each round runs both packages once (`kiln run --repeat N --print-time`, the median of its
runs), in an order drawn at random, and takes B's time over A's. Prints the median of those
paired ratios with its quartiles, and each package's median time. On a shared VM whose speed
drifts by 10-20 % within minutes, the ratio of two runs a second apart is steadier than either
time; and a fixed order (A then B in every round) left a bias of a few per cent (the same
package against a copy of itself measured 1.03 over 7 rounds; two packages measured 0.87 in
one order and 1.04 in the other).
"""

import argparse
import random
import statistics
import subprocess
import sys


def median_ms(kiln, package, inputs, repeat):
    out = subprocess.run([kiln, "run", package, "--inputs", inputs, "--repeat", str(repeat),
                          "--print-time"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ab_packages.py: kiln run {package} failed: {out.stderr.strip()}")
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:2] == ["mean", "(ms)"]:
            return float(lines[i + 1].split()[1])  # columns: mean, median, max, min, std
    sys.exit(f"ab_packages.py: no timing table in kiln run's output for {package}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kiln", default="build/kiln")
    p.add_argument("--inputs", required=True)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("a")
    p.add_argument("b")
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit("ab_packages.py: --rounds must be at least 1")
    rng = random.Random(args.seed)
    times = {args.a: [], args.b: []}
    ratios = []
    for _ in range(args.rounds):
        order = [args.a, args.b]
        rng.shuffle(order)
        now = {pkg: median_ms(args.kiln, pkg, args.inputs, args.repeat) for pkg in order}
        for pkg, t in now.items():
            times[pkg].append(t)
        ratios.append(now[args.b] / now[args.a])
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"B/A median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f} {q[2]:.3f}) over "
          f"{args.rounds} rounds; A {statistics.median(times[args.a]):.3f} ms ({args.a}), "
          f"B {statistics.median(times[args.b]):.3f} ms ({args.b})")


if __name__ == "__main__":
    main()
