#!/usr/bin/env bash
# End-to-end check of a quantized (QDQ) model against ONNX Runtime on the same file (ctest
# frontend_quant_ort_e2e): bench/models/quantized_models.py writes tiny_qdq (Conv+BN+Relu, a
# residual Add, MaxPool, depthwise Conv + ReLU6, 1x1 Conv, ReduceMean, MatMul + Relu, Gemm;
# u8 activations, per-channel s8 weights, int32 biases), the PyTorch-quantized torch_qlinear,
# tiny_qoperator (QLinearConv / QLinearMatMul as ORT's QOperator format writes them) and
# tiny_dynamic (DynamicQuantizeLinear -> MatMulInteger / ConvInteger, ORT's dynamic format),
# then bench/models/qdq_check.py runs `kiln build` + `kiln run` and ORT and requires every
# quantized output to equal ORT's exactly (0 units: the QLinearConv / QLinearMatMul nodes run on
# the int8 templates with ORT's requantization), printing the fraction of exact matches.
# ONNX Runtime is the `onnxruntime` package of the peers' venv in this source tree (bench/.venv,
# made by scripts/peers-venv.sh), run through bench/peers/ort_run.py. Skipped (77), saying what
# is missing, without that venv's onnxruntime or without PyTorch.
#
#   quant_ort_e2e.sh KILN WORKDIR
set -euo pipefail
kiln=${1:?usage: quant_ort_e2e.sh KILN WORKDIR}
work=${2:?usage: quant_ort_e2e.sh KILN WORKDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
models=$root/bench/models
peers_python=$root/bench/.venv/bin/python
if [ ! -x "$peers_python" ]; then
  echo "SKIP: no bench/.venv/bin/python (the peers' venv; scripts/peers-venv.sh or scripts/install-deps.sh creates it)"
  exit 77
fi
if ! why=$("$peers_python" "$root/bench/peers/ort_run.py" check 2>&1); then
  echo "SKIP: $why"
  exit 77
fi
echo "$why"
if ! /usr/bin/python3 -c 'import torch, onnx, numpy' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks torch, onnx or numpy (scripts/install-deps.sh)"
  exit 77
fi
# Without VNNI, ORT's x86 int8 kernels (vpmaddubsw) saturate u8 x s8 pairs at 16 bits: its
# outputs differ from the exact integer result, so they are no reference for 0 units.
if [ "$(uname -m)" = x86_64 ] && ! grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo; then
  echo "SKIP: this CPU has no avx512_vnni or avx_vnni; ORT's int8 kernels saturate without them"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$models/quantized_models.py" --out "$work" \
  --models tiny_qdq,torch_qlinear,tiny_qoperator,tiny_dynamic --calib 2
for m in tiny_qdq torch_qlinear tiny_qoperator tiny_dynamic; do
  /usr/bin/python3 "$models/qdq_check.py" --kiln "$kiln" "$work/$m" --max-units 0 --max-rel 1e-5
done
