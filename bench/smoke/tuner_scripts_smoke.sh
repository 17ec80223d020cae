#!/usr/bin/env bash
# Smoke test (ctest bench_tuner_scripts_smoke) of bench/tuner's scripts on
# three tiny convolutions: curves.sh tunes each with 2 random and 2 xgb trials
# (real `kiln tune` measurements) and runs plot_curves.py, then
# remeasure_best.sh builds and runs each database's best. Checks that every
# step produced its output, never how fast anything was.
#
#   tuner_scripts_smoke.sh KILN WORKDIR    (kiln-measure-worker next to KILN)
set -euo pipefail
source "$(dirname "$0")/common.sh"
kiln=${1:?usage: tuner_scripts_smoke.sh KILN WORKDIR}
work=${2:?usage: tuner_scripts_smoke.sh KILN WORKDIR}
tuner=$ROOT/bench/tuner
need_python_modules torch onnx numpy matplotlib
[ -x "$kiln" ] || fail "no kiln executable at $kiln"

rm -rf "$work"
mkdir -p "$work"
export KILN=$kiln PYTHON KILN_NUM_THREADS=2
set -x
CURVES_TINY=1 bash "$tuner/curves.sh" "$work" 2 2 1
[ -s "$work/curves.png" ] || fail "curves.sh wrote no curves.png"
for name in tiny_3x3_16_8 tiny_1x1_32_7 tiny_7x7_3_32; do
  for t in random xgb; do
    grep -Eq "^\| $name \| $t \| .*\| [0-9.]+ \([0-9]+\) \|$" "$work/curves.md" ||
      fail "curves.md has no $t row for $name"
  done
done
bash "$tuner/remeasure_best.sh" "$work" 1 3 | tee "$work/remeasure.md"
rows=$(grep -Ec '^\| tiny_[^|]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$work/remeasure.md" || true)
[ "$rows" = 3 ] || fail "remeasure_best.sh printed $rows complete rows, not 3"

# latency_curve.py on the tiny 3x3 convolution: two tuning steps of a few
# seconds, the in-graph step, the xgb curve's database as the reference, every
# package timed at the end, for the host's target spelled out (--target).
"$PYTHON" - "$work/models/tiny_3x3_16_8.onnx" "$work/tiny_input.npz" <<'PY'
import sys, numpy as np, onnx
m = onnx.load(sys.argv[1])
inp = m.graph.input[0]
shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
np.savez(sys.argv[2], **{inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
PY
host_target=$("$kiln" target | sed -n 's/^target  *//p')
[ -n "$host_target" ] || fail "kiln target printed no target line"
"$PYTHON" "$tuner/latency_curve.py" --kiln "$kiln" --model "$work/models/tiny_3x3_16_8.onnx" \
  --target "$host_target" \
  --inputs "$work/tiny_input.npz" --out "$work/latency" --minutes 0.2 --step-minutes 0.1 \
  --in-graph 2 --rounds 2 --repeat 3 --tune-args "--batch 2 --repeat 1 --min-repeat-ms 0" \
  --reference-log "$work/tiny_3x3_16_8.xgb.db"
[ -s "$work/latency/curve.png" ] || fail "latency_curve.py wrote no curve.png"
grep -Eq "^\| 0\.0 \| [0-9.e-]+ \| 1\.00 \|$" "$work/latency/curve.md" || fail "curve.md has no untuned row"
grep -Fq -- "--target $host_target" "$work/latency/curve.md" || fail "curve.md does not name the target"
grep -Eq '^\| \+ in-graph \| [0-9.e-]+ \| [0-9.]+ \|$' "$work/latency/curve.md" || fail "curve.md has no in-graph row"
grep -Eq '^\| reference \(tiny_3x3_16_8.xgb.db\) \| [0-9.e-]+ \| [0-9.]+ \|$' "$work/latency/curve.md" \
  || fail "curve.md has no reference row"
[ "$(grep -c '' "$work/latency/curve.csv")" -ge 4 ] || fail "curve.csv has fewer than 3 points"
