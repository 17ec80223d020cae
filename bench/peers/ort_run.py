"""ONNX Runtime (the `onnxruntime` Python package, CPU) on npz inputs: the one way the bench
drivers, the smoke tests and the tests reach ORT. It runs in the peers' virtual environment,
bench/.venv (scripts/peers-venv.sh, or scripts/install-deps.sh, creates it from the pinned
bench/requirements-peers.txt):

  bench/.venv/bin/python bench/peers/ort_run.py check
      prints "onnxruntime X.Y.Z"; exits 77 (the tests' skip code), saying what is missing,
      when onnxruntime cannot be imported or is older than 1.31
  ... ort_run.py run MODEL.onnx INPUT.npz OUT.npz [--threads 2]
      one run; OUT.npz holds output_0, output_1, ... (kiln run's names) in the model's graph
      output order, each in ORT's dtype and shape
  ... ort_run.py samples MODEL.onnx STACKED.npz OUT.npz [--threads 1]
      STACKED.npz holds each input with the samples along a new leading axis ([N, *shape],
      kiln quantize's --calibration form); each sample runs on its own, and output_<i> in
      OUT.npz stacks the N results ([N, *output shape])
  ... ort_run.py bench MODEL.onnx INPUT.npz [--threads 2] [--warmup 10] [--repeat 50]
                 [--spin 0] [--expected EXPECTED.npz --rtol 1e-4]
      times --repeat runs and prints one line in kiln run's --print-time words ("mean X ms
      median Y ms  min Z ms  max W ms"); with --expected also checks the outputs against its
      output_0, ... (max|a-b| / max|ref|) and exits 1 over --rtol
  ... ort_run.py profile MODEL.onnx INPUT.npz [--threads 2] [--warmup 3] [--repeat 10] [--spin 0]
      ORT's own profiler: one JSON line per node of its optimized graph, in execution order:
      {"name", "op", "ms" (median of the timed runs), "output_elements"}

Inputs come from the npz by ONNX input name. The session: intra-op threads = --threads, one
inter-op thread, sequential execution, all graph optimizations, intra-op spinning off unless
--spin 1 (ORT's default is on, but on a busy shared machine a spinning worker burns the time
slice the other thread needs: resnet18 measured 141 ms median spinning against 91 ms not, in
alternating runs at load average ~6).

Imported from any Python (it imports onnxruntime only when run), it tells a caller where the
venv is and whether ORT is there:

  import ort_run                       # sys.path: bench/peers
  why = ort_run.missing()              # None, or what is missing, to skip with
  subprocess.run(ort_run.command("run", model, inputs, out), check=True)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
# The peers' Python: the repository's own venv, never one found on PATH.
PYTHON = os.path.join(ROOT, "bench", ".venv", "bin", "python")
MIN_VERSION = (1, 31)
SKIP = 77
SETUP = "scripts/peers-venv.sh or scripts/install-deps.sh creates it"


def command(mode, *args):
    """The argv that runs this helper in the peers' venv."""
    return [PYTHON, os.path.abspath(__file__), mode] + [str(a) for a in args]


_missing = {}


def missing(env=None):
    """None when the venv's Python imports onnxruntime >= 1.31, else what is missing."""
    key = None if env is None else tuple(sorted(env.items()))
    if key in _missing:
        return _missing[key]
    if not os.access(PYTHON, os.X_OK):
        why = f"no {os.path.relpath(PYTHON, ROOT)} (the peers' venv; {SETUP})"
    else:
        p = subprocess.run(command("check"), capture_output=True, text=True, env=env)
        lines = (p.stdout + p.stderr).strip().splitlines()
        why = None if p.returncode == 0 else (
            lines[-1] if lines else f"ort_run.py check exited {p.returncode}")
    _missing[key] = why
    return why


# ---- run in the venv -------------------------------------------------------------------------

def import_ort():
    try:
        import onnxruntime as ort
    except ImportError as e:
        print(f"ort_run: {sys.executable} cannot import onnxruntime ({e}); {SETUP}",
              file=sys.stderr)
        sys.exit(SKIP)
    version = tuple(int(x) for x in ort.__version__.split(".")[:2] if x.isdigit())
    if version < MIN_VERSION:
        print(f"ort_run: onnxruntime {ort.__version__} in {sys.executable} is older than "
              f"{'.'.join(map(str, MIN_VERSION))}; {SETUP}", file=sys.stderr)
        sys.exit(SKIP)
    return ort


def session(ort, model, threads, spin=0, profile_prefix=None):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", str(int(spin)))
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def feeds(sess, path):
    import numpy as np
    arrays = np.load(path)
    out = {}
    for i in sess.get_inputs():
        if i.name not in arrays:
            raise SystemExit(f"ort_run: {path}: no array named '{i.name}' (model input)")
        out[i.name] = arrays[i.name]
    return out


def save(path, outputs):
    import numpy as np
    np.savez(path, **{f"output_{i}": o for i, o in enumerate(outputs)})


def stats(times):
    s = sorted(times)
    mid = len(s) // 2
    median = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
    return sum(s) / len(s), median, s[0], s[-1]


