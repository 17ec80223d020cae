#!/usr/bin/env python3
"""Writes docs/operators.md: every operator of ONNX's default domain (the
installed onnx package's schemas) and how kiln takes it, from kiln's own
registry (kiln._kiln.supported_op_types) and ONNX's function bodies.

    PYTHONPATH=build/python /usr/bin/python3 tools/op_coverage.py            # rewrite
    PYTHONPATH=build/python /usr/bin/python3 tools/op_coverage.py --check    # fail if stale

A status per operator:
  kernel    kiln's registry defines it (reference evaluation and compiled kernel)
  host      the executor runs it after the kernels (src/runtime/host_op.h): its
            output shape depends on the data, it is control flow (with its
            subgraphs), or it works on sequences and optionals
  function  ONNX defines it as a function of other operators; kiln imports it
            as that body (src/frontend/inline_functions.h), which then compiles
  converted an operator of old opsets only, which ONNX's version converter
            rewrites before import
  refused   import stops with one error naming the node; the reason is in
            REFUSED below (shown in the table)
Every opset from 1 to the newest the onnx package knows is accepted (older
than 11 through ONNX's version converter), so the table lists the opsets in
which each operator changed.
"""

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "docs", "operators.md")

# Why an operator is still refused: a reason a user would accept, or the
# work it waits for. Operators not named here are refused "not implemented yet".
REFUSED = {
    "StringNormalizer": "string tensors are not supported",
    "TfIdfVectorizer": "string tensors are not supported",
    "RandomNormal": "random generators are not supported yet",
    "RandomNormalLike": "random generators are not supported yet",
    "RandomUniform": "random generators are not supported yet",
    "RandomUniformLike": "random generators are not supported yet",
    "Multinomial": "random generators are not supported yet",
    "Bernoulli": "random generators are not supported yet",
}
# Operators of old opsets only, which ONNX's version converter rewrites
# before kiln imports the model.
CONVERTED = {
    "Upsample": "opsets 7-9 only: ONNX's version converter rewrites it to Resize",
}
REFUSED["Bernoulli"] = "random generators are not supported yet (its body draws RandomUniformLike)"


def schemas():
    import onnx.defs
    by_name = collections.defaultdict(list)
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx") and not s.deprecated:
            by_name[s.name].append(s)
    return by_name


# How a supported operator compiles where that is not a kernel of its own
# (shown before the run-time note).
HOW = {
    "DFT": "a MatMul by a constant twiddle matrix (dense, O(n^2) a line; no FFT)",
    "STFT": "a Gather of the frames and a MatMul by a constant twiddle matrix (dense; no FFT)",
    "MelWeightMatrix": "no kernel: folded at build time (its inputs are constants)",
}

# Operators whose every output shape depends on the data: only the executor's
# host region runs them (src/runtime/host_op.h).
DATA_SIZED = {"NonZero", "Unique", "Compress", "NonMaxSuppression"}
# Control flow: the executor runs the node and its subgraphs (an If whose
# condition is known at build time is compiled as its branch instead).
CONTROL_FLOW = {"If", "Loop", "Scan", "SequenceMap"}
# Operators on sequence and optional values, which only the executor holds.
HOST_VALUES = {"Optional", "OptionalGetElement", "OptionalHasElement", "SequenceAt",
               "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
               "SequenceLength", "SplitToSequence", "ConcatFromSequence"}


def rows():
    from kiln import _kiln
    supported = set(_kiln.supported_op_types())
    host = set(_kiln.host_op_types())
    out = []
    for name, versions in sorted(schemas().items()):
        versions.sort(key=lambda s: s.since_version)
        latest = versions[-1]
        if latest.support_level == latest.SupportType.EXPERIMENTAL:
            continue
        if name in DATA_SIZED and name in host:
            status, note = "host", "runs in the executor: its output shape depends on the data"
        elif name in CONTROL_FLOW and name in host:
            status, note = "host", "runs in the executor with its subgraphs"
        elif name in HOST_VALUES and name in host:
            status, note = "host", "runs in the executor, which holds sequences and optionals"
        elif name in supported:
            notes = [HOW[name]] if name in HOW else []
            if name in host:
                notes.append("also on run-time shapes, in the executor")
            status, note = "kernel", "; ".join(notes)
        elif name in CONVERTED:
            status, note = "converted", CONVERTED[name]
        elif name in REFUSED:  # before the bodies: some use what kiln refuses
            status, note = "refused", REFUSED[name]
        elif latest.has_function or latest.has_context_dependent_function:
            status, note = "function", "runs as ONNX's function body"
        else:
            status, note = "refused", REFUSED.get(name, "not implemented yet")
        out.append((name, status, ", ".join(str(s.since_version) for s in versions), note))
    return out


def render(table):
    import onnx
    counts = collections.Counter(r[1] for r in table)
    lines = [
        "# ONNX operators in kiln",
        "",
        "Generated by `tools/op_coverage.py` from kiln's operator registry and the schemas of",
        f"onnx {onnx.__version__} (default domain; `tests/conformance` checks that it is current).",
        f"Of {len(table)} operators, {counts['kernel']} have a kiln kernel, {counts['host']} run in the",
        "executor because their output shapes depend on the data, they are control flow or they",
        "work on sequences and optionals (as do the operators marked",
        f"\"also on run-time shapes\" when their shape inputs come at run time), {counts['function']} run",
        f"as ONNX's own function body, {counts['converted']} is rewritten by ONNX's version converter",
        f"and {counts['refused']} are refused with an error naming the node. Every opset from 1 up",
        "to the newest onnx knows is accepted: models older than opset 11 are converted with",
        "ONNX's version converter first. A function body's operators must themselves be",
        "supported with the inputs given.",
        "",
        "| operator | kiln | opsets where it changed | note |",
        "|---|---|---|---|",
    ]
    for name, status, versions, note in table:
        lines.append(f"| {name} | {status} | {versions} | {note} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if docs/operators.md is stale")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    text = render(rows())
    if args.check:
        current = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
        if current != text:
            print(f"{args.out} is stale: run tools/op_coverage.py to regenerate it", file=sys.stderr)
            return 1
        print(f"{args.out} is current")
        return 0
    with open(args.out + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
