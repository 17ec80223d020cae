#!/usr/bin/python3
"""kiln against ONNX Runtime layer by layer: where a model's time goes in each engine.

Usage:
  layer_compare.py --model M.onnx --inputs X.npz [--kiln build/kiln] [--package P.tar]
                   [--tuning-log DB | --shipped-logs] [--isa native|avx2] [--threads 2]
                   [--repeat 20] [--rounds 3] [--work DIR] [--sort order|loss] [--out F.md]

kiln's side is `kiln run --profile` (each kernel's mean time per call) of a package that this
script builds as run_bench.py does (the fallback configs; --tuning-log DB or --shipped-logs for
a tuned build; --isa avx2 builds for -mcpu=znver3), or of --package. ORT's side is its own
profiler (bench/peers/ort_run.py profile, in the peers' venv bench/.venv: each node's median
time), with run_bench.py's session and, under
--isa avx2, its ISA held to AVX2 (bench/peers/peer_isa.py).

The heavy kernels of both (kiln's templates; ORT's Conv, FusedConv, Gemm, MatMul and their
quantized and fused forms) are paired in execution order: by the ONNX node whose output each
writes (kiln's output tensor is named after it, ORT's profiled node after that node's output
tensor) where both name one, else by the number of elements written; the longest common
subsequence, so that a kernel one engine has and the other fused away (ORT runs a lone
BatchNormalization as a Conv) leaves the rest paired. Prints one row per pair (kiln's
kernel and workload, kiln ms, ORT's node, ORT ms, kiln/ORT), the unpaired kernels, and each
engine's totals: the paired kernels, the other heavy ones, and everything else (layout
transforms, pooling, elementwise). Profilers add a little time per kernel on both sides; the
totals are sums of per-kernel times, not end-to-end latencies (run_bench.py measures those).

Each engine is profiled --rounds times, the two in turn, and each kernel's time is its fastest
round's: on a shared VM both engines have spells, of seconds to minutes, in which two threads
run at about one thread's speed (a DenseNet-121 Winograd conv then ran 1.5 ms instead of 0.44;
their cause lies outside the guest, results/fallback-tiles-2026-11-29-zen4.md), and one profile
of each engine can catch them in different spells. Each round's totals are printed, so that a
slow spell shows.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import ort_run  # noqa: E402  (bench/peers: ONNX Runtime in the peers' venv)
import peer_isa  # noqa: E402  (bench/peers: the peers held to one ISA)

ORT_HEAVY = {"Conv", "FusedConv", "NchwcConv", "QLinearConv", "ConvInteger", "Gemm", "FusedGemm",
             "MatMul", "FusedMatMul", "QLinearMatMul", "MatMulInteger", "DynamicQuantizeMatMul",
             "MatMulIntegerToFloat", "QGemm"}


def fail(msg):
    sys.exit(f"layer_compare: {msg}")


def run(cmd, env, what):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail(f"{what} failed (exit {p.returncode}):\n{(p.stderr or p.stdout).strip()[-2000:]}")
    return p.stdout


def build_package(a, env):
    os.makedirs(a.work, exist_ok=True)
    package = os.path.join(a.work, "kiln.tar")
    cmd = [a.kiln, "build", a.model, "-o", package]
    if not a.shipped_logs:
        cmd.append("--no-shipped-logs")
    if a.tuning_log:
        cmd += ["--tuning-log", a.tuning_log]
    if peer_isa.kiln_target(a.isa):
        cmd += ["--target", peer_isa.kiln_target(a.isa)]
    run(cmd, env, "kiln build")
    return package


def kiln_kernels(a, package, env):
    """Kernels in execution order: name, op types, workload, elements written, mean ms."""
    with tarfile.open(package) as t:
        graph = json.load(t.extractfile("mod.json"))
    out = run([a.kiln, "run", package, "--inputs", a.inputs, "--repeat", str(a.repeat),
               "--profile"], env, "kiln run --profile")
    mean_ms = {}
    for line in out.splitlines():
        cols = line.split()  # kernel, op types, calls, total (ms), mean (ms), %, GFLOP/s
        if len(cols) == 7 and cols[2].isdigit():
            mean_ms[cols[0]] = float(cols[4])
    kernels = []
    for k in graph["kernels"]:
        shape = graph["tensors"][k["args"][-1]]["shape"]
        elements = 1
        for d in shape:
            elements *= d
        kernels.append({"name": k["name"], "op": ",".join(k["op_types"]),
                        "workload": k.get("workload", ""), "elements": elements,
                        "node": kiln_node(graph["tensors"][k["args"][-1]]["name"]),
                        "ms": mean_ms.get(k["name"], 0.0)})
    if not mean_ms:
        fail(f"no profile rows in kiln run's output for {package}")
    return kernels


def kiln_node(tensor_name):
    """'/layer1/relu/Relu/out_nchwc/480' -> '/layer1/relu/Relu': the ONNX node it comes from."""
    parts = tensor_name.split("/")
    while len(parts) > 1 and (parts[-1].isdigit() or parts[-1].startswith(("out", "data_"))):
        parts.pop()
    return "/".join(parts)


def ort_node(profiled_name):
    """'/layer1/relu/Relu_output_0_nchwc' -> '/layer1/relu/Relu' (PyTorch's exported names)."""
    return re.sub(r"_output_\d+.*$", "", profiled_name)


def ort_nodes(a, env):
    out = run(ort_run.command("profile", a.model, a.inputs, "--threads", a.threads,
                              "--repeat", a.repeat), env, "ort_run.py profile")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def fastest_rounds(rounds, key):
    """Round 0's items, each with the least "ms" any round gave the item of the same key."""
    best = {}
    for items in rounds:
        for x in items:
            k = key(x)
            best[k] = min(best.get(k, x["ms"]), x["ms"])
    return [dict(x, ms=best[key(x)]) for x in rounds[0]]


def pair_kernels(left, right):
    """Index pairs (i, j) of the longest common subsequence of two lists of (node, elements):
    items whose node the other list names too match by node, the rest by elements."""
    left_nodes, right_nodes = {x[0] for x in left}, {x[0] for x in right}

    def same(x, y):
        if x[0] in right_nodes or y[0] in left_nodes:
            return x[0] == y[0]
        return x[1] == y[1]

    n, m = len(left), len(right)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = (best[i + 1][j + 1] + 1 if same(left[i], right[j])
                          else max(best[i + 1][j], best[i][j + 1]))
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if same(left[i], right[j]) and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def short_workload(key):
    """conv2d_NCHWc.x86(data=[1,64,56,56],kernel=[...],...) -> its parameters, compact."""
    if "(" not in key:
        return key
    params = key[key.index("(") + 1:-1].replace(",dtype=float32", "")
    return params.replace("strides=", "s=").replace("dilation=", "d=").replace("kernel=", "k=")


def report(a, kernels, nodes, round_totals):
    heavy_k = [k for k in kernels if k["workload"]]
    heavy_o = [o for o in nodes if o["op"] in ORT_HEAVY]
    pairs = pair_kernels([(k["node"], k["elements"]) for k in heavy_k],
                         [(ort_node(o["name"]), o["output_elements"]) for o in heavy_o])
    rows = [(heavy_k[i], heavy_o[j]) for i, j in pairs]
    if a.sort == "loss":
        rows.sort(key=lambda r: r[1]["ms"] - r[0]["ms"])
    lines = [f"kiln vs ONNX Runtime per layer: {os.path.basename(a.model)}, {a.threads} threads, "
             f"{a.isa} ISA, {a.repeat} profiled runs a round, each kernel's fastest of "
             f"{a.rounds} rounds", "",
             "| kiln kernel | template | workload | kiln ms | ORT node | ORT op | ORT ms | kiln/ORT |",
             "|---|---|---|---:|---|---|---:|---:|"]
    for k, o in rows:
        ratio = f"{k['ms'] / o['ms']:.2f}" if o["ms"] > 0 else "n/a"
        lines.append(f"| {k['name']} | {k['op'].split(',')[0]} | {short_workload(k['workload'])} | "
                     f"{k['ms']:.3f} | {o['name']} | {o['op']} | {o['ms']:.3f} | {ratio} |")
    paired_k = {id(k) for k, _ in rows}
    paired_o = {id(o) for _, o in rows}
    lines.append("")
    for k in heavy_k:
        if id(k) not in paired_k:
            lines.append(f"unpaired kiln kernel: {k['name']} {k['op']} {k['ms']:.3f} ms")
    for o in heavy_o:
        if id(o) not in paired_o:
            lines.append(f"unpaired ORT node: {o['name']} {o['op']} {o['ms']:.3f} ms")

    def total(items, keep):
        return sum(x["ms"] for x in items if keep(x))

    k_pair, o_pair = total(heavy_k, lambda x: id(x) in paired_k), total(heavy_o, lambda x: id(x) in paired_o)
    k_heavy, o_heavy = total(heavy_k, lambda x: True), total(heavy_o, lambda x: True)
    k_all, o_all = total(kernels, lambda x: True), total(nodes, lambda x: True)
    lines += ["", "| ms per run | kiln | ORT | kiln/ORT |", "|---|---:|---:|---:|"]
    for label, kv, ov in (("paired heavy kernels", k_pair, o_pair),
                          ("other heavy kernels", k_heavy - k_pair, o_heavy - o_pair),
                          ("everything else", k_all - k_heavy, o_all - o_heavy),
                          ("all kernels", k_all, o_all)):
        ratio = f"{kv / ov:.2f}" if ov > 0 else "n/a"
        lines.append(f"| {label} | {kv:.3f} | {ov:.3f} | {ratio} |")
    lines.append(f"\n{len(rows)} pairs of {len(heavy_k)} kiln and {len(heavy_o)} ORT heavy kernels")
    for engine, totals in round_totals:
        lines.append(f"{engine} all kernels, ms per round: " + ", ".join(f"{t:.3f}" for t in totals))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--kiln", default=os.path.join(HERE, "..", "..", "build", "kiln"))
    p.add_argument("--package", help="a kiln package of --model (default: build one)")
    p.add_argument("--tuning-log")
    p.add_argument("--shipped-logs", action="store_true")
    p.add_argument("--isa", choices=["native", "avx2"], default="native")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3,
                   help="profiles of each engine, in turn; each kernel's fastest counts")
    p.add_argument("--work", default="/tmp/layer_compare")
    p.add_argument("--sort", choices=["order", "loss"], default="order",
                   help="rows in execution order, or where kiln loses most time first")
    p.add_argument("--out")
    a = p.parse_args()
    for f in (a.model, a.inputs):
        if not os.path.exists(f):
            fail(f"{f}: no such file")
    if a.repeat < 1 or a.rounds < 1:
        fail("--repeat and --rounds must be at least 1")
    if ort_run.missing():
        fail(f"ONNX Runtime is needed: {ort_run.missing()}")
    env = dict(os.environ, KILN_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    package = a.package or build_package(a, env)
    ort_env = peer_isa.peer_env(a.isa, env, os.path.join(a.work, "peers"), kiln=a.kiln)
    kiln_rounds, ort_rounds = [], []
    for _ in range(a.rounds):
        kiln_rounds.append(kiln_kernels(a, package, env))
        ort_rounds.append(ort_nodes(a, ort_env))
    # ORT's profile names a node once a run; kiln's kernels are mod.json's, one each.
    kernels = fastest_rounds(kiln_rounds, lambda k: k["name"])
    nodes = fastest_rounds(ort_rounds, lambda o: o["name"])
    round_totals = [("kiln", [sum(k["ms"] for k in r) for r in kiln_rounds]),
                    ("ORT", [sum(o["ms"] for o in r) for r in ort_rounds])]
    text = report(a, kernels, nodes, round_totals)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
