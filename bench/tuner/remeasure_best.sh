#!/usr/bin/env bash
# Re-measures each tuner's best config of a curves.sh run side by side, to
# tell a real difference from measurement noise (a best-of-N maximum over
# noisy measurements favours the tuner with more trials).
#
#   bench/tuner/remeasure_best.sh OUT_DIR [ROUNDS=7] [RUNS=200]
#
# For each workload of OUT_DIR (curves.sh's output), builds a one-conv
# package from each database's best record (kiln build --require-tuned) and
# runs the two packages in alternating rounds (`kiln run --profile`), taking
# the conv kernel's mean time per round. Prints the median over rounds of
# each and xgb's speed relative to random's (>= 1: xgb's best is as fast).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: remeasure_best.sh OUT_DIR [ROUNDS] [RUNS]}"
rounds="${2:-7}"
runs="${3:-200}"
kiln="${KILN:-$root/build/kiln}"
python="${PYTHON:-/usr/bin/python3}"
work="$out/remeasure"
mkdir -p "$work"

conv_ms() {  # the template kernel's mean ms in `kiln run --profile` output
  "$kiln" run "$1" --inputs "$2" --repeat "$runs" --profile |
    awk '$2 ~ /^conv2d/ { print $5; exit }'
}

echo "| workload | random best ms (median of $rounds) | xgb best ms | xgb speed / random's |"
echo "|---|---:|---:|---:|"
for model in "$out"/models/*.onnx; do
  name="$(basename "$model" .onnx)"
  inputs="$work/$name.npz"
  "$python" - "$model" "$inputs" <<'PY'
import sys, numpy as np, onnx
m = onnx.load(sys.argv[1])
i = m.graph.input[0]
shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
np.savez(sys.argv[2], **{i.name: np.random.default_rng(0).random(shape, dtype=np.float32)})
PY
  for tuner in random xgb; do
    "$kiln" build "$model" --tuning-log "$out/$name.$tuner.db" --require-tuned --no-shipped-logs \
      -o "$work/$name.$tuner.tar" > /dev/null
  done
  r=() x=()
  for ((i = 0; i < rounds; ++i)); do
    r+=("$(conv_ms "$work/$name.random.tar" "$inputs")")
    x+=("$(conv_ms "$work/$name.xgb.tar" "$inputs")")
  done
  "$python" - "$name" "${r[*]}" "${x[*]}" <<'PY'
import sys, statistics
name, r, x = sys.argv[1], [float(v) for v in sys.argv[2].split()], [float(v) for v in sys.argv[3].split()]
mr, mx = statistics.median(r), statistics.median(x)
print(f"| {name} | {mr:.4f} | {mx:.4f} | {mr / mx:.3f} |")
PY
done
