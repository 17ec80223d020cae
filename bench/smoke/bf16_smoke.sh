#!/usr/bin/env bash
# Smoke test (ctest bench_bf16_smoke) of bench/models/bf16_bench.py on the tiny
# model: both builds, 3 random samples, one timing round. Checks that the
# table has a complete row and that bf16 stays close to fp32 (cosine >= 0.999);
# timings are printed, never checked. Skipped (77) without avx512bf16.
#
#   bf16_smoke.sh KILN WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
kiln=${1:?usage: bf16_smoke.sh KILN WORKDIR}
work=${2:?usage: bf16_smoke.sh KILN WORKDIR}
models=$ROOT/bench/models
need_python_modules torch torchvision onnx numpy
[ -x "$kiln" ] || fail "no kiln executable at $kiln"

rm -rf "$work"
mkdir -p "$work"
"$PYTHON" "$models/generate.py" --out "$work/models" --models tiny
rc=0
KILN_NUM_THREADS=2 "$PYTHON" "$models/bf16_bench.py" --kiln "$kiln" "$work/models/tiny" \
  --samples 3 --rounds 1 --repeat 2 --work "$work/run" >"$work/table.md" || rc=$?
cat "$work/table.md"
[ "$rc" = 77 ] && skip "bf16_bench.py skipped (see above)"
[ "$rc" = 0 ] || fail "bf16_bench.py exited $rc"
row=$(grep '^| tiny |' "$work/table.md") || fail "no tiny row in the table"
cosmin=$(echo "$row" | awk -F'|' '{print $6}')
"$PYTHON" -c "import sys; sys.exit(0 if float('$cosmin') >= 0.999 else 1)" ||
  fail "bf16 output cosine $cosmin < 0.999 against fp32"
