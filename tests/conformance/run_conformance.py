#!/usr/bin/env python3
"""ONNX's backend conformance suite, run through kiln.

Each case of Debian's libonnx-testdata (ONNX's backend test data: node,
simple, pytorch-converted, pytorch-operator) is a model.onnx and one or more
test_data_set_N folders of input_K.pb / output_K.pb. For each case this
builds the model with kiln (kiln.build, the same library `kiln build` calls,
binding dynamic axes to the inputs' shapes), loads the package (`kiln run`'s
runtime), runs every data set and compares as ONNX's own runner does
(onnx.backend.test.runner: the dtypes equal, then
numpy.testing.assert_allclose with rtol 1e-3, atol 1e-7; integers, booleans
and strings therefore exactly).

Every case that does not pass is listed, with its reason, in
expected_failures.txt beside this file. The run fails when a case fails that
the list does not name (a regression) or passes although the list names it
(the list must shrink with the work): --update rewrites the list from a run.

    run_conformance.py                          # every suite, check against the list
    run_conformance.py --suites node --shard 0/4 # a quarter of node (ctest runs the shards)
    run_conformance.py --update                 # rewrite the list after a change
    run_conformance.py --engine ort             # ONNX Runtime on the same cases (the peer figure)
    run_conformance.py --cases node/test_topk   # some cases, verbosely

Cases run in a worker process, many per process (a build costs far more than
a process); the parent restarts the worker after a crash or a timeout and
records that case as a crash or a timeout, so one bad case never takes the
run down.
"""

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = "/usr/share/libonnx-testdata/data"
SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")
EXPECTED = os.path.join(HERE, "expected_failures.txt")
# Out of scope (issue: "every ONNX model"): the training operators of the
# ai.onnx.preview.training domain.
OUT_OF_SCOPE_DOMAINS = ("ai.onnx.preview.training",)


# ---- the worker: one case at a time --------------------------------------------------------


class NoValue:
    """An optional without a value (None means an input left out)."""

    def __repr__(self):
        return "NoValue"


NO_VALUE = NoValue()


def load_proto_value(path, kind):
    """A TensorProto (an array), a SequenceProto (a list of arrays) or an
    OptionalProto (its value, or NO_VALUE) from an input_K.pb / output_K.pb."""
    import onnx
    from onnx import numpy_helper
    data = open(path, "rb").read()
    if kind == "tensor":
        t = onnx.TensorProto()
        t.ParseFromString(data)
        if t.data_type == onnx.TensorProto.BFLOAT16:
            return bfloat16_bits(t)
        return numpy_helper.to_array(t)
    if kind == "sequence":
        t = onnx.SequenceProto()
        t.ParseFromString(data)
        return list(numpy_helper.to_list(t))
    if kind == "optional":
        t = onnx.OptionalProto()
        t.ParseFromString(data)
        value = numpy_helper.to_optional(t)
        if value is None:
            return NO_VALUE
        return list(value) if isinstance(value, (list, tuple)) else value
    raise CaseFailure(f"{kind} values are not supported")


def bfloat16_bits(t):
    """A BFLOAT16 TensorProto as its uint16 bits: numpy has no bfloat16, and
    kiln's Python API takes and returns bfloat16 tensors as their bits (ONNX's
    older test data stores them as UINT16 already). numpy_helper would widen
    them to float32, which no bfloat16 output could equal in dtype."""
    import numpy as np
    if t.raw_data:
        bits = np.frombuffer(t.raw_data, dtype="<u2").astype(np.uint16)
    else:
        bits = np.asarray(t.int32_data, dtype=np.uint32).astype(np.uint16)
    return bits.reshape(tuple(t.dims))


class CaseFailure(Exception):
    pass


def value_kind(type_proto):
    which = type_proto.WhichOneof("value")
    return {"tensor_type": "tensor", "sequence_type": "sequence", "optional_type": "optional",
            "map_type": "map", "sparse_tensor_type": "sparse tensor"}.get(which, str(which))


