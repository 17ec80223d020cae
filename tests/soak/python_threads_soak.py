#!/usr/bin/env python3
"""Soak: Python threads sharing one kiln GraphModule (issue 65).

A small model made with onnx.helper (y = Relu(x @ W + b), z = 3 * x; small
integer values, so that every result is exact in float32 whatever the
kernel's summation order) is built with kiln.build and loaded once
(Package.load()); THREADS Python threads then share that one module:

  phase 1  every thread calls run(x=...) with an input of its own for each
           call, and checks both outputs against numpy's.
  phase 2  every thread mixes, call by call, run(x=...) with the stateful
           sequence set_input (by name, by index or through input_view),
           run(), get_output (copies and copy=False views). A sequence is
           atomic only under the caller's lock (the module serializes each
           call, not a sequence of them), so the threads share a
           reader-writer lock: run(x=...) calls hold it shared (they may
           overlap: each is one serialized call), a sequence holds it
           exclusively.

Every output of every call is compared with the expected one; the soak fails
on the first wrong, torn or missing result and says which thread, call and
style gave it. The interpreter's switch interval is made tiny so that threads
change as often as possible. The test suite runs a few seconds of it
(ctest -R soak_python_threads); scripts/soak.sh runs it longer.

  PYTHONPATH=build/python python3 tests/soak/python_threads_soak.py --seconds 60
"""

import argparse
import sys
import threading
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln

BATCH, K, N = 8, 64, 32


def make_model(rng):
    w = rng.integers(-3, 4, (K, N)).astype(np.float32)
    b = rng.integers(-3, 4, (N,)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Mul", ["x", "three"], ["z"])],
        "soak", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH, N]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [BATCH, K])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array(3, np.float32), "three")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return model, w, b


class RWLock:
    """Many readers or one writer."""

    def __init__(self):
        self._cv = threading.Condition()
        self._readers = 0
        self._writer = False

    def shared(self):
        return _Held(self, False)

    def exclusive(self):
        return _Held(self, True)

    def acquire(self, write):
        with self._cv:
            if write:
                while self._writer or self._readers:
                    self._cv.wait()
                self._writer = True
            else:
                while self._writer:
                    self._cv.wait()
                self._readers += 1

    def release(self, write):
        with self._cv:
            if write:
                self._writer = False
            else:
                self._readers -= 1
            self._cv.notify_all()


class _Held:
    def __init__(self, lock, write):
        self.lock, self.write = lock, write

    def __enter__(self):
        self.lock.acquire(self.write)

    def __exit__(self, *exc):
        self.lock.release(self.write)


class Soak:
    def __init__(self, module, w, b, seed):
        self.m, self.w, self.b, self.seed = module, w, b, seed
        self.lock = RWLock()
        self.failures = []
        self.failed = threading.Event()
        self.calls = {}  # (phase, style) -> calls
        self.count_lock = threading.Lock()

    def expected(self, x):
        return np.maximum(x @ self.w + self.b, 0), 3 * x

    def check(self, where, x, got):
        want = self.expected(x)
        if len(got) != 2:
            raise AssertionError(f"{where}: {len(got)} outputs, expected 2")
        for name, g, e in zip(("y", "z"), got, want):
            if g.shape != e.shape or g.dtype != np.float32:
                raise AssertionError(f"{where}: output {name} is {g.dtype} {list(g.shape)}, "
                                     f"expected float32 {list(e.shape)}")
            if not np.array_equal(g, e):
                bad = int(np.count_nonzero(g != e))
                raise AssertionError(f"{where}: output {name} differs from numpy's in {bad} of "
                                     f"{e.size} values (another call's result?)")

    def input_for(self, rng, thread, call):
        """A fresh input; its first two values name the thread and call, so no two are equal."""
        x = rng.integers(-4, 5, (BATCH, K)).astype(np.float32)
        x[0, 0], x[0, 1] = thread, call % 1000
        return x

    def count(self, phase, style, n):
        with self.count_lock:
            self.calls[(phase, style)] = self.calls.get((phase, style), 0) + n

    def phase1(self, thread, deadline, min_calls):
        rng = np.random.default_rng([self.seed, 1, thread])
        call = 0
        while not self.failed.is_set() and (call < min_calls or time.monotonic() < deadline):
            x = self.input_for(rng, thread, call)
            self.check(f"phase 1, thread {thread}, call {call}, run(x=...)", x, self.m.run(x=x))
            call += 1
        self.count(1, "run(x=...)", call)

    def phase2(self, thread, deadline, min_calls):
        rng = np.random.default_rng([self.seed, 2, thread])
        call = 0
        styles = ("run(x=...)", "set_input(name)", "set_input(index)", "input_view")
        while not self.failed.is_set() and (call < min_calls or time.monotonic() < deadline):
            x = self.input_for(rng, thread, call)
            style = styles[int(rng.integers(len(styles)))]
            where = f"phase 2, thread {thread}, call {call}, {style}"
            if style == "run(x=...)":
                with self.lock.shared():
                    got = self.m.run(x=x)
            else:
                views = bool(rng.integers(2))
                with self.lock.exclusive():
                    if style == "set_input(name)":
                        self.m.set_input("x", x)
                    elif style == "set_input(index)":
                        self.m.set_input(0, x)
                    else:
                        np.copyto(self.m.input_view("x"), x)
                    self.m.run()
                    if rng.integers(4) == 0:
                        self.m.run()  # the same inputs again: the same outputs
                    # copy=False views are valid until the next run: compare them under the lock
                    got = [self.m.get_output(i, copy=not views) for i in range(2)]
                    if views:
                        self.check(where + " (views)", x, got)
                        got = [np.array(g) for g in got]
            self.check(where, x, got)
            self.count(2, style, 1)
            call += 1

    def run_phase(self, phase, threads, seconds, min_calls):
        deadline = time.monotonic() + seconds
        work = self.phase1 if phase == 1 else self.phase2

        def guarded(i):
            try:
                work(i, deadline, min_calls)
            except BaseException as e:  # reported by the main thread
                self.failures.append(f"{type(e).__name__}: {e}")
                self.failed.set()

        ts = [threading.Thread(target=guarded, args=(i,), name=f"soak-{phase}-{i}")
              for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="total, split over the two phases")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--min-calls", type=int, default=200, help="per thread and phase")
    ap.add_argument("--seed", type=int, default=65)
    args = ap.parse_args()

    sys.setswitchinterval(1e-6)  # change threads as often as the interpreter can
    model, w, b = make_model(np.random.default_rng(args.seed))
    module = kiln.build(model).load()
    soak = Soak(module, w, b, args.seed)
    start = time.monotonic()
    soak.run_phase(1, args.threads, args.seconds / 2, args.min_calls)
    if not soak.failed.is_set():
        soak.run_phase(2, args.threads, args.seconds / 2, args.min_calls)
    elapsed = time.monotonic() - start
    total = sum(soak.calls.values())
    detail = ", ".join(f"phase {p} {s}: {n}" for (p, s), n in sorted(soak.calls.items()))
    print(f"python threads soak: seed {args.seed}, {args.threads} threads on one module, "
          f"{total} calls checked in {elapsed:.1f} s ({detail})")
    if soak.failures:
        print(f"FAILED ({len(soak.failures)} thread(s)); first: {soak.failures[0]}",
              file=sys.stderr)
        for f in soak.failures[1:5]:
            print(f"  also: {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
