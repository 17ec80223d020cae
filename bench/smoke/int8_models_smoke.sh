#!/usr/bin/env bash
# Smoke test (ctest bench_int8_models_smoke) of bench/models/int8_bench.py on
# the tiny model: `kiln quantize` writes its QDQ form (calibration on 4 random
# samples), then kiln int8, kiln fp32, ORT int8 and ORT fp32 are timed for one
# round. Checks that the table has a complete row; timings are printed, never
# checked. Skipped (77) without the peers' venv's onnxruntime (bench/.venv,
# scripts/peers-venv.sh) or python3-torch.
#
#   int8_models_smoke.sh KILN WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
kiln=${1:?usage: int8_models_smoke.sh KILN WORKDIR}
work=${2:?usage: int8_models_smoke.sh KILN WORKDIR}
models=$ROOT/bench/models
need_onnxruntime
need_python_modules torch torchvision onnx numpy
[ -x "$kiln" ] || fail "no kiln executable at $kiln"

rm -rf "$work"
mkdir -p "$work/tiny_int8"
"$PYTHON" "$models/generate.py" --out "$work/models" --models tiny
dir=$work/tiny_int8
cp "$work/models/tiny/model.onnx" "$dir/float.onnx"
cp "$work/models/tiny/input.npz" "$dir/input.npz"
# Calibration: 4 random samples per input, stacked ([N, *shape], kiln quantize's form).
"$PYTHON" - "$dir" <<'PY'
import sys, numpy as np
d = sys.argv[1]
x = np.load(f"{d}/input.npz")
rng = np.random.default_rng(1)
np.savez(f"{d}/calib.npz", **{k: rng.standard_normal((4,) + x[k].shape).astype(x[k].dtype)
                              for k in x.files})
PY
"$kiln" quantize "$dir/float.onnx" -o "$dir/model.onnx" --calibration "$dir/calib.npz"
rc=0
"$PYTHON" "$models/int8_bench.py" --kiln "$kiln" "$dir" --rounds 1 --repeat 2 \
  >"$work/table.md" || rc=$?
cat "$work/table.md"
[ "$rc" = 77 ] && skip "int8_bench.py skipped (see above)"
[ "$rc" = 0 ] || fail "int8_bench.py exited $rc"
row=$(grep '^| tiny_int8 |' "$work/table.md") || fail "no tiny_int8 row in the table"
# Seven cells: the model, four times (ms, two decimals), two ratios.
"$PYTHON" - "$row" <<'PY' || fail "incomplete row: $row"
import sys
cells = [c.strip() for c in sys.argv[1].strip().strip("|").split("|")]
assert len(cells) == 7, cells
assert all(float(c) >= 0 for c in cells[1:5]), cells  # 2 decimals: the tiny model may print 0.00
PY
# --target: both kiln packages built as AVX2 code (int8 on vpmaddubsw), where this CPU runs it.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  "$PYTHON" "$models/int8_bench.py" --kiln "$kiln" "$dir" --rounds 1 --repeat 2 \
    --target "llvm -mcpu=haswell" >"$work/table_avx2.md" || fail "int8_bench.py --target haswell failed"
  grep -q '^| tiny_int8 |' "$work/table_avx2.md" || fail "no tiny_int8 row with --target haswell"
  manifest=$(tar -xOf "$dir/kiln_int8.tar" mod.json)
  [[ $manifest == *'-mcpu=haswell'* ]] || fail "the int8 package was not built for haswell"
fi
