#!/usr/bin/env python3
"""kiln int8 vs kiln fp32 vs ONNX Runtime int8 vs ONNX Runtime fp32, in one run.

For each model directory written by quantized_models.py (model.onnx: the QDQ model,
float.onnx: the float model it was quantized from, input.npz): builds both with kiln
(untuned: fallback configs, unless --tuning-log), then times the four in interleaved
rounds (kiln run --repeat N --print-time; bench/peers/ort_run.py bench, in the peers' venv
bench/.venv, on the same files) and prints the
medians of the rounds' medians as a markdown table.

  int8_bench.py --kiln build/kiln DIR/resnet18 DIR/mobilenet_v2 [--rounds 3] [--repeat 20]
                [--target "llvm -mcpu=haswell"]

--target builds both kiln packages for that target (e.g. AVX2 code, vpmaddwd for int8, on
an AVX-512 machine that can run it); ONNX Runtime picks its kernels from the CPU as always.
--isa avx2 holds both sides to AVX2: kiln builds for `llvm -mcpu=znver3` (unless --target) and
ONNX Runtime runs with AVX-512, VNNI and AMX hidden from its CPUID checks
(bench/peers/peer_isa.py), so its int8 column is its AVX2 (vpmaddubsw) code.

Exit 77 (the tests' skip code) when that venv or its onnxruntime is missing.
"""
import argparse
import os
import statistics
import sys

from qdq_check import HERE, median_ms, run

sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import ort_run  # noqa: E402
import peer_isa  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", required=True)
    p.add_argument("model_dirs", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--tuning-log", default=None)
    p.add_argument("--target", default=None, help="kiln build --target for both kiln packages")
    p.add_argument("--shipped-logs", action="store_true",
                   help="let kiln build use the shipped logs (logs/); by default both sides are "
                        "untuned, since the logs hold fp32 records only and would tune one side")
    p.add_argument("--isa", choices=peer_isa.ISAS, default="native",
                   help="avx2: kiln and ONNX Runtime both on their AVX2 code (see above)")
    args = p.parse_args()
    if ort_run.missing():
        print(f"int8_bench: SKIP: {ort_run.missing()}")
        sys.exit(ort_run.SKIP)
    tune = ["--tuning-log", args.tuning_log] if args.tuning_log else []
    if not args.shipped_logs:
        tune.append("--no-shipped-logs")
    target = args.target or peer_isa.kiln_target(args.isa)
    if target:
        tune += ["--target", target]
    work = os.path.join(os.path.dirname(os.path.abspath(args.model_dirs[0])), "peers")
    try:
        ort_env = peer_isa.peer_env(args.isa, os.environ, work, kiln=args.kiln)
    except peer_isa.PeerIsaError as e:
        sys.exit(f"int8_bench: --isa {args.isa}: {e}")
    rows = []
    for d in args.model_dirs:
        name = os.path.basename(os.path.normpath(d))
        qdq, flt, inputs = (os.path.join(d, f) for f in ("model.onnx", "float.onnx", "input.npz"))
        if not os.path.exists(flt):
            sys.exit(f"int8_bench: {flt} is missing (regenerate with quantized_models.py)")
        pk8, pk32 = os.path.join(d, "kiln_int8.tar"), os.path.join(d, "kiln_fp32.tar")
        report = run([args.kiln, "build", qdq, "-o", pk8] + tune)
        run([args.kiln, "build", flt, "-o", pk32] + tune)
        first = report.splitlines()[0] if report else ""
        times = {k: [] for k in ("kiln int8", "kiln fp32", "ORT int8", "ORT fp32")}
        for _ in range(args.rounds):
            for key, cmd, env in (
                ("kiln int8", [args.kiln, "run", pk8, "--inputs", inputs, "--repeat",
                               str(args.repeat), "--print-time"], None),
                ("kiln fp32", [args.kiln, "run", pk32, "--inputs", inputs, "--repeat",
                               str(args.repeat), "--print-time"], None),
                ("ORT int8", ort_run.command("bench", qdq, inputs, "--repeat", args.repeat,
                                             "--warmup", 3), ort_env),
                ("ORT fp32", ort_run.command("bench", flt, inputs, "--repeat", args.repeat,
                                             "--warmup", 3), ort_env),
            ):
                times[key].append(median_ms(run(cmd, env=env)))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((name, med, times, first))
    print("| model | kiln int8 | kiln fp32 | ORT int8 | ORT fp32 | kiln int8 / kiln fp32 "
          "| kiln int8 / ORT int8 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, med, _, _ in rows:
        print(f"| {name} | {med['kiln int8']:.2f} | {med['kiln fp32']:.2f} | "
              f"{med['ORT int8']:.2f} | {med['ORT fp32']:.2f} | "
              f"{med['kiln fp32'] / med['kiln int8']:.2f}x faster | "
              f"{med['kiln int8'] / med['ORT int8']:.2f} |")
    print()
    for name, _, times, first in rows:
        print(f"{name}: rounds (ms) " +
              "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in times.items()))
        print(f"{name}: {first}")


if __name__ == "__main__":
    main()
