#!/usr/bin/python3
"""Compares kiln's outputs with the expected ones.

Usage: compare.py expected.npz got.npz [--rtol 1e-4]

For every array in expected.npz (output_0, output_1, ...) prints the relative error
max|expected - got| / max|expected| (integer and boolean arrays: the number of elements that
differ, which must be 0) and exits 1 when any exceeds --rtol, when an array is
missing from got.npz or has another shape, or when either holds NaN where the other does not.
Exit 2: a file cannot be read.
"""

import argparse
import sys
import zipfile

import numpy as np


def load(path):
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        print(f"compare.py: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def relative_error(ref, got):
    ref = ref.astype(np.float64)
    got = got.astype(np.float64)
    ref_nan, got_nan = np.isnan(ref), np.isnan(got)
    if not np.array_equal(ref_nan, got_nan):
        return float("inf")
    ok = ~ref_nan
    if not ok.any():
        return 0.0
    # inf - inf is nan: treat equal infinities as exact, any other difference with an inf as inf.
    with np.errstate(invalid="ignore"):
        diff = np.abs(ref[ok] - got[ok])
    diff[ref[ok] == got[ok]] = 0.0
    diff[np.isnan(diff)] = np.inf
    scale = np.max(np.abs(ref[ok]))
    max_diff = float(np.max(diff))
    if not np.isfinite(scale) or scale == 0:
        return max_diff
    return max_diff / float(scale)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("expected")
    p.add_argument("got")
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()

    expected, got = load(args.expected), load(args.got)
    if not expected:
        print(f"compare.py: {args.expected} holds no arrays", file=sys.stderr)
        return 2
    ok = True
    for key in sorted(expected):
        ref = expected[key]
        if key not in got:
            print(f"{key}: missing from {args.got} (it has: {', '.join(sorted(got)) or 'nothing'})")
            ok = False
            continue
        out = got[key]
        if ref.shape != out.shape:
            print(f"{key}: shape {list(out.shape)} != expected {list(ref.shape)}")
            ok = False
            continue
        if ref.dtype != out.dtype:
            print(f"{key}: note: dtype {out.dtype} != expected {ref.dtype}")
        if ref.dtype.kind in "biu":
            # Indices, ids, masks: a relative error would let a wrong index into a large range
            # pass, so every element must be equal.
            wrong = int(np.count_nonzero(ref != out))
            ok = ok and wrong == 0
            print(f"{key} {list(ref.shape)} {ref.dtype}: {wrong} of {ref.size} differ (exact) "
                  f"{'ok' if wrong == 0 else 'FAIL'}")
            continue
        err = relative_error(ref, out)
        passed = err <= args.rtol
        ok = ok and passed
        print(f"{key} {list(ref.shape)}: rel err {err:.3e} (rtol {args.rtol:g}) "
              f"{'ok' if passed else 'FAIL'}")
    extra = sorted(set(got) - set(expected))
    if extra:
        print(f"note: {args.got} also holds {', '.join(extra)} (not compared)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
