#!/usr/bin/env python3
"""End-to-end latency of a model against tuning minutes (issue 12, item 6).

  latency_curve.py --model M.onnx --inputs X.npz --out DIR
                   [--minutes 30] [--step-minutes 3] [--trials 2000]
                   [--in-graph 3] [--rounds 5] [--repeat 20] [--kiln build/kiln]
                   [--reference-log DB] [--target TARGET]

Tunes the model from an empty database in steps: each step is one
`kiln tune --time-budget STEP` (resuming the database; --in-graph 0, so every
second goes to the search), then `kiln build --tuning-log DB --no-shipped-logs`
keeps a package of what the tuner had found by then. Step 0 is the untuned
build. After the last step, `kiln tune --in-graph K` re-measures the best
configs inside the model and one more package is built ("+in-graph").

The packages are timed only at the end, all of them interleaved (--rounds
times `kiln run --repeat N` each, in turn): this machine's speed drifts by up
to 2x within minutes, and a curve timed as it goes would mostly show the
drift. Each point is the median of its rounds' medians.

--reference-log DB adds a package built from DB (a longer tuning of the same
model, e.g. a nightly database) to the interleaved timing; "final" is then
that package's latency, the converged one the curve has to reach, rather than
the curve's own last point.

--target T tunes and builds for T (kiln's --target), e.g. "llvm -mcpu=znver3"
for the AVX2 code of a Zen 3 on a CPU that also has AVX-512; the default is
this machine.

Writes DIR/curve.csv, DIR/curve.md (the table, the final latency and the
first tuning minute within 5 % of it) and DIR/curve.png (matplotlib, Agg).
"""
import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, ok=(0,), **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode not in ok:
        sys.exit(f"latency_curve: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def target_args(args):
    return ["--target", args.target] if args.target else []


def build(args, db, out):
    cmd = [args.kiln, "build", args.model, "-o", out, "--no-shipped-logs"] + target_args(args)
    if db:
        cmd += ["--tuning-log", db]
    return run(cmd).stdout


def run_median_ms(args, pkg):
    out = run([args.kiln, "run", pkg, "--inputs", args.inputs, "--output",
               os.path.join(args.out, "out.npz"), "--repeat", str(args.repeat),
               "--print-time"]).stdout
    # The last line of --print-time: mean, median, max, min, std (ms).
    nums = re.findall(r"[0-9.]+", out.strip().splitlines()[-1])
    return float(nums[1])


def first_within(points, final, tolerance):
    for minutes, ms in points:
        if ms <= final * (1 + tolerance):
            return minutes
    return None


def plot(points, in_graph_ms, final, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([m for m, _ in points], [ms for _, ms in points], "o-", label="tuned (isolated search)")
    if in_graph_ms is not None:
        ax.plot([points[-1][0]], [in_graph_ms], "s", color="C3", label="+ in-graph re-measurement")
    ax.axhline(final * 1.05, color="gray", ls="--", lw=0.8, label="final + 5 %")
    ax.set_xlabel("tuning minutes")
    ax.set_ylabel("latency, ms (median)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--step-minutes", type=float, default=3)
    ap.add_argument("--trials", type=int, default=2000, help="per task; the budget ends the run")
    ap.add_argument("--in-graph", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--reference-log", help="a longer tuning's database: its build is 'final'")
    ap.add_argument("--target", default="", help="kiln's --target for tuning and builds")
    ap.add_argument("--tune-args", default="", help="more kiln tune options (e.g. for tests)")
    args = ap.parse_args()

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    db = os.path.join(args.out, "tuning.db")
    pkgs = [(0.0, os.path.join(args.out, "step0.tar"))]
    build(args, None, pkgs[0][1])
    tuned_s = 0.0
    step = 0
    while tuned_s < args.minutes * 60 - 1e-6:
        step += 1
        budget = min(args.step_minutes * 60, args.minutes * 60 - tuned_s)
        start = time.monotonic()
        p = run([args.kiln, "tune", args.model, "--tuning-log", db, "--trials", str(args.trials),
                 "--time-budget", str(budget), "--in-graph", "0"] + target_args(args)
                + args.tune_args.split(),
                ok=(0, 3))
        tuned_s += time.monotonic() - start
        pkg = os.path.join(args.out, f"step{step}.tar")
        build(args, db, pkg)
        pkgs.append((tuned_s / 60, pkg))
        print(f"step {step}: {tuned_s / 60:.1f} tuning minutes", flush=True)
        if p.returncode == 0:  # every task finished its trials: nothing more to find
            break
    in_graph_pkg = None
    if args.in_graph > 0:
        start = time.monotonic()
        run([args.kiln, "tune", args.model, "--tuning-log", db, "--trials", "1",
             "--in-graph", str(args.in_graph)] + target_args(args) + args.tune_args.split())
        in_graph_s = time.monotonic() - start
        in_graph_pkg = os.path.join(args.out, "in_graph.tar")
        build(args, db, in_graph_pkg)
        print(f"in-graph step: {in_graph_s:.0f} s", flush=True)

    reference_pkg = None
    if args.reference_log:
        reference_pkg = os.path.join(args.out, "reference.tar")
        build(args, args.reference_log, reference_pkg)
    timed = pkgs + [(None, p) for p in (in_graph_pkg, reference_pkg) if p]
    medians = {pkg: [] for _, pkg in timed}
    for r in range(args.rounds):
        for _, pkg in timed:
            medians[pkg].append(run_median_ms(args, pkg))
    points = [(m, statistics.median(medians[pkg])) for m, pkg in pkgs]
    in_graph_ms = statistics.median(medians[in_graph_pkg]) if in_graph_pkg else None

    reference_ms = statistics.median(medians[reference_pkg]) if reference_pkg else None
    final = in_graph_ms if in_graph_ms is not None else points[-1][1]
    if reference_ms is not None:
        final = reference_ms
    within = first_within(points, final, 0.05)
    with open(os.path.join(args.out, "curve.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["tuning_minutes", "median_ms", "round_medians_ms"])
        for (m, pkg), (_, ms) in zip(pkgs, points):
            w.writerow([f"{m:.2f}", f"{ms:.5g}", " ".join(f"{x:.5g}" for x in medians[pkg])])
        if in_graph_pkg:
            w.writerow(["in-graph", f"{in_graph_ms:.5g}",
                        " ".join(f"{x:.5g}" for x in medians[in_graph_pkg])])
        if reference_pkg:
            w.writerow(["reference", f"{reference_ms:.5g}",
                        " ".join(f"{x:.5g}" for x in medians[reference_pkg])])
    stem = os.path.splitext(os.path.basename(args.model))[0]
    name = os.path.basename(os.path.dirname(os.path.abspath(args.model))) if stem == "model" else stem
    title = f"# {name}: latency against tuning minutes" + (f", --target {args.target}" if args.target else "")
    lines = [title, "",
             "| tuning minutes | median ms | vs untuned |", "|---:|---:|---:|"]
    for m, ms in points:
        lines.append(f"| {m:.1f} | {ms:.4g} | {ms / points[0][1]:.2f} |")
    if in_graph_ms is not None:
        lines.append(f"| + in-graph | {in_graph_ms:.4g} | {in_graph_ms / points[0][1]:.2f} |")
    if reference_ms is not None:
        lines.append(f"| reference ({os.path.basename(args.reference_log)}) | {reference_ms:.4g} "
                     f"| {reference_ms / points[0][1]:.2f} |")
    lines += ["", f"final {final:.4g} ms; first point within 5 % of it: "
              + (f"{within:.1f} tuning minutes" if within is not None else "none before the end")]
    with open(os.path.join(args.out, "curve.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(points, in_graph_ms, final, os.path.join(args.out, "curve.png"), f"{name}: latency vs tuning time")


if __name__ == "__main__":
    main()
