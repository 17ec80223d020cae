#!/usr/bin/python3
"""Times a generated model with PyTorch (TorchScript), the second peer kiln is compared against.

Usage: torch_bench.py MODEL_DIR [--threads 2] [--warmup 10] [--repeat 50] [--rtol 1e-4]
                       [--omp-wait-policy passive|active]

MODEL_DIR is a folder written by generate.py (its name is the model's name). The network is
rebuilt with generate.build_model (same seed, so the same weights), traced with torch.jit.trace,
frozen with torch.jit.freeze, and timed on MODEL_DIR/input.npz. The traced module's output is
checked against MODEL_DIR/expected.npz first (exit 1 over --rtol). Prints one line in kiln run's
--print-time format ("mean X ms  median Y ms  min Z ms  max W ms").

OpenMP wait policy: Debian's PyTorch runs on libgomp, whose idle threads spin. On this shared
2-core machine another process often holds the second core, and a spinning thread then waits
out its time slice at every barrier: resnet18 at 2 threads measured 268 ms median with the
default (active) policy against 102 ms with OMP_WAIT_POLICY=passive, in alternating runs at
load average ~5. So the default here is passive, PyTorch's better setting on a busy machine;
pass --omp-wait-policy active on a quiet one. (libgomp reads the variable once at load, so it
is set before torch is imported.)
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--omp-wait-policy", choices=["passive", "active"], default="passive")
    args = p.parse_args()
    # Before numpy too: numpy's BLAS (OpenBLAS, OpenMP build) loads libgomp as well.
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    import numpy as np
    from compare import relative_error
    from generate import build_model, torch  # generate explains a missing torch

    name = os.path.basename(os.path.normpath(args.model_dir))
    torch.set_num_threads(args.threads)
    model, example = build_model(name)
    with np.load(os.path.join(args.model_dir, "input.npz")) as f:
        inputs = tuple(torch.from_numpy(f[k]) for k in example)
    with np.load(os.path.join(args.model_dir, "expected.npz")) as f:
        expected = [f[f"output_{i}"] for i in range(len(f.files))]

    with torch.no_grad():
        frozen = torch.jit.freeze(torch.jit.trace(model, inputs))
        out = frozen(*inputs)
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        ok = True
        for i, (ref, got) in enumerate(zip(expected, outs)):
            err = relative_error(ref, got.numpy())
            ok = ok and err <= args.rtol
            if err > args.rtol:
                print(f"output_{i}: traced model differs from expected.npz: rel err {err:.3e}")
        for _ in range(args.warmup):
            frozen(*inputs)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            frozen(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)

    print(f"{name} torch {torch.__version__}: mean {statistics.mean(times):.3f} ms  "
          f"median {statistics.median(times):.3f} ms  min {min(times):.3f} ms  "
          f"max {max(times):.3f} ms  ({args.repeat} runs, {torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={args.omp_wait_policy})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
