#!/usr/bin/env bash
# Smoke test (ctest bench_models_smoke) of bench/models' drivers on the tiny
# model: generate.py writes it, compare.py accepts a match and rejects a
# mismatch, torch_bench.py times it, run_bench.py runs the whole kiln
# build / check / timing loop against PyTorch (ORT: bench_models_ort_smoke),
# ab_packages.py and ab_convs.py pair a build with itself, and cache_misses.py counts a
# conv's simulated cache misses.
# Timings are printed, never checked.
#
#   models_smoke.sh KILN WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
kiln=${1:?usage: models_smoke.sh KILN WORKDIR}
work=${2:?usage: models_smoke.sh KILN WORKDIR}
models=$ROOT/bench/models
need_python_modules torch torchvision onnx numpy
[ -x "$kiln" ] || fail "no kiln executable at $kiln"

rm -rf "$work"
mkdir -p "$work"
dir=$work/models/tiny
set -x
"$PYTHON" "$models/generate.py" --out "$work/models" --models tiny
"$PYTHON" "$models/compare.py" "$dir/expected.npz" "$dir/expected.npz"
"$PYTHON" - "$dir/expected.npz" "$work/off.npz" <<'PY'
import sys, numpy as np
with np.load(sys.argv[1]) as f:
    np.savez(sys.argv[2], **{k: f[k] * 1.01 for k in f.files})
PY
rc=0
"$PYTHON" "$models/compare.py" "$dir/expected.npz" "$work/off.npz" || rc=$?
[ "$rc" = 1 ] || fail "compare.py exited $rc on a 1 % mismatch, not 1"

"$PYTHON" "$models/torch_bench.py" "$dir" --warmup 1 --repeat 3 | tee "$work/torch.txt"
grep -q 'median [0-9.]* ms' "$work/torch.txt" || fail "torch_bench.py printed no median"

KILN_NUM_THREADS=2 "$PYTHON" "$models/run_bench.py" --kiln "$kiln" --models tiny \
  --models-dir "$work/models" --rounds 1 --repeat 3 --warmup 1 --skip ort --out "$work/table.md"
# kiln and PyTorch both timed (ORT skipped: n/a), kiln's output checked.
grep -Eq '^\| tiny \| [0-9.]+ \| n/a \| [0-9.]+ \| n/a \| [0-9.]+ \| max [0-9.e+-]+ \|$' \
  "$work/table.md" || fail "run_bench.py's table has no complete tiny row"

# ab_packages.py: a package against itself, paired rounds in random order.
"$kiln" build "$dir/model.onnx" -o "$work/tiny.tar"
KILN_NUM_THREADS=2 "$PYTHON" "$models/ab_packages.py" --kiln "$kiln" --inputs "$dir/input.npz" \
  --rounds 2 --repeat 2 "$work/tiny.tar" "$work/tiny.tar" | tee "$work/ab.txt"
grep -Eq '^B/A median [0-9.]+ \(quartiles [0-9.]+ [0-9.]+\) over 2 rounds; A [0-9.]+ ms' \
  "$work/ab.txt" || fail "ab_packages.py printed no paired ratio"
# The same package under two runtime settings: B with the thread pool's fixed blocks.
KILN_NUM_THREADS=2 "$PYTHON" "$models/ab_packages.py" --kiln "$kiln" --inputs "$dir/input.npz" \
  --rounds 2 --repeat 2 --env-b KILN_STATIC_BLOCKS=1 "$work/tiny.tar" "$work/tiny.tar" |
  tee "$work/ab_env.txt"
grep -Eq '^B/A median [0-9.]+ .* B [0-9.]+ ms \(.*tiny.tar KILN_STATIC_BLOCKS=1\)$' \
  "$work/ab_env.txt" || fail "ab_packages.py --env-b did not name B's setting"
rc=0
"$PYTHON" "$models/ab_packages.py" --kiln "$kiln" --inputs "$dir/input.npz" --rounds 1 \
  "$work/tiny.tar" "$work/missing.tar" > /dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "ab_packages.py exited 0 for a missing package"

# ab_convs.py: tiny's convolutions one by one (conv_layers.py), kiln against itself: the same
# code, then timed anyway (--force), paired rounds and the best of them.
"$PYTHON" "$models/conv_layers.py" "$dir/model.onnx" --out "$work/convs"
"$PYTHON" "$models/ab_convs.py" --kiln-a "$kiln" --kiln-b "$kiln" --convs "$work/convs" \
  | tee "$work/abc_same.txt"
grep -q ' same code$' "$work/abc_same.txt" || fail "ab_convs.py found no identical code"
grep -q '^no conv differs$' "$work/abc_same.txt" || fail "ab_convs.py timed identical code"
"$PYTHON" "$models/ab_convs.py" --kiln-a "$kiln" --kiln-b "$kiln" --convs "$work/convs" \
  --force --rounds 2 --repeat 2 | tee "$work/abc.txt"
grep -Eq 'best A +[0-9.]+ B +[0-9.]+ B/A [0-9.]+ \| median A' "$work/abc.txt" ||
  fail "ab_convs.py printed no paired conv"
grep -Eq '^geomean B/A \(best\) [0-9.]+ over [0-9]+ convs$' "$work/abc.txt" ||
  fail "ab_convs.py printed no geomean"
rc=0
"$PYTHON" "$models/ab_convs.py" --kiln-a "$kiln" --kiln-b "$kiln" --convs "$work/convs" \
  missing_conv > /dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "ab_convs.py exited 0 for a missing conv"

# cache_misses.py: one of tiny's convolutions under a simulated 512 KiB L2, the fallback and a
# variant, one call after the warm-up (valgrind: scripts/install-deps.sh).
if command -v valgrind > /dev/null; then
  conv=$(ls "$work/convs"/*.onnx | head -1)
  "$PYTHON" "$models/cache_misses.py" --kiln "$kiln" --model "$conv" --repeat 1 \
    --knobs '{"oc_group": 0}' --work "$work/cache" | tee "$work/cache.txt"
  [ "$(grep -Ec '^\| (fallback|\{"oc_group": 0\}) \| 524288 \| [1-9][0-9]* \| [0-9]+ \| [0-9]+ \| [0-9]+ \|$' \
    "$work/cache.txt")" = 2 ] || fail "cache_misses.py printed no row for each variant"
else
  echo "cache_misses.py not run: no valgrind (scripts/install-deps.sh installs it)"
fi
