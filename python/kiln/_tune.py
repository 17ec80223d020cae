"""kiln.tune: `kiln tune` from Python (the same tasks, search, measurement and
records database), with a callback per round."""

import dataclasses
import json
import os
import sys
import threading
from typing import Callable, List, Optional

from . import _kiln
from ._args import integer, text
from ._model import input_shapes_text, model_paths


class StopTuning(Exception):
    """Raise from a callback to end the run cleanly after the current round
    (everything measured is stored; kiln.tune returns its summary)."""


@dataclasses.dataclass(frozen=True)
class TaskSummary:
    workload: str
    count: int
    weight: float
    trials: int          # this task's trials in the database, earlier runs included
    best_gflops: float
    state: str           # "active", "trial cap", "early stopped", "exhausted"


@dataclasses.dataclass(frozen=True)
class TuneSummary:
    """kiln tune's summary (--report's JSON fields, plus how the run ended)."""
    tasks: List[TaskSummary]
    trials: int          # measured by this run
    elapsed_s: float
    stop_reason: str     # "every task finished", "time budget spent", "interrupted", ...
    tuning_log: str
    target: str          # the records' target key
    # The in-graph step, per model: {model, skipped, records, workloads, changed,
    # seconds, rounds, rounds_planned, model_kernels, kernels, tuned_kernels, tuned_ms,
    # untuned_ms} (kiln tune --report's "in_graph"; rounds < rounds_planned where a
    # time budget cut the step; the last four where it measured the model's template
    # kernels: kernels of its model_kernels, those whose tasks had records).
    in_graph: List[dict] = dataclasses.field(default_factory=list)
    interrupted: bool = False         # Ctrl-C
    stopped_by_callback: bool = False  # a callback raised StopTuning or returned True

    @property
    def budget_spent(self) -> bool:
        """kiln tune's exit status 3: the time budget ran out before the trials
        did, or before the in-graph step's last model."""
        return self.stop_reason == "time budget spent" or any(
            m.get("skipped") for m in self.in_graph)

    def report(self) -> dict:
        """The JSON object `kiln tune --report` writes."""
        d = dataclasses.asdict(self)
        for k in ("interrupted", "stopped_by_callback"):
            d.pop(k)
        return d


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped kiln.tune after the measurement in flight; everything
    measured is stored. .summary holds the run's TuneSummary."""

    def __init__(self, summary: TuneSummary):
        super().__init__(f"kiln.tune interrupted; {summary.trials} trials stored in "
                         f"{summary.tuning_log}")
        self.summary = summary


def print_progress(info: dict) -> None:
    """A callback printing one line per round, like `kiln tune` in a log."""
    print(f"[task {info['task'] + 1}/{info['tasks']}] {info['template']:<28} trials "
          f"{info['trials']}/{info['trials_per_task']}  best {info['best_gflops']:7.1f} GFLOP/s  "
          f"elapsed {info['elapsed_s']:.0f}s", file=sys.stderr, flush=True)


def _callback(callbacks):
    """One native callback calling each of `callbacks` with the round's info
    dict; True asks the run to stop (StopTuning or a callback returning True)."""
    if callbacks is None:
        return None
    if callable(callbacks):
        callbacks = [callbacks]
    callbacks = list(callbacks)

    def on_round(info):
        try:
            return any([cb(info) is True for cb in callbacks])
        except StopTuning:
            return True
    return on_round


@dataclasses.dataclass(frozen=True)
class Task:
    """One tuning task: a distinct template workload of the models (`kiln tasks`)."""
    workload: str
    template: str
    count: int            # kernels using it, over all the models
    flops: float          # per call
    weight: float         # share of the models' estimated template latency
    tuned: Optional[bool] = None       # with tuning_log: a verified record exists
    trials: Optional[int] = None       # with tuning_log: records of it on the target
    best_gflops: Optional[float] = None
    failures: Optional[dict] = None    # with tuning_log: error class -> failed trials


def _as_list(models):
    if isinstance(models, (str, os.PathLike, bytes, bytearray)) or hasattr(
            models, "SerializeToString"):
        return [models]
    return list(models)


def tasks(models, input_shapes=None, target=None, tuning_log=None) -> List[Task]:
    """The tuning tasks of one or more models, as `kiln tasks` lists them
    (and kiln.tune tunes them). With tuning_log, each says whether it is
    tuned on this target (this machine's by default), its trials, best
    GFLOP/s and failed trials by error class."""
    from . import records
    with model_paths(_as_list(models)) as paths:
        found = [Task(*t) for t in _kiln.tasks(paths, input_shapes_text(input_shapes),
                                               text("target", target))]
    if tuning_log is None:
        return found
    db, key = records.open(tuning_log), records.target_key(target)
    cold = key + "; measured=cold-weights"  # a cold-weight run's records, where there are any
    out = []
    for t in found:
        k = cold if db.records(t.workload, cold) else key
        rs = db.records(t.workload, k)
        best = db.best(t.workload, k)
        failures = {}
        for r in rs:
            if r.error != "ok":
                failures[r.error] = failures.get(r.error, 0) + 1
        out.append(dataclasses.replace(t, tuned=best is not None, trials=len(rs),
                                       best_gflops=best.gflops if best else None,
                                       failures=failures))
    return out