def case_io(case_dir):
    """The model, its runtime inputs and outputs (ValueInfoProto) and its data sets."""
    import onnx
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    outputs = list(model.graph.output)
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    return model, inputs, outputs, sets


def read_set(case_dir, data_set, infos, prefix):
    values = []
    for k, info in enumerate(infos):
        path = os.path.join(case_dir, data_set, f"{prefix}_{k}.pb")
        if not os.path.exists(path):
            # An omitted optional input ("" in the node) has no file.
            values.append(None)
            continue
        values.append(load_proto_value(path, value_kind(info.type)))
    return values


def static_shape(info):
    t = info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return dims


def compare(outputs, refs, rtol, atol, what="output"):
    """Raises CaseFailure as ONNX's runner would fail (assert_similar_outputs);
    a sequence compares element by element, an empty optional only with None."""
    import numpy as np
    if len(outputs) != len(refs):
        raise CaseFailure(f"{len(outputs)} {what}s, expected {len(refs)}")
    for k, (out, ref) in enumerate(zip(outputs, refs)):
        if ref is NO_VALUE or out is None:
            if not (ref is NO_VALUE and out is None):
                raise CaseFailure(f"{what} {k} is {'empty' if out is None else 'a value'}, "
                                  f"expected {'an empty optional' if ref is NO_VALUE else 'a value'}")
            continue
        if isinstance(ref, list):
            if not isinstance(out, list):
                raise CaseFailure(f"{what} {k} is not a sequence")
            compare(out, ref, rtol, atol, what=f"{what} {k} element")
            continue
        out = np.asarray(out)
        if out.dtype != ref.dtype:
            raise CaseFailure(f"output {k} is {out.dtype}, expected {ref.dtype}")
        if out.shape != ref.shape:
            raise CaseFailure(f"output {k} has shape {list(out.shape)}, expected {list(ref.shape)}")
        if ref.dtype == object:
            if not np.array_equal(out, ref):
                raise CaseFailure(f"output {k} differs")
            continue
        try:
            np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
        except AssertionError:
            bad = ~np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
            diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
            raise CaseFailure(f"wrong result: output {k}, {int(bad.sum())} of {ref.size} elements "
                              f"differ, max |diff| {float(np.nanmax(diff)):.3g}") from None


class KilnEngine:
    def __init__(self):
        import kiln  # noqa: F401 (PYTHONPATH=build/python)
        self.kiln = kiln

    def prepare(self, case_dir, model, inputs, first_set):
        # Only the inputs the model leaves dynamic are bound from the data (kiln
        # needs a shape for every axis); a static input keeps the model's shape,
        # as any backend would take it. (ONNX's CastLike-to/from-bfloat16 cases
        # declare `like` [3, 4] and feed [1]: kiln never reads it, so it runs.)
        shapes = {}
        for info, value in zip(inputs, first_set):
            if value_kind(info.type) != "tensor":
                continue  # sequences and optionals keep their shapes open
            if value is not None and static_shape(info) is None:
                shapes[info.name] = tuple(value.shape)
        try:
            pkg = self.kiln.build(os.path.join(case_dir, "model.onnx"), input_shapes=shapes or None)
            return pkg.load()
        except self.kiln.KilnError as e:
            raise CaseFailure(short_reason(str(e), case_dir)) from None

    def run(self, module, inputs, values):
        feeds = {i.name: (None if v is NO_VALUE else v)
                 for i, v in zip(inputs, values) if v is not None}
        try:
            return module.run(**feeds) if feeds else (module.run(), [
                module.get_output(k) for k in range(module.num_outputs)])[1]
        except self.kiln.KilnError as e:
            raise CaseFailure("run: " + short_reason(str(e), "")) from None


