#!/usr/bin/env bash
# End-to-end test of one model: generate it with PyTorch (cached), kiln build, kiln run, and
# compare kiln's outputs with PyTorch's (relative error max|a-b|/max|ref| <= RTOL).
#
#   run_model.sh KILN MODEL WORKDIR [RTOL] [GENERATOR]
#
# GENERATOR is a script of bench/models that writes MODEL (default generate.py;
# coverage_models.py for the coverage set). The generated model is cached in
# WORKDIR/models/MODEL and regenerated only when the generator scripts change (their
# sha256 is stored beside the model).
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 KILN MODEL WORKDIR [RTOL] [GENERATOR]" >&2
  exit 2
fi
KILN=$1
MODEL=$2
WORK=$3
RTOL=${4:-1e-4}
GENERATOR=${5:-generate.py}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODELS=$ROOT/bench/models
PYTHON=${KILN_E2E_PYTHON:-/usr/bin/python3}  # override only to test this script

# A missing PyTorch is a failure, never a silent skip.
if ! "$PYTHON" -c "import torch, torchvision, onnx, numpy" 2>/dev/null; then
  echo "e2e $MODEL: FAIL: $PYTHON cannot import torch, torchvision, onnx and numpy;" \
    "run scripts/install-deps.sh (python3-torch python3-torchvision python3-onnx python3-numpy)" >&2
  exit 1
fi

CACHE=$WORK/models
DIR=$CACHE/$MODEL
mkdir -p "$CACHE"
STAMP=$(cat "$MODELS/$GENERATOR" "$MODELS/generate.py" "$MODELS/extra_models.py" | sha256sum | cut -d' ' -f1)
if [ -f "$DIR/model.onnx" ] && [ -f "$DIR/input.npz" ] && [ -f "$DIR/expected.npz" ] &&
  [ "$(cat "$DIR/.generator" 2>/dev/null)" = "$STAMP" ]; then
  echo "e2e $MODEL: using cached $DIR"
else
  echo "e2e $MODEL: generating into $DIR"
  "$PYTHON" "$MODELS/$GENERATOR" --out "$CACHE" --models "$MODEL"
  echo "$STAMP" >"$DIR/.generator"
fi

OUT=$WORK/$MODEL
rm -rf "$OUT"
mkdir -p "$OUT"
set -x
"$KILN" build "$DIR/model.onnx" -o "$OUT/model.tar"
"$KILN" run "$OUT/model.tar" --inputs "$DIR/input.npz" --output "$OUT/out.npz"
"$PYTHON" "$MODELS/compare.py" "$DIR/expected.npz" "$OUT/out.npz" --rtol "$RTOL"
