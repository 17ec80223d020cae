#!/usr/bin/env bash
# kiln's main job end to end on a fresh machine: installs what it needs,
# builds kiln, generates ResNet-18 with PyTorch (random weights, fixed seed)
# as ONNX plus an input and PyTorch's output, tunes every template workload
# of it (`kiln tune`, a few minutes: KILN_DEMO_TRIALS trials per workload,
# default 16), compiles it with the tuning log and --require-tuned (no
# workload may fall back), runs it, checks kiln's output against PyTorch's,
# and runs the untuned build next to it for comparison. Re-running resumes
# the tuning (build/demo/MODEL.db) instead of starting over. Pass another
# model name (see bench/models/README.md) to try it.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-resnet18}
TRIALS=${KILN_DEMO_TRIALS:-16}
bash scripts/build.sh
OUT=build/demo
/usr/bin/python3 bench/models/generate.py --out "$OUT" --models "$MODEL"
set -x
./build/kiln tune "$OUT/$MODEL/model.onnx" --tuning-log "$OUT/$MODEL.db" --trials "$TRIALS" \
  --time-budget 900
./build/kiln build "$OUT/$MODEL/model.onnx" -o "$OUT/$MODEL.tar" --tuning-log "$OUT/$MODEL.db" \
  --require-tuned
./build/kiln run "$OUT/$MODEL.tar" --inputs "$OUT/$MODEL/input.npz" \
  --output "$OUT/$MODEL/kiln_output.npz" --repeat 20 --print-time
/usr/bin/python3 bench/models/compare.py "$OUT/$MODEL/expected.npz" \
  "$OUT/$MODEL/kiln_output.npz" --rtol 1e-4
# For comparison: the same model with every template on its fallback config.
./build/kiln build "$OUT/$MODEL/model.onnx" -o "$OUT/$MODEL.fallback.tar" --no-shipped-logs
./build/kiln run "$OUT/$MODEL.fallback.tar" --inputs "$OUT/$MODEL/input.npz" \
  --output "$OUT/$MODEL/kiln_fallback_output.npz" --repeat 20 --print-time
