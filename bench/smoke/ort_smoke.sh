#!/usr/bin/env bash
# Smoke test (ctest bench_models_ort_smoke) of the ONNX Runtime driver on the
# tiny model: bench/peers/ort_run.py (the peers' venv, bench/.venv) runs it and
# checks its output against PyTorch's, then run_bench.py times it through
# ort_run.py, and layer_compare.py pairs kiln's kernels with ORT's profiled
# nodes. Skipped without that venv's onnxruntime (scripts/peers-venv.sh) or
# PyTorch (to make the model).
#
#   ort_smoke.sh WORKDIR KILN
set -euo pipefail
source "$(dirname "$0")/common.sh"
work=${1:?usage: ort_smoke.sh WORKDIR KILN}
kiln=${2:?usage: ort_smoke.sh WORKDIR KILN}
models=$ROOT/bench/models
need_onnxruntime
need_python_modules torch torchvision onnx numpy

rm -rf "$work"
mkdir -p "$work"
dir=$work/models/tiny
set -x
"$PYTHON" "$models/generate.py" --out "$work/models" --models tiny
"$PEERS_PYTHON" "$ORT_RUN" bench "$dir/model.onnx" "$dir/input.npz" \
  --expected "$dir/expected.npz" --warmup 1 --repeat 3 | tee "$work/ort.txt"
grep -q 'median' "$work/ort.txt" || fail "ort_run.py bench printed no median"
grep -q 'output_0 .*: rel err .* ok$' "$work/ort.txt" || fail "ort_run.py bench checked no output"
# One run into an npz, compared with PyTorch's outputs as kiln's are (compare.py).
"$PEERS_PYTHON" "$ORT_RUN" run "$dir/model.onnx" "$dir/input.npz" "$work/ort_out.npz"
"$PYTHON" "$models/compare.py" "$dir/expected.npz" "$work/ort_out.npz"
"$PYTHON" "$models/run_bench.py" --models tiny --models-dir "$work/models" --rounds 1 \
  --repeat 3 --warmup 1 --skip kiln,torch --out "$work/table.md"
grep -Eq '^\| tiny \| n/a \| [0-9.]+ \|' "$work/table.md" ||
  fail "run_bench.py's table has no ORT time for tiny"
# layer_compare.py: tiny's convolutions and its Gemm, paired with ORT's nodes by output size.
"$PYTHON" "$models/layer_compare.py" --kiln "$kiln" --model "$dir/model.onnx" \
  --inputs "$dir/input.npz" --repeat 3 --rounds 2 --work "$work/layers" --out "$work/layers.md"
grep -Eq '^\| fused_[^|]* \| conv2d[^|]* \|.*\| Conv \| [0-9.]+ \| [0-9.]+ \|$' "$work/layers.md" ||
  fail "layer_compare.py paired no convolution with an ORT Conv"
grep -Eq '^\| all kernels \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$work/layers.md" ||
  fail "layer_compare.py printed no totals"
grep -Eq '^ORT all kernels, ms per round: [0-9.]+, [0-9.]+$' "$work/layers.md" ||
  fail "layer_compare.py printed no per-round totals for its 2 rounds"