class OrtEngine:
    def __init__(self):
        import onnxruntime
        self.ort = onnxruntime

    def prepare(self, case_dir, model, inputs, first_set):
        opts = self.ort.SessionOptions()
        opts.intra_op_num_threads = 2
        try:
            return self.ort.InferenceSession(os.path.join(case_dir, "model.onnx"), opts,
                                             providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 (ORT raises many kinds)
            raise CaseFailure(short_reason(str(e), case_dir)) from None

    def run(self, session, inputs, values):
        feeds = {i.name: (None if v is NO_VALUE else v)
                 for i, v in zip(inputs, values) if v is not None}
        try:
            return session.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            raise CaseFailure("run: " + short_reason(str(e), "")) from None


def short_reason(message, case_dir):
    """One line without the temporary or data paths, so the list stays stable."""
    line = message.strip().splitlines()[0] if message.strip() else "error"
    for p in (os.path.join(case_dir, "model.onnx") + ": ", case_dir + "/"):
        if case_dir:
            line = line.replace(p, "")
    return line[:300]


def out_of_scope(model):
    domains = {o.domain for o in model.opset_import}
    return any(d in OUT_OF_SCOPE_DOMAINS for d in domains)


def run_case(engine, case_dir):
    """'pass', or raises CaseFailure; returns 'skip' for out-of-scope cases."""
    model, inputs, outputs, sets = case_io(case_dir)
    if out_of_scope(model):
        return "skip"
    for io in inputs + outputs:
        kind = value_kind(io.type)
        if kind not in ("tensor", "sequence", "optional"):
            raise CaseFailure(f"{kind} {'input' if io in inputs else 'output'} '{io.name}'")
    if not sets:
        raise CaseFailure("no test data")
    values = [read_set(case_dir, s, inputs, "input") for s in sets]
    prepared = {}
    for s, vals in zip(sets, values):
        key = tuple(None if v is None or v is NO_VALUE else
                    tuple(e.shape for e in v) if isinstance(v, list) else v.shape for v in vals)
        if key not in prepared:
            prepared[key] = engine.prepare(case_dir, model, inputs, vals)
        refs = read_set(case_dir, s, outputs, "output")
        outs = engine.run(prepared[key], inputs, vals)
        compare(outs, refs, rtol=1e-3, atol=1e-7)
    return "pass"


def worker(engine_name):
    """Reads case directories from stdin, one per line; answers one JSON line each."""
    engine = KilnEngine() if engine_name == "kiln" else OrtEngine()
    for line in sys.stdin:
        case_dir = line.strip()
        t0 = time.monotonic()
        try:
            status, reason = run_case(engine, case_dir), ""
        except CaseFailure as e:
            status, reason = "fail", str(e)
        except Exception as e:  # noqa: BLE001: a case's error must not end the run
            status, reason = "fail", f"{type(e).__name__}: {short_reason(str(e), case_dir)}"
        print(json.dumps({"status": status, "reason": reason,
                          "seconds": round(time.monotonic() - t0, 3)}), flush=True)


# ---- the parent: cases, workers, the expected-failures list --------------------------------


def list_cases(data, suites):
    cases = []
    for suite in suites:
        root = os.path.join(data, suite)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            if os.path.isfile(os.path.join(root, name, "model.onnx")):
                cases.append(f"{suite}/{name}")
    return cases


class Worker:
    def __init__(self, engine, python):
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", engine],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env)
        self.case = None
        self.started = 0.0

    def send(self, case, data):
        self.case, self.started = case, time.monotonic()
        self.proc.stdin.write(os.path.join(data, case) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def run_cases(cases, data, engine, jobs, timeout, python, on_result):
    pending = collections.deque(cases)
    workers = []
    while pending or any(w.case for w in workers):
        while len(workers) < jobs and pending:
            workers.append(Worker(engine, python))
        for w in workers:
            if w.case is None and pending:
                w.send(pending.popleft(), data)
        busy = [w for w in workers if w.case]
        ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 1.0)
        for w in list(busy):
            if w.proc.stdout in ready:
                line = w.proc.stdout.readline()
                if line:
                    on_result(w.case, json.loads(line))
                    w.case = None
                    continue
                code = w.proc.wait()
                on_result(w.case, {"status": "fail", "reason": f"crash: worker died ({code})"})
            elif time.monotonic() - w.started > timeout:
                w.kill()
                on_result(w.case, {"status": "fail", "reason": f"timeout: over {timeout} s"})
            else:
                continue
            workers.remove(w)
    for w in workers:
        w.proc.stdin.close()
        w.proc.wait()


def read_expected(path):
    expected = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            case, _, reason = line.partition(": ")
            expected[case.strip()] = reason
    return expected


HEADER = """\
# ONNX conformance cases (Debian's libonnx-testdata) that kiln does not pass, with the
# reason each failed. tests/conformance/run_conformance.py fails when a case not listed
# here fails or a listed one passes; after a change, rewrite this file with
#   PYTHONPATH=build/python /usr/bin/python3 tests/conformance/run_conformance.py --update
# Cases of the ai.onnx.preview.training domain are out of scope and not run.
"""


def write_expected(path, expected):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(HEADER)
        for case in sorted(expected):
            f.write(f"{case}: {expected[case]}\n")
    os.replace(path + ".tmp", path)


def summarize(results, suites):
    lines = []
    for suite in suites:
        rs = [r for c, r in results.items() if c.split("/")[0] == suite]
        if not rs:
            continue
        run = [r for r in rs if r["status"] != "skip"]
        passed = sum(r["status"] == "pass" for r in run)
        lines.append(f"{suite}: {passed} of {len(run)} pass"
                     + (f" ({len(rs) - len(run)} out of scope)" if len(rs) != len(run) else ""))
    run = [r for r in results.values() if r["status"] != "skip"]
    passed = sum(r["status"] == "pass" for r in run)
    lines.append(f"total: {passed} of {len(run)} pass ({100.0 * passed / max(len(run), 1):.1f} %)")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("KILN_ONNX_TESTDATA", DEFAULT_DATA))
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--cases", help="comma-separated suite/case names (verbose)")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th case from the K-th")
    ap.add_argument("--engine", default="kiln", choices=("kiln", "ort"))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("--expected", default=EXPECTED)
    ap.add_argument("--update", action="store_true", help="rewrite the expected-failures list")
    ap.add_argument("--report", help="write every case's result as JSON here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return 0

    suites = args.suites.split(",")
    if not os.path.isdir(args.data):
        print(f"conformance: no ONNX test data at {args.data} (Debian's libonnx-testdata; "
              "scripts/install-deps.sh installs it)", file=sys.stderr)
        return 1
    cases = args.cases.split(",") if args.cases else list_cases(args.data, suites)
    k, n = (int(x) for x in args.shard.split("/"))
    cases = cases[k::n]
    results = {}

    def on_result(case, r):
        results[case] = r
        if args.cases:
            print(f"{case}: {r['status']} {r.get('reason', '')} ({r.get('seconds', '?')} s)")

    t0 = time.monotonic()
    run_cases(cases, args.data, args.engine, args.jobs, args.timeout, sys.executable, on_result)
    print(f"conformance ({args.engine}): {len(cases)} cases in {time.monotonic() - t0:.0f} s")
    for line in summarize(results, suites if not args.cases else
                          sorted({c.split('/')[0] for c in cases})):
        print("  " + line)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if args.engine != "kiln" or args.cases:
        return 0

    expected = read_expected(args.expected)
    if args.update:
        for case, r in results.items():
            expected.pop(case, None)
            if r["status"] == "fail":
                expected[case] = r["reason"]
        write_expected(args.expected, expected)
        print(f"conformance: wrote {args.expected} ({len(expected)} expected failures)")
        return 0
    new = sorted(c for c, r in results.items() if r["status"] == "fail" and c not in expected)
    fixed = sorted(c for c, r in results.items() if r["status"] == "pass" and c in expected)
    for c in new:
        print(f"FAIL (not in the expected failures): {c}: {results[c]['reason']}")
    for c in fixed:
        print(f"PASSES but listed as an expected failure (remove it from {args.expected}): {c}")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