def check_expected(outputs, path, rtol):
    import numpy as np
    expected = np.load(path)
    ok = True
    for i, got in enumerate(outputs):
        key = f"output_{i}"
        if key not in expected:
            raise SystemExit(f"ort_run: {path}: no array {key}")
        ref = expected[key].astype(np.float64)
        if ref.shape != got.shape:
            print(f"{key}: shape {list(got.shape)} != expected {list(ref.shape)}")
            ok = False
            continue
        diff = np.abs(ref - got.astype(np.float64))
        max_diff = float(diff.max()) if diff.size else 0.0
        max_ref = float(np.abs(ref).max()) if ref.size else 0.0
        err = max_diff / max_ref if max_ref > 0 else max_diff
        passed = err <= rtol  # NaN fails
        ok = ok and passed
        print(f"{key} {list(got.shape)}: rel err {err:.3e} {'ok' if passed else 'FAIL'}")
    return ok


def node_times(events, skip):
    """The profile's node events grouped by node in order of first execution; each node's
    first `skip` executions (the warm-up runs) dropped."""
    by_name = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][:-len("_kernel_time")]
        if name not in by_name:
            shape = e["args"].get("output_type_shape") or []
            dims = list(shape[0].values())[0] if shape else []
            elements = 1
            for d in dims:
                elements *= d
            by_name[name] = {"op": e["args"].get("op_name"), "elements": elements, "us": []}
        by_name[name]["us"].append(e["dur"])
    nodes = []
    for name, n in by_name.items():
        timed = sorted(n["us"][skip:] if len(n["us"]) > skip else n["us"])
        nodes.append({"name": name, "op": n["op"], "ms": timed[len(timed) // 2] / 1000,
                      "output_elements": n["elements"]})
    return nodes


def main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="ort_run.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    sub.add_parser("check")
    for mode, threads in (("run", 2), ("samples", 1)):
        s = sub.add_parser(mode)
        s.add_argument("model")
        s.add_argument("inputs")
        s.add_argument("out")
        s.add_argument("--threads", type=int, default=threads)
    for mode, warmup, repeat in (("bench", 10, 50), ("profile", 3, 10)):
        s = sub.add_parser(mode)
        s.add_argument("model")
        s.add_argument("inputs")
        s.add_argument("--threads", type=int, default=2)
        s.add_argument("--warmup", type=int, default=warmup)
        s.add_argument("--repeat", type=int, default=repeat)
        s.add_argument("--spin", type=int, choices=(0, 1), default=0)
        if mode == "bench":
            s.add_argument("--expected")
            s.add_argument("--rtol", type=float, default=1e-4)
    a = p.parse_args(argv)
    if getattr(a, "repeat", 1) < 1:
        p.error("--repeat must be at least 1")
    if getattr(a, "threads", 1) < 1:
        p.error("--threads must be at least 1")
    ort = import_ort()
    if a.mode == "check":
        print(f"onnxruntime {ort.__version__}")
        return 0
    import time

    import numpy as np
    if a.mode == "run":
        sess = session(ort, a.model, a.threads)
        save(a.out, sess.run(None, feeds(sess, a.inputs)))
    elif a.mode == "samples":
        sess = session(ort, a.model, a.threads)
        stacked = feeds(sess, a.inputs)
        n = {v.shape[0] if v.ndim else None for v in stacked.values()}
        if len(n) != 1 or None in n:
            raise SystemExit(f"ort_run: {a.inputs}: the inputs stack different numbers of "
                             f"samples ({sorted(map(str, n))})")
        n = n.pop()
        results = [sess.run(None, {k: v[j] for k, v in stacked.items()}) for j in range(n)]
        save(a.out, [np.stack([r[i] for r in results]) for i in range(len(sess.get_outputs()))])
    elif a.mode == "bench":
        sess = session(ort, a.model, a.threads, a.spin)
        inputs = feeds(sess, a.inputs)
        outputs = None
        for _ in range(a.warmup):
            outputs = sess.run(None, inputs)
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            outputs = sess.run(None, inputs)
            times.append((time.perf_counter() - t0) * 1e3)
        mean, median, lo, hi = stats(times)
        name = os.path.basename(os.path.dirname(os.path.abspath(a.model)))
        print(f"{name} ort {ort.__version__}: mean {mean:.3f} ms  median {median:.3f} ms  "
              f"min {lo:.3f} ms  max {hi:.3f} ms  ({a.repeat} runs, {a.threads} threads, "
              f"spin {a.spin})", flush=True)
        if a.expected and not check_expected(outputs, a.expected, a.rtol):
            return 1
    else:  # profile
        with tempfile.TemporaryDirectory(prefix="ort_profile_") as tmp:
            sess = session(ort, a.model, a.threads, a.spin, os.path.join(tmp, "ort"))
            inputs = feeds(sess, a.inputs)
            for _ in range(a.warmup + a.repeat):
                sess.run(None, inputs)
            with open(sess.end_profiling()) as f:
                events = json.load(f)
        for n in node_times(events, a.warmup):
            print(json.dumps(n))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # ORT's errors: one line naming the model, not a traceback
        print(f"ort_run: {' '.join(sys.argv[2:4])}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
