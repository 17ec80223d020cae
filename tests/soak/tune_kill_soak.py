#!/usr/bin/env python3
"""Soak test: concurrent `kiln tune` processes on one records database, killed
with SIGKILL at random moments and restarted (issue 13, item 15).

Three tuners share one sqlite database. At random moments one of them is
killed with -9 and a fresh one takes its place, --kills times in all. After
every kill the database is read (as another reader would) and every record it
holds is remembered as committed. At the end, after the tuners finished:

  - PRAGMA integrity_check is "ok";
  - no (workload, target, config) was measured twice;
  - every record seen committed after any kill is still there, unchanged;
  - every task reached its trial count (dead tuners' claims did not eat it).

  tune_kill_soak.py --kiln build/kiln --kills 20 [--tuners 3] [--trials 24]

Exit 0 when every check holds; 1 with the failed checks listed.
"""
import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time


def make_model(path):
    """Three template tasks: a 3x3 conv, a 1x1 conv and a dense layer."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "soak",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [init("w1", [16, 8, 3, 3]), init("b1", [16]), init("w2", [16, 16, 1, 1]),
         init("b2", [16]), init("w3", [10, 1600]), init("b3", [10])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def read_records(db):
    """Every record, keyed by id; read-only, as another process would."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = con.execute(
            "SELECT id, workload_key, target_key, config_json, times_ms, error, "
            "timestamp_unix FROM records").fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return {}  # the first tuner was killed before it created the schema
        raise
    finally:
        con.close()
    return {r[0]: r[1:] for r in rows}


def start_tuner(args, model, db, index, log_dir, starts):
    tuner = ["random", "xgb", "random"][index % 3]  # two random tuners share a seed: collisions
    log = open(os.path.join(log_dir, f"tuner{index}-{starts}.log"), "w")
    cmd = [args.kiln, "tune", model, "--tuning-log", db, "--trials", str(args.trials),
           "--tuner", tuner, "--batch", "4", "--repeat", "1", "--number", "1",
           "--in-graph", "0"]  # the soak counts isolated records only
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--tuners", type=int, default=3)
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--min-gap", type=float, default=0.5, help="shortest time between kills (s)")
    ap.add_argument("--max-gap", type=float, default=5.0, help="longest time between kills (s)")
    ap.add_argument("--workdir", default=None, help="keep the database and logs here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"soak: seed {args.seed}, {args.tuners} tuners, {args.kills} kills, "
          f"{args.trials} trials per task")

    work = args.workdir or tempfile.mkdtemp(prefix="kiln-soak-")
    os.makedirs(work, exist_ok=True)
    model, db = os.path.join(work, "soak.onnx"), os.path.join(work, "soak.db")
    make_model(model)

    starts = 0
    tuners = []
    for i in range(args.tuners):
        tuners.append(start_tuner(args, model, db, i, work, starts))
        starts += 1
    committed = {}  # record id -> row, as seen after a kill
    kills = 0
    deadline = time.time() + 600
    while kills < args.kills and time.time() < deadline:
        time.sleep(rng.uniform(args.min_gap, args.max_gap))
        running = [i for i, p in enumerate(tuners) if p.poll() is None]
        if not running:
            # Every tuner finished before all kills: start over with more trials
            # to kill (the cap is per task, so raise it for the new ones).
            args.trials += 8
            running = list(range(len(tuners)))
            for i in running:
                tuners[i] = start_tuner(args, model, db, i, work, starts)
                starts += 1
            continue
        victim = rng.choice(running)
        tuners[victim].send_signal(signal.SIGKILL)
        tuners[victim].wait()
        kills += 1
        if os.path.exists(db):
            committed.update(read_records(db))
        tuners[victim] = start_tuner(args, model, db, victim, work, starts)
        starts += 1
    for p in tuners:
        try:
            p.wait(timeout=max(60, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    # One last tuner, alone: whatever the killed ones left unmeasured.
    final = subprocess.run([args.kiln, "tune", model, "--tuning-log", db, "--trials",
                            str(args.trials), "--repeat", "1", "--number", "1", "--in-graph", "0"],
                           capture_output=True, text=True, timeout=600)

    failures = []
    if kills < args.kills:
        failures.append(f"only {kills} of {args.kills} kills happened before the deadline")
    if final.returncode != 0:
        failures.append(f"the last kiln tune exited {final.returncode}: {final.stderr[-2000:]}")
    con = sqlite3.connect(db, timeout=30)
    integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    if integrity != "ok":
        failures.append(f"integrity_check: {integrity}")
    records = read_records(db)
    seen, twice = set(), []
    per_task = {}
    for rid, (w, t, cfg, _times, _err, _ts) in records.items():
        if (w, t, cfg) in seen:
            twice.append((w, cfg))
        seen.add((w, t, cfg))
        per_task[(w, t)] = per_task.get((w, t), 0) + 1
    if twice:
        failures.append(f"{len(twice)} configs measured twice, e.g. {twice[0]}")
    lost = [rid for rid, row in committed.items() if records.get(rid) != row]
    if lost:
        failures.append(f"{len(lost)} committed records lost or changed, e.g. id {lost[0]}")
    short = {k: n for k, n in per_task.items() if n < args.trials}
    if len(per_task) != 3 or short:
        failures.append(f"tasks short of {args.trials} trials: {per_task}")
    stale = con.execute("SELECT count(*) FROM claims").fetchone()[0]
    con.close()

    print(f"soak: {kills} kills, {starts} tuner starts, {len(records)} records "
          f"({len(committed)} seen committed after kills), tasks {sorted(per_task.values())}, "
          f"integrity {integrity}, {stale} claims left")
    if failures:
        print("soak: FAILED (database and logs kept in " + work + ")")
        for f in failures:
            print("  - " + f)
        return 1
    if not args.workdir:
        for name in os.listdir(work):
            os.remove(os.path.join(work, name))
        os.rmdir(work)
    print("soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
