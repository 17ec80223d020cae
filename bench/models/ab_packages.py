#!/usr/bin/python3
"""Paired A/B timing of two kiln packages of one model, in random order.

Usage: ab_packages.py --kiln build/kiln --inputs input.npz [--rounds 15] [--repeat 10]
                      [--env-a VAR=VALUE ...] [--env-b VAR=VALUE ...] A.tar B.tar

Each round runs both packages once (`kiln run --repeat N --print-time`, the median of its
runs), in an order drawn at random, and takes B's time over A's. Prints the median of those
paired ratios with its quartiles, and each package's median time. On a shared VM whose speed
drifts by 10-20 % within minutes, the ratio of two runs a second apart is steadier than either
time; and a fixed order (A then B in every round) left a bias of a few per cent (the same
package against a copy of itself measured 1.03 over 7 rounds; two packages measured 0.87 in
one order and 1.04 in the other).

--env-a / --env-b (repeatable) set environment variables for A's or B's runs only, so that one
package can be paired with itself under two runtime settings: `--env-b KILN_STATIC_BLOCKS=1
P.tar P.tar` times the thread pool's fixed blocks (B) against its default work stealing (A).
"""

import argparse
import os
import random
import statistics
import subprocess
import sys


def median_ms(kiln, package, inputs, repeat, env):
    out = subprocess.run([kiln, "run", package, "--inputs", inputs, "--repeat", str(repeat),
                          "--print-time"], capture_output=True, text=True,
                         env=dict(os.environ, **env))
    if out.returncode != 0:
        sys.exit(f"ab_packages.py: kiln run {package} failed: {out.stderr.strip()}")
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:2] == ["mean", "(ms)"]:
            return float(lines[i + 1].split()[1])  # columns: mean, median, max, min, std
    sys.exit(f"ab_packages.py: no timing table in kiln run's output for {package}")


def parse_env(settings):
    env = {}
    for s in settings:
        name, eq, value = s.partition("=")
        if not eq or not name:
            sys.exit(f"ab_packages.py: --env-a/--env-b takes VAR=VALUE, got '{s}'")
        env[name] = value
    return env


def describe(side):
    package, env = side
    return " ".join([package] + [f"{k}={v}" for k, v in env.items()])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kiln", default="build/kiln")
    p.add_argument("--inputs", required=True)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--env-a", action="append", default=[], metavar="VAR=VALUE")
    p.add_argument("--env-b", action="append", default=[], metavar="VAR=VALUE")
    p.add_argument("a")
    p.add_argument("b")
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit("ab_packages.py: --rounds must be at least 1")
    sides = {"A": (args.a, parse_env(args.env_a)), "B": (args.b, parse_env(args.env_b))}
    rng = random.Random(args.seed)
    times = {"A": [], "B": []}
    ratios = []
    for _ in range(args.rounds):
        order = ["A", "B"]
        rng.shuffle(order)
        now = {side: median_ms(args.kiln, sides[side][0], args.inputs, args.repeat,
                               sides[side][1]) for side in order}
        for side, t in now.items():
            times[side].append(t)
        ratios.append(now["B"] / now["A"])
    # Inclusive: the quartiles stay within the ratios seen (the default extrapolates
    # past them, below zero for two rounds far apart).
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    print(f"B/A median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f} {q[2]:.3f}) over "
          f"{args.rounds} rounds; A {statistics.median(times['A']):.3f} ms ({describe(sides['A'])}), "
          f"B {statistics.median(times['B']):.3f} ms ({describe(sides['B'])})")


if __name__ == "__main__":
    main()
