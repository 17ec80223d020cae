#!/usr/bin/env bash
# kiln's main job end to end on a fresh machine: installs what it needs,
# builds kiln, generates ResNet-18 with PyTorch (random weights, fixed seed)
# as ONNX plus an input and PyTorch's output, compiles the model with
# `kiln build`, runs it with `kiln run`, and checks kiln's output against
# PyTorch's. Pass another model name (see bench/models/README.md) to try it.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-resnet18}
bash scripts/build.sh
OUT=build/demo
/usr/bin/python3 bench/models/generate.py --out "$OUT" --models "$MODEL"
set -x
./build/kiln build "$OUT/$MODEL/model.onnx" -o "$OUT/$MODEL.tar"
./build/kiln run "$OUT/$MODEL.tar" --inputs "$OUT/$MODEL/input.npz" \
  --output "$OUT/$MODEL/kiln_output.npz" --repeat 10 --print-time
/usr/bin/python3 bench/models/compare.py "$OUT/$MODEL/expected.npz" \
  "$OUT/$MODEL/kiln_output.npz" --rtol 1e-4
