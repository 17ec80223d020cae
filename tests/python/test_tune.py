"""kiln.tune: a tiny run with a callback, resuming, stopping from a callback,
Ctrl-C, errors; its records then serve kiln.build."""

import json
import os
import signal
import time

import pytest

import kiln


def test_tune_with_callback_then_build(tiny, tmp_path):
    db = str(tmp_path / "tuning.db")
    rounds = []
    summary = kiln.tune(tiny[0], db, trials=2, batch=2, tuner="random", callbacks=rounds.append,
                        report=tmp_path / "report.json")
    # tiny's tasks: two direct convolutions, the Winograd alternative of its
    # 3x3 stride-1 one, and the dense layer.
    assert len(summary.tasks) == 4 and summary.stop_reason == "every task finished"
    assert summary.trials == 8 and all(t.trials == 2 for t in summary.tasks)
    assert not summary.interrupted and not summary.budget_spent
    assert rounds and all(r["tasks"] == 4 and r["trials_per_task"] == 2 for r in rounds)
    assert {r["template"] for r in rounds} == {"conv2d_NCHWc.x86", "conv2d_winograd_NCHWc.x86",
                                               "dense_pack.x86"}
    assert max(r["best_gflops"] for r in rounds) > 0
    # The --report JSON of kiln tune.
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) == {"tasks", "trials", "elapsed_s", "stop_reason", "tuning_log", "target",
                           "in_graph"}
    assert report["tuning_log"] == db and report["target"] == kiln.records.target_key()
    # After the search, the in-graph step (as kiln tune's): each workload's
    # configs timed inside the compiled model, the model's 3 kernels summed.
    [step] = summary.in_graph
    assert report["in_graph"] == [step] and not step["skipped"]
    assert step["workloads"] == 4 and step["records"] >= 4 and step["kernels"] == 3
    assert step["tuned_ms"] > 0 and step["untuned_ms"] > 0
    assert step["rounds"] == step["rounds_planned"] >= 2, "no budget: every round measured"

    # The records serve the build: every workload tuned from the database (3
    # kernels: the 3x3 convolution's faster implementation is built), with
    # the in-graph records.
    pkg = kiln.build(tiny[0], tuning_log=db, require_tuned=True, shipped_logs=False)
    assert pkg.report.tuned == 3 and pkg.report.by_source == {db + " (in-graph)": 3}
    assert all(w.origin == "database" for w in pkg.report.workloads)

    # kiln tasks: the same four tasks, now tuned.
    ts = kiln.tasks(tiny[0], tuning_log=db)
    assert [t.workload for t in ts] == [t.workload for t in summary.tasks]
    assert all(t.tuned and t.trials == 2 and t.best_gflops > 0 for t in ts)
    assert abs(sum(t.weight for t in ts) - 1) < 1e-9
    assert [t.tuned for t in kiln.tasks(tiny[0])] == [None] * 4

    # Re-running resumes: nothing measured is measured again.
    again = kiln.tune(tiny[0], db, trials=2, batch=2, tuner="random")
    assert again.trials == 0


def test_build_inside_a_callback(tiny, tmp_path):
    """A callback may build (the compiler lock is recursive): here with the records so far."""
    db = str(tmp_path / "t.db")
    built = []

    def build_and_stop(info):
        built.append(kiln.build(tiny[0], tuning_log=db, shipped_logs=False).report.tuned)
        raise kiln.StopTuning()

    kiln.tune(tiny[0], db, trials=4, batch=2, tuner="random", callbacks=build_and_stop)
    assert built == [1]


def test_callback_stops_the_run(tiny, tmp_path):
    db = str(tmp_path / "t.db")

    def stop(info):
        raise kiln.StopTuning()

    s = kiln.tune(tiny[0], db, trials=8, batch=2, tuner="random", callbacks=[stop])
    assert s.stopped_by_callback and s.trials == 2  # one round, stored
    assert len(kiln.records.open(db)) == 2


def test_callback_exception_propagates_with_records_kept(tiny, tmp_path):
    db = str(tmp_path / "t.db")

    def boom(info):
        raise ValueError("from the callback")

    with pytest.raises(ValueError, match="from the callback"):
        kiln.tune(tiny[0], db, trials=8, batch=2, tuner="random", callbacks=boom)
    assert len(kiln.records.open(db)) == 2


