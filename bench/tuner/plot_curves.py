#!/usr/bin/env python3
"""Best GFLOP/s against trials from curves.sh's databases.

Reads OUT_DIR/<workload>.<tuner>.db (kiln's sqlite records; trial order is
the records' insertion order, failed trials count as trials), writes
OUT_DIR/curves.md (a table at fixed trial counts, and how many trials xgb
needed to reach random search's best of all its trials) and OUT_DIR/curves.png.

usage: plot_curves.py OUT_DIR
"""
import glob
import os
import sqlite3
import sys

CHECKPOINTS = [10, 25, 50, 100, 200, 300, 500, 1000]


def best_so_far(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT gflops FROM records ORDER BY id").fetchall()
    con.close()
    best, curve = 0.0, []
    for (g,) in rows:
        best = max(best, g or 0.0)
        curve.append(best)
    return curve


def first_reaching(curve, level):
    for i, g in enumerate(curve):
        if g >= level:
            return i + 1
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    names = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(out, "*.db"))})
    curves = {}
    for name in names:
        for tuner in ("random", "xgb"):
            db = os.path.join(out, f"{name}.{tuner}.db")
            if os.path.exists(db):
                curves[(name, tuner)] = best_so_far(db)

    lines = ["# Best GFLOP/s against trials: xgb vs random", "",
             "Trials in the order measured (failures count). Produced by `bench/tuner/curves.sh`.", ""]
    header = "| workload | tuner | " + " | ".join(str(c) for c in CHECKPOINTS) + " | final |"
    lines += [header, "|---|---|" + "---:|" * (len(CHECKPOINTS) + 1)]
    for (name, tuner), curve in sorted(curves.items()):
        cells = [f"{curve[c - 1]:.1f}" if len(curve) >= c else "" for c in CHECKPOINTS]
        lines.append(f"| {name} | {tuner} | " + " | ".join(cells) + f" | {curve[-1]:.1f} ({len(curve)}) |")
    lines += ["", "| workload | random trials | random best | xgb trials | xgb best | "
              "xgb trials to reach random's best | within 300? |", "|---|---:|---:|---:|---:|---:|---|"]
    for name in names:
        r, x = curves.get((name, "random")), curves.get((name, "xgb"))
        if not r or not x:
            continue
        reach = first_reaching(x, r[-1])
        lines.append(f"| {name} | {len(r)} | {r[-1]:.1f} | {len(x)} | {x[-1]:.1f} | "
                     f"{reach if reach else 'not reached'} | "
                     f"{'yes' if reach and reach <= 300 else 'no'} |")
    with open(os.path.join(out, "curves.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for tuner, style in (("random", "C0-"), ("xgb", "C3-")):
            c = curves.get((name, tuner))
            if c:
                ax.plot(range(1, len(c) + 1), c, style, label=tuner)
        r = curves.get((name, "random"))
        if r:
            ax.axhline(r[-1], color="grey", lw=0.6, ls="--", label=f"random best of {len(r)}")
        ax.axvline(300, color="grey", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOP/s")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "curves.png"), dpi=110)


if __name__ == "__main__":
    main()
