// Winograd's minimal filtering F(m x m, 3 x 3) (Lavin & Gray 2015): the
// transform matrices and the expression helpers that the float and the
// integer Winograd templates (winograd_conv2d.h, winograd_conv2d_int8.h)
// build their transforms from.
#pragma once

#include <functional>
#include <vector>

#include "ir/expr.h"
#include "ops/op_template.h"

namespace kiln::ops::winograd {

// Y = A^T [(G g G^T) .* (B^T d B)] A computes the m x m correlation outputs of
// an alpha x alpha input tile d (alpha = m + 2), with interpolation points
// 0, +-1, +-2 (m = 4) and 0, +-1 (m = 2).
struct Transforms {
  int m, alpha;
  std::vector<std::vector<double>> BT;  // alpha x alpha
  std::vector<std::vector<double>> G;   // alpha x 3
  std::vector<std::vector<double>> AT;  // m x alpha
};

// The names of the float template's first passes of its two-pass transforms:
// rows = d B before V = B^T rows, and cols = M A before Y = A^T cols.
inline constexpr const char* kRowPassName = "winograd_V_rows";
inline constexpr const char* kColumnPassName = "winograd_Y_cols";

// m = 2 or 4; throws std::invalid_argument otherwise.
const Transforms& transforms(int64_t m);

// F(2x2, 3x3) in integers: G2 = 2 G has the entries 0, +-1, 2, so that
// U' = G2 g G2^T = 4 U is exact for integer weights g, and A^T (U' .* V) A is
// 4 times the integer convolution (B^T and A^T are 0 / +-1 already).
const std::vector<std::vector<int>>& integer_g2();

// sum_k row[k] * x(k) over the row's non-zero coefficients, with +-1 as a
// plain add or subtract and other constants in the terms' type: the
// transforms' constants become a few adds and multiplies once the tile
// indices are constants.
ir::Expr linear_combination(const std::vector<double>& row, const std::function<ir::Expr(int)>& x);

// rows[index](...) for a symbolic row index: a chain of selects on the index
// that simplification folds away once the index is an unrolled constant.
ir::Expr select_row(const ir::Expr& index, size_t rows,
                    const std::function<ir::Expr(int)>& row_expr);

// The schedule both Winograd templates share, for their stages pad -> V -> M ->
// Y (winograd_conv2d.h): each stage at root with its outer loops parallel; pad
// rows and V's tiles vectorized over the channel block, V's alpha x alpha tile
// unrolled, or in two passes where V reads a row pass named kRowPassName (per
// tile, into a local buffer); M a register tile of p_tile rows x oc_bn
// accumulated over the input channels (the inner channel loop unrolled with
// unroll_ci); Y inlined into `output` (the anchor or an injective epilogue of
// its shape, whose other stages are inlined), walked in m x m output tiles,
// unrolled, or column by column from a column pass named kColumnPassName (per
// tile, into a local buffer); oc_bn vectorized. With dilation (dh, dw), the
// output rows are walked per phase: oh = (tile * m + r) * dh + phase, r
// unrolled. `name` is the template's, for errors.
void schedule_stages(schedule::Schedule& sch, const TemplateInstance& inst,
                     const ir::Tensor& output, const std::string& name, int64_t m, int64_t p_tile,
                     bool unroll_ci, int64_t dh = 1, int64_t dw = 1);

}  // namespace kiln::ops::winograd
