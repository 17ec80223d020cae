#!/usr/bin/python3
"""End-to-end benchmark: kiln against ONNX Runtime and PyTorch on the generated models.

Usage:
  run_bench.py [--kiln build/kiln] [--models resnet18,...] [--models-dir DIR] [--work DIR]
               [--rounds 3] [--repeat 30] [--warmup 5] [--threads 2] [--out results.md]
               [--kiln-build-args "..."] [--skip kiln,torch,ort] [--peers-spin]
               [--tuning-log DB] [--shipped-logs] [--isa native|avx2] [--json OUT.json]

For each model (generated into --models-dir by generate.py when missing): `kiln build` with
the fallback configs (no tuning log, --no-shipped-logs) and, with --tuning-log DB, a second
build with the tuning log (engine "kiln_tuned"; shipped logs off, so that DB alone decides;
with --shipped-logs the tuned build uses kiln's shipped logs for this CPU's ISA class, after
DB if given), one `kiln run --output` checked against expected.npz with
compare.py, then --rounds rounds that each time kiln (`kiln run --repeat N --print-time`),
ONNX Runtime (the `onnxruntime` package of bench/.venv, through bench/peers/ort_run.py bench;
left out, saying why, when that venv or its onnxruntime is missing) and PyTorch
(torch_bench.py) once, in a rotating order so that load on this shared machine hits all three
alike. A peer's time is the median over rounds of its
per-round medians. Prints a markdown table (and writes it to --out): model, kiln ms, ORT ms,
PyTorch ms, kiln/ORT, kiln/PyTorch, and kiln's relative error against PyTorch's outputs.
Every engine runs with --threads threads (kiln through KILN_NUM_THREADS). The peers' worker
threads sleep rather than spin when idle (ORT allow_spinning=0, OMP_WAIT_POLICY=passive), their
faster setting on this busy shared machine (see ort_run.py and torch_bench.py); --peers-spin
gives them their spinning defaults, for a quiet machine. --json OUT.json also writes each
model's medians, fastest runs and status for scripts (fp32_goals.py reads it).

--isa avx2 times every engine's AVX2 code on a CPU that also has AVX-512: kiln builds for
`llvm -mcpu=znver3` (the AMD EPYC Zen 3 of MACHINE.md; unless --kiln-build-args names a
--target), ONNX Runtime runs with AVX-512, VNNI and AMX hidden from its CPUID checks and PyTorch
with ATen's and oneDNN's ISA capped at AVX2 (bench/peers/peer_isa.py). It is a proxy for an
AVX2-only machine: like-for-like code, not that machine's clock, caches or absolute times.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import ort_run  # noqa: E402  (bench/peers: ONNX Runtime in the peers' venv)
import peer_isa  # noqa: E402  (bench/peers: the peers held to one ISA)
DEFAULT_MODELS = "resnet18,resnet50,mobilenet_v2,squeezenet1_1,encoder"
UNITS_MS = {"s": 1e3, "ms": 1.0, "us": 1e-3, "µs": 1e-3}
ENGINES = ["kiln", "kiln_tuned", "ort", "torch"]


def parse_stat_ms(text, stat="median"):
    """Finds a timing statistic (median, mean, min, max) in a benchmark's output, in ms.
    Understands a column table ('mean (ms)   median (ms)  max (ms) ...' with the numbers on the
    next line: kiln run's and tvmc's format) and inline forms ('median 12.3 ms',
    'median: 12.3ms', 'median=12.3')."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cols = re.findall(r"\b(mean|median|max|min|std)\s*\(\s*(ms|us|µs|s)\s*\)", line, re.I)
        names = [c[0].lower() for c in cols]
        if stat not in names:
            continue
        for values_line in lines[i + 1:i + 3]:
            nums = re.findall(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", values_line)
            if len(nums) >= len(cols):
                k = names.index(stat)
                return float(nums[k]) * UNITS_MS[cols[k][1].lower()]
    m = re.search(rf"\b{stat}\b\s*(?:\(\s*(ms|us|µs|s)\s*\))?\s*[:=]?\s*"
                  r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*(ms|us|µs|s)?\b", text, re.I)
    if m:
        unit = (m.group(1) or m.group(3) or "ms").lower()
        return float(m.group(2)) * UNITS_MS[unit]
    return None


def parse_median_ms(text):
    return parse_stat_ms(text, "median")


def run(cmd, timeout, env=None):
    """Runs cmd; returns (ok, combined output). Never raises for a failing command."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
        return p.returncode == 0, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, out + f"\n(timed out after {timeout} s)"
    except OSError as e:
        return False, str(e)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def last_lines(text, n=6):
    return "\n".join("    " + l for l in text.strip().splitlines()[-n:])


class Bench:
    def __init__(self, args, ort=True):
        self.args = args
        self.env = dict(os.environ, KILN_NUM_THREADS=str(args.threads),
                        OMP_NUM_THREADS=str(args.threads))
        self.tuned_counts = {}
        # The peers' environment: the same, or held to --isa (bench/peers/peer_isa.py).
        self.peer_env = peer_isa.peer_env(args.isa, self.env, os.path.join(args.work, "peers"),
                                          kiln=args.kiln, ort=ort)

    def model_dir(self, name):
        return os.path.join(self.args.models_dir, name)

    def ensure_models(self, names):
        missing = [n for n in names if not all(
            os.path.exists(os.path.join(self.model_dir(n), f))
            for f in ("model.onnx", "input.npz", "expected.npz"))]
        if missing:
            log(f"generating {', '.join(missing)} into {self.args.models_dir}")
            subprocess.run([PYTHON, os.path.join(HERE, "generate.py"), "--out",
                            self.args.models_dir, "--models", ",".join(missing)], check=True)

    def kiln_prepare(self, name, tuned=False):
        """kiln build + a checked run. Returns (package path or None, status text)."""
        d = self.model_dir(name)
        work = os.path.join(self.args.work, name)
        os.makedirs(work, exist_ok=True)
        variant = "tuned" if tuned else "fallback"
        package = os.path.join(work, f"model.{variant}.tar")
        cmd = [self.args.kiln, "build", os.path.join(d, "model.onnx"), "-o", package]
        if not (tuned and self.args.shipped_logs):
            cmd += ["--no-shipped-logs"]
        if tuned and self.args.tuning_log:
            cmd += ["--tuning-log", self.args.tuning_log]
        extra = shlex.split(self.args.kiln_build_args)
        if peer_isa.kiln_target(self.args.isa) and "--target" not in extra:
            extra += ["--target", peer_isa.kiln_target(self.args.isa)]
        cmd += extra
        ok, out = run(cmd, self.args.timeout, self.env)
        if not ok:
            log(f"  {name}: kiln build ({variant}) failed:\n{last_lines(out)}")
            return None, "build failed"
        tuned_line = re.search(r"tuned: (\d+ of \d+)", out)
        if tuned_line:
            self.tuned_counts[name] = tuned_line.group(1)
        got = os.path.join(work, f"out.{variant}.npz")
        ok, out = run([self.args.kiln, "run", package, "--inputs", os.path.join(d, "input.npz"),
                       "--output", got], self.args.timeout, self.env)
        if not ok:
            log(f"  {name}: kiln run failed:\n{last_lines(out)}")
            return None, "run failed"
        ok, out = run([PYTHON, os.path.join(HERE, "compare.py"), os.path.join(d, "expected.npz"),
                       got, "--rtol", str(self.args.rtol)], 300)
        errs = re.findall(r"rel err (\S+)", out)
        status = ("max " + max(errs, key=float)) if errs else "?"
        if not ok:
            log(f"  {name}: kiln output differs from expected:\n{last_lines(out)}")
            status += " FAIL"
        return package, status

    def time_once(self, engine, name, package):
        a, d = self.args, self.model_dir(name)
        if engine.startswith("kiln"):
            cmd = [a.kiln, "run", package, "--inputs", os.path.join(d, "input.npz"),
                   "--repeat", str(a.repeat), "--print-time"]
        elif engine == "ort":
            cmd = ort_run.command("bench", os.path.join(d, "model.onnx"),
                                  os.path.join(d, "input.npz"), "--threads", a.threads,
                                  "--warmup", a.warmup, "--repeat", a.repeat,
                                  "--spin", 1 if a.peers_spin else 0)
        else:
            cmd = [PYTHON, os.path.join(HERE, "torch_bench.py"), d, "--threads", str(a.threads),
                   "--warmup", str(a.warmup), "--repeat", str(a.repeat),
                   "--omp-wait-policy", "active" if a.peers_spin else "passive"]
        ok, out = run(cmd, a.timeout, self.env if engine.startswith("kiln") else self.peer_env)
        ms = parse_median_ms(out) if ok else None
        if ms is None:
            log(f"  {name}/{engine}: no time ({'no median in output' if ok else 'failed'}):\n"
                f"{last_lines(out)}")
            return None, None
        return ms, parse_stat_ms(out, "min")


def fmt_ms(x):
    return "n/a" if x is None else f"{x:.2f}"


def fmt_ratio(a, b):
    return "n/a" if a is None or b is None else f"{a / b:.2f}"


def write_json(args, names, engines, med, best, status, tuned_counts):
    """The table's numbers for scripts: per model and engine the median and the fastest run
    (ms, null where the engine failed or was skipped), kiln's check status and tuned count."""
    load = os.getloadavg()
    doc = {
        "threads": args.threads, "rounds": args.rounds, "repeat": args.repeat, "isa": args.isa,
        "tuning_log": args.tuning_log, "shipped_logs": args.shipped_logs,
        "date": f"{datetime.datetime.now():%Y-%m-%d %H:%M}", "host": platform.node(),
        "load_average": [round(x, 2) for x in load],
        "models": {
            name: {
                "median_ms": {e: med(name, e) for e in engines},
                "min_ms": {e: best(name, e) for e in engines},
                "status": status.get(name),
                "tuned_workloads": tuned_counts.get(name),
            } for name in names
        },
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", default=os.path.join(HERE, "..", "..", "build", "kiln"))
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--models-dir", default=os.path.join(HERE, "..", "..", "build", "models"))
    p.add_argument("--work", default=None, help="packages and outputs (default: MODELS_DIR/kiln)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per command")
    p.add_argument("--kiln-build-args", default="", help="extra arguments for kiln build")
    p.add_argument("--skip", default="", help="engines to leave out: kiln,ort,torch")
    p.add_argument("--peers-spin", action="store_true",
                   help="let ORT and PyTorch threads spin when idle (their defaults)")
    p.add_argument("--tuning-log", help="also time a build with this tuning database")
    p.add_argument("--shipped-logs", action="store_true",
                   help="the tuned build uses kiln's shipped logs (logs/<isa class>.jsonl, with "
                        "--tuning-log DB after DB): what a user gets without tuning")
    p.add_argument("--isa", choices=peer_isa.ISAS, default="native",
                   help="avx2: every engine's AVX2 code on this CPU (kiln for znver3, the peers "
                        "with AVX-512 hidden or capped); see above")
    p.add_argument("--out", help="also write the markdown table here")
    p.add_argument("--json", help="also write the medians, minima and status as JSON here")
    args = p.parse_args()
    args.work = args.work or os.path.join(args.models_dir, "kiln")
    skip = {s for s in args.skip.split(",") if s}
    if not args.tuning_log and not args.shipped_logs:
        skip.add("kiln_tuned")
    if skip - set(ENGINES) - {"kiln_tuned"}:
        p.error(f"--skip: unknown engine(s) {', '.join(sorted(skip - set(ENGINES)))}")
    if "kiln" not in skip and not os.access(args.kiln, os.X_OK):
        p.error(f"no kiln executable at {args.kiln} (pass --kiln PATH, or --skip kiln)")
    names = [m for m in args.models.split(",") if m]
    ort_why = None
    if "ort" not in skip and ort_run.missing():
        ort_why = ort_run.missing()
        log(f"ONNX Runtime left out: {ort_why}")
        skip.add("ort")
    if not [e for e in ENGINES if e not in skip]:
        p.error("no engine left to time" + (f" (ONNX Runtime: {ort_why})" if ort_why else ""))

    try:
        bench = Bench(args, ort="ort" not in skip)
    except peer_isa.PeerIsaError as e:
        p.error(f"--isa {args.isa}: {e}")
    bench.ensure_models(names)
    packages, status = {}, {}
    if "kiln" not in skip:
        for name in names:
            log(f"kiln build {name}")
            packages[(name, "kiln")], status[name] = bench.kiln_prepare(name)
            if "kiln_tuned" not in skip:
                packages[(name, "kiln_tuned")], st = bench.kiln_prepare(name, tuned=True)
                status[name] += f"; tuned {st}"

    engines = [e for e in ENGINES if e not in skip]
    times = {(n, e): [] for n in names for e in engines}
    mins = {(n, e): [] for n in names for e in engines}
    for r in range(args.rounds):
        for i, name in enumerate(names):
            k = (r + i) % len(engines)
            for engine in engines[k:] + engines[:k]:  # rotate who runs first
                if engine.startswith("kiln") and packages.get((name, engine)) is None:
                    continue
                ms, best = bench.time_once(engine, name, packages.get((name, engine)))
                log(f"round {r + 1}/{args.rounds} {name:14s} {engine:5s} "
                    f"{'failed' if ms is None else f'{ms:.3f} ms'}")
                if ms is not None:
                    times[(name, engine)].append(ms)
                if best is not None:
                    mins[(name, engine)].append(best)

    def med(name, engine):
        t = times.get((name, engine))
        return statistics.median(t) if t else None

    def best(name, engine):
        t = mins.get((name, engine))
        return min(t) if t else None

    load = os.getloadavg()
    lines = [
        f"kiln vs ONNX Runtime vs PyTorch, {args.threads} threads, median of {args.rounds} "
        f"rounds x {args.repeat} runs, peer threads "
        f"{'spinning' if args.peers_spin else 'not spinning'}, "
        f"{'each engine AVX2 code (--isa avx2)' if args.isa == 'avx2' else 'native ISA'}; "
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}, "
        f"{platform.node()}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
        "",
    ]
    if ort_why:
        lines += [f"ONNX Runtime not timed (its columns n/a): {ort_why}", ""]
    if "kiln_tuned" in skip:
        lines += ["| model | kiln ms | ORT ms | PyTorch ms | kiln/ORT | kiln/PyTorch | kiln rel err |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for name in names:
            k, o, t = med(name, "kiln"), med(name, "ort"), med(name, "torch")
            err = "skipped" if "kiln" in skip else status.get(name, "?")
            lines.append(f"| {name} | {fmt_ms(k)} | {fmt_ms(o)} | {fmt_ms(t)} | "
                         f"{fmt_ratio(k, o)} | {fmt_ratio(k, t)} | {err} |")
    else:
        lines += ["| model | kiln fallback ms | kiln tuned ms | ORT ms | PyTorch ms | "
                  "tuned/fallback | tuned/ORT | tuned/PyTorch | tuned workloads | rel err |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for name in names:
            f_, k = med(name, "kiln"), med(name, "kiln_tuned")
            o, t = med(name, "ort"), med(name, "torch")
            lines.append(f"| {name} | {fmt_ms(f_)} | {fmt_ms(k)} | {fmt_ms(o)} | {fmt_ms(t)} | "
                         f"{fmt_ratio(k, f_)} | {fmt_ratio(k, o)} | {fmt_ratio(k, t)} | "
                         f"{bench.tuned_counts.get(name, '?')} | {status.get(name, '?')} |")
    # Other processes on a shared machine only ever add time: the fastest run is a second,
    # less load-sensitive view (it flatters engines with high variance, so it is not the headline).
    lines += [
        "",
        "Fastest single run (min over all rounds), same engines:",
        "",
        "| model | kiln min ms | kiln tuned min ms | ORT min ms | PyTorch min ms | "
        "best kiln/ORT | best kiln/PyTorch |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        k, kt = best(name, "kiln"), best(name, "kiln_tuned")
        o, t = best(name, "ort"), best(name, "torch")
        kb = min(x for x in (k, kt) if x is not None) if (k or kt) else None
        lines.append(f"| {name} | {fmt_ms(k)} | {fmt_ms(kt)} | {fmt_ms(o)} | {fmt_ms(t)} | "
                     f"{fmt_ratio(kb, o)} | {fmt_ratio(kb, t)} |")
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    if args.json:
        write_json(args, names, engines, med, best, status, bench.tuned_counts)
    failed = any(packages.get((n, "kiln")) is None or "FAIL" in status.get(n, "") for n in names) \
        if "kiln" not in skip else False
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
