// Makes the quantized regions of a QDQ model explicit: the patterns that ONNX
// Runtime's quantizer (QDQ format) and PyTorch's exporter write around each
// convolution and matrix product become one QLinearConv / QLinearMatMul node,
// the node the int8 templates consume (docs/quantization.md).
//
// Folded (every DequantizeLinear/QuantizeLinear parameter a constant):
//
//   DQ(x_q) , DQ(w_q) [, DQ(b_i32)] -> Conv -> [Relu | Clip] -> Q
//     => QLinearConv(x_q, xs, xzp, w_q, ws, wzp, ys, yzp [, b_i32])
//   DQ(a_q) , DQ(b_q) -> MatMul [-> Add(bias)] -> [Relu | Clip] -> Q
//     => QLinearMatMul(a_q, as, azp, b_q, bs, bzp, ys, yzp [, b_i32])
//   DQ(a_q) , DQ(b_q) [, bias] -> Gemm (alpha 1, beta 1, transA 0) -> [Relu | Clip] -> Q
//     => QLinearMatMul (transB=1 weights transposed at build time) [, b_i32]
//
// where
//  - x_q / a_q is uint8 or int8 with a per-tensor scale and zero point
//    (QLinearConv's x_scale is a scalar);
//  - w_q / b_q is a uint8 or int8 constant (or QuantizeLinear of a float
//    constant, which is quantized here), per tensor or per output channel
//    (axis 0 of a Conv weight, axis 1 of a [K, N] MatMul/Gemm weight, axis 0
//    of a transB=1 [N, K] one); a MatMul's b_q may instead be an activation
//    of rank >= 2 with per-tensor parameters, like a_q (attention's Q K^T and
//    P V; no bias then);
//  - the Conv bias, when present, is DequantizeLinear of an int32 constant
//    with zero point 0 and scale x_scale * w_scale[c] (as ONNX Runtime's
//    quantizer writes it; relative difference <= 1e-6), which is
//    QLinearConv's 9th input;
//  - the MatMul / Gemm bias (Gemm's C, or the constant of an Add that alone
//    reads the MatMul's output: a Linear layer as exporters write it), of
//    shape [N] or [1, .., 1, N], is DQ(int32) as for Conv, or a float32
//    constant, quantized here to int32 at scale x_scale * w_scale[n] (round
//    half to even: the int32 bias ORT's quantizer would write; it moves the
//    requantized value by at most M[n] / 2 units, M[n] = x_scale * w_scale[n]
//    / y_scale). It becomes kiln's 9th input of QLinearMatMul (ONNX's has 8):
//    int32 [N], added to the accumulator before the requantization, exactly
//    as QLinearConv's B (graph/ops/quantize.cc evaluates it, the int8 row
//    folds it into its int32 bias);
//  - Q has a per-tensor scale and zero point, and every value between the
//    DQs and Q is read only by the pattern and is no graph output;
//  - a Relu or Clip between the op and Q folds in as Q's saturation only when
//    that is exact: Q(lower bound) is Q's qmin (ORT's Relu before a Q whose
//    zero point is the range minimum) and Q(upper bound) is its qmax.
//
//   DQ(x_q) -> MaxPool -> Q, Q's per-tensor scale and zero point equal to DQ's
//     => MaxPool(x_q) on the uint8 / int8 values (exact: DQ is increasing, so
//        max(DQ(x)) = DQ(max(x)), and Q(DQ(v)) = v; ORT's quantizer writes a
//        MaxPool's output with its input's parameters)
//
// Left as DQ -> op -> Q (correct, computed in float): a bias that does not
// fit in int32 at that scale, Add of two DQs, other pooling between DQ and Q
// (and MaxPool with other output parameters), and anything not matching the
// above. A Q followed by a DQ never cancels:
// quantization changes values.
//
// expand_quantized_ops is the other direction, the lowering that runs the
// quantized operators today on the float templates:
//
//   QLinearConv    => DQ(x), DQ(w, axis 0), DQ(B, x_scale * w_scale) -> Conv -> Q
//   QLinearMatMul  => DQ(a, axis -2), DQ(b, axis -1) -> MatMul [-> Add(DQ(B))] -> Q(axis -1)
//   ConvInteger    => DQ(x, 1, x_zp), DQ(w, 1, w_zp) -> Conv -> Cast(int32)
//   MatMulInteger  => DQ(a, 1, a_zp), DQ(b, 1, b_zp) -> MatMul -> Cast(int32)
//   DynamicQuantizeLinear => ReduceMax (of x and -x), the scale and zero point
//                            in scalar ops, Q(x, scale, zp)
//
// and then a QuantizeLinear whose every reader is a DequantizeLinear with the
// same per-tensor scale and zero point (the Q -> DQ that ORT's format leaves
// between two ops) becomes kiln.QuantizeDequantize, exactly DQ(Q(x)) but float
// to float: it runs in NCHW[x]c and inside the producing template's epilogue.
//
// The float path accumulates in float32, so a QLinear result may differ from
// the exact integer one (evaluate in graph/ops/quantize.cc) by 1 in the last
// quantized unit where the requantized value is within float rounding of a
// half; the integer ops' results are exact while |acc| < 2^24.
#pragma once

#include <functional>

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of patterns folded.
int fold_qdq(Graph& g);

// Returns the number of nodes rewritten. `keep`, when given, names the
// QLinearConv / QLinearMatMul nodes to leave as they are (those an int8
// template will run); their quantized inputs and outputs then stay uint8/int8.
int expand_quantized_ops(Graph& g, const std::function<bool(const Node&)>& keep = {});

}  // namespace kiln::graph::passes