def test_ctrl_c_stops_cleanly(tiny, tmp_path):
    """SIGINT during the run (here sent by the first round's callback) stops
    it after the measurement in flight; the records stay; TuneInterrupted is
    a KeyboardInterrupt carrying the summary; Python's handler is back."""
    db = str(tmp_path / "t.db")
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as e:
        kiln.tune(tiny[0], db, trials=8, batch=2, tuner="random",
                  callbacks=lambda info: os.kill(os.getpid(), signal.SIGINT))
    assert isinstance(e.value, kiln.TuneInterrupted)
    assert e.value.summary.interrupted and e.value.summary.stop_reason == "interrupted"
    stored = len(kiln.records.open(db))
    assert stored >= 2 and stored == e.value.summary.trials
    assert signal.getsignal(signal.SIGINT) is before


def test_time_budget(tiny, tmp_path):
    """kiln tune --time-budget: the run ends once it is spent (exit status 3 in
    the CLI), its measured trials stored. The budget is 3 s because a round's
    measurements stop at the budget: under load a 0.5 s one ran out while the
    first round compiled, with no trial (the CLI's test has the same 3 s)."""
    db = str(tmp_path / "t.db")
    start = time.monotonic()
    s = kiln.tune(tiny[0], db, trials=500, batch=4, tuner="random", time_budget=3,
                  repeat=1, min_repeat_ms=0, in_graph=0)
    assert s.budget_spent and s.stop_reason == "time budget spent"
    assert 0 < s.trials == len(kiln.records.open(db))
    assert time.monotonic() - start < 3 + 2.5


def test_cold_weights(tiny, tmp_path):
    """weights="cold": records under the cold-weight key, which kiln.tasks
    and kiln.build read; tiny's weights fit any cache, so "auto" is warm."""
    db = str(tmp_path / "cold.db")
    s = kiln.tune(tiny[0], db, trials=1, batch=1, tuner="random", weights="cold", in_graph=0)
    cold_key = kiln.records.target_key() + "; measured=cold-weights"
    assert s.target == cold_key and kiln.records.open(db).targets() == [cold_key]
    assert all(t.tuned and t.trials == 1 for t in kiln.tasks(tiny[0], tuning_log=db))
    pkg = kiln.build(tiny[0], tuning_log=db, require_tuned=True, shipped_logs=False)
    assert pkg.report.by_source == {db + " (cold weights)": 3}
    warm = str(tmp_path / "warm.db")
    kiln.tune(tiny[0], warm, trials=1, batch=1, tuner="random", in_graph=0)
    assert kiln.records.open(warm).targets() == [kiln.records.target_key()]


def test_bad_arguments(tiny, tmp_path):
    db = str(tmp_path / "t.db")
    with pytest.raises(kiln.InvalidInputError, match="trials needs at least 1"):
        kiln.tune(tiny[0], db, trials=0)
    with pytest.raises(kiln.InvalidInputError, match="xgb, random, grid or ga"):
        kiln.tune(tiny[0], db, tuner="annealing")
    with pytest.raises(kiln.InvalidInputError, match="auto, cold or warm"):
        kiln.tune(tiny[0], db, weights="frozen")
    with pytest.raises(kiln.ModelError, match="missing.onnx"):
        kiln.tune(tmp_path / "missing.onnx", db)
    with pytest.raises(kiln.KilnError, match="cannot write report .*does not exist"):
        kiln.tune(tiny[0], db, report=tmp_path / "no" / "report.json")
    with pytest.raises(kiln.KilnError, match="refusing to overwrite"):
        kiln.tune(tiny[0], db, report=tiny[0])
    # Issue 65 #9, #17: the tuning log not created yet, its -wal and -shm, and a
    # folder no file can be created in (/proc, even for root) are refused
    # before any tuning.
    for out in (db, db + "-wal", db + "-shm", str(tmp_path / "." / "t.db-wal")):
        with pytest.raises(kiln.KilnError, match="refusing to overwrite"):
            kiln.tune(tiny[0], db, report=out)
    with pytest.raises(kiln.KilnError, match="cannot create a file in '/proc': "):
        kiln.tune(tiny[0], db, report="/proc/kiln-report.json")
    assert not os.path.exists(db)  # nothing created before the models were read