def _check_report_path(path, inputs, tuning_log):
    """As kiln tune: the report must be writable before the tuning, not after."""
    folder = os.path.dirname(os.path.abspath(path))
    why = ("it is a directory" if os.path.isdir(path) else
           f"directory '{folder}' does not exist" if not os.path.isdir(folder) else
           f"directory '{folder}' is not writable" if not os.access(folder, os.W_OK) else None)
    if why:
        raise _kiln.KilnError(f"cannot write report '{path}': {why}")
    # Neither one of the inputs, nor the tuning log or its -wal/-shm (there or
    # not yet), nor a read-only file, and a file can be created there (/proc
    # cannot, whatever access() says for root), as kiln tune checks.
    _kiln.check_output(path, inputs, [tuning_log])


def tune(models, tuning_log, trials=64, time_budget=None, tuner="xgb", callbacks=None, *,
         early_stopping=0, batch=16, input_shapes=None, target=None, free_layout=False,
         number=1, repeat=3, min_repeat_ms=20.0, timeout=10.0, compile_budget=20.0,
         runner=None, report=None, weights="auto", in_graph=3) -> TuneSummary:
    """Tunes the template workloads of one or more models like `kiln tune`.

    models: a model (path, bytes, onnx.ModelProto) or a list of them.
    tuning_log: the records database (created if absent; re-running resumes,
    trials counts earlier runs' records). time_budget: seconds for the whole
    run (None: none). callbacks: a callable or a list, each called after
    every round with a dict (task, tasks, workload, template, trials,
    trials_per_task, round_gflops, best_gflops, remaining, elapsed_s);
    raising StopTuning or returning True ends the run cleanly, any other
    exception ends it and propagates (what was measured is stored).
    Ctrl-C (from the main thread) stops after the measurement in flight and
    raises TuneInterrupted (a KeyboardInterrupt) carrying the summary.
    report: also write kiln tune --report's JSON there. weights: "cold"
    (kiln tune --cold-weights), "warm" (--warm-weights) or "auto" (kiln
    tune's default: cold when the weights the largest model's kernels read,
    Winograd's transformed ones counted, exceed half this machine's
    last-level cache). in_graph: after the search, each task's in_graph
    fastest configs and its untuned one are re-timed inside the compiled
    model and stored as in-graph records, which builds prefer (0: off; not
    with a runner); with a time_budget the search stops at 85 % of it and
    the step gets the rest. The other keywords are kiln tune's options of
    the same names.
    """
    models = _as_list(models)
    a = _kiln.TuneArgs()
    a.tuning_log = os.fspath(tuning_log)
    a.trials = integer("trials", trials)
    a.tuner = text("tuner", tuner, False)
    a.time_budget = float(time_budget or 0)
    a.early_stopping = integer("early_stopping", early_stopping)
    a.batch = integer("batch", batch)
    a.input_shapes = input_shapes_text(input_shapes)
    a.target = text("target", target)
    a.free_layout = bool(free_layout)
    a.number, a.repeat = integer("number", number), integer("repeat", repeat)
    a.min_repeat_ms, a.timeout = float(min_repeat_ms), float(timeout)
    a.compile_budget = float(compile_budget)
    a.runner = text("runner", runner)
    a.weights = text("weights", weights, False)
    a.in_graph = integer("in_graph", in_graph)
    if report is not None:
        inputs = [("the tuning log", os.fspath(tuning_log))]
        inputs += [("the model", os.fspath(m)) for m in models if isinstance(m, (str, os.PathLike))]
        _check_report_path(os.fspath(report), inputs, os.fspath(tuning_log))
    main = threading.current_thread() is threading.main_thread()
    with model_paths(models) as paths:
        a.models = paths
        out = _kiln.tune(a, _callback(callbacks), main)
    d = json.loads(out["report"])
    d["tasks"] = [TaskSummary(**t) for t in d["tasks"]]
    summary = TuneSummary(**d, interrupted=out["interrupted"], stopped_by_callback=out["stopped"])
    if report is not None:
        with open(report, "w") as f:
            json.dump(summary.report(), f, indent=2)
            f.write("\n")
    if summary.interrupted:
        raise TuneInterrupted(summary)
    return summary
