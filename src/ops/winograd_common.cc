#include "ops/winograd_common.h"

#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

namespace kiln::ops::winograd {

using namespace kiln::ir;

const Transforms& transforms(int64_t m) {
  static const Transforms f2{2,
                             4,
                             {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                             {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                             {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  static const Transforms f4{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  if (m == 2) return f2;
  if (m == 4) return f4;
  throw std::invalid_argument("winograd: tile size m must be 2 or 4, not " + std::to_string(m));
}

const std::vector<std::vector<int>>& integer_g2() {
  static const std::vector<std::vector<int>> g2 = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
  return g2;
}

Expr linear_combination(const std::vector<double>& row, const std::function<Expr(int)>& x) {
  // Positive terms first, so that a row like (0, -4, -4, 1, 1) starts with an
  // add rather than a negation.
  std::vector<size_t> order;
  for (size_t k = 0; k < row.size(); ++k)
    if (row[k] > 0) order.push_back(k);
  for (size_t k = 0; k < row.size(); ++k)
    if (row[k] < 0) order.push_back(k);
  Expr acc;
  DataType t = DataType::f32();
  for (size_t k : order) {
    double c = row[k];
    Expr term = x(static_cast<int>(k));
    t = term.dtype();
    Expr scaled =
        t.is_float() ? make_float(c, t) * term : make_int(static_cast<int64_t>(c), t) * term;
    if (!acc) {
      acc = c == 1 ? term : c == -1 ? -term : scaled;
    } else if (c == 1) {
      acc = acc + term;
    } else if (c == -1) {
      acc = acc - term;
    } else {
      acc = acc + scaled;
    }
  }
  return acc ? acc : make_float(0.0);
}

Expr select_row(const Expr& index, size_t rows, const std::function<Expr(int)>& row_expr) {
  Expr e = row_expr(static_cast<int>(rows - 1));
  for (int r = static_cast<int>(rows) - 2; r >= 0; --r)
    e = select(eq(index, make_int(r)), row_expr(r), e);
  return e;
}

namespace {

// Inlines every stage that is not the template's own or the output (bias,
// activation, residual inputs of the epilogue), as detail::prepare_anchor
// does for the direct templates.
void inline_epilogue_stages(schedule::Schedule& sch, const Tensor& Y, const Tensor& output,
                            const std::string& name) {
  std::set<const TensorNode*> own;
  for (auto& t : post_order({Y})) own.insert(t.get());
  for (const schedule::Stage& s : sch.stages()) {
    if (s->is_placeholder() || s->origin == output || own.count(s->origin.get())) continue;
    if (!s->op->reduce_axis.empty())
      throw std::invalid_argument(name + ": epilogue stage '" + s->op->name +
                                  "' is a reduction; only injective epilogues can be fused");
    s->compute_inline();
  }
}

// V[eps][nu] over its row pass rows[r][nu], both [.., tile, alpha, alpha,
// channels]: per tile (in parallel), the row pass row by row into a local
// buffer, then V column by column. Each pass's own tile index is unrolled, so
// that its coefficients are constants; the other stays a loop that LLVM must
// not unroll: unrolled both ways, the passes merge back into one block with
// the whole tile live.
void schedule_two_pass_input_transform(schedule::Schedule& sch, const Tensor& V,
                                       const Tensor& rows) {
  auto sv = sch[V];
  IterVar eps = sv->axis(0), nu = sv->axis(1);
  sv->reorder({sv->axis(2), sv->axis(3), nu, eps, sv->axis(4)});
  IterVar tile = sv->fuse(sv->axis(2), sv->axis(3));
  sv->parallel(tile);
  sv->keep_rolled(nu);
  sv->unroll(eps);
  sv->vectorize(sv->axis(4));
  auto st = sch[rows];
  st->compute_at(sv, tile);
  st->keep_rolled(st->axis(2));
  st->unroll(st->axis(3));
  st->vectorize(st->axis(4));
}

}  // namespace

void schedule_stages(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                     const std::string& name, int64_t m, int64_t p_tile, bool unroll_ci, int64_t dh,
                     int64_t dw) {
  const Tensor& Y = inst.anchor;
  if (output != Y && detail::const_shape(output) != detail::const_shape(Y))
    throw std::invalid_argument(name + ": epilogue '" + output->name +
                                "' must have the shape of the anchor '" + Y->name + "'");
  Tensor cols, M = input_tensors(Y).at(0);  // the column pass of a two-pass output transform
  if (M->name == kColumnPassName) cols = std::exchange(M, input_tensors(M).at(0));
  Tensor V = input_tensors(M).at(0);
  Tensor rows, pad;  // the row pass of a two-pass input transform, the padding
  for (const Tensor& t : input_tensors(V))
    if (!t->is_placeholder) (t->name == kRowPassName ? rows : pad) = t;
  if (rows)
    for (const Tensor& t : input_tensors(rows))
      if (!t->is_placeholder) pad = t;
  inline_epilogue_stages(sch, Y, output, name);
  if (output != Y) sch[Y]->compute_inline();

  if (pad) {  // at root, rows in parallel
    auto sp = sch[pad];
    sp->parallel(sp->fuse({sp->axis(0), sp->axis(1), sp->axis(2)}));
    sp->vectorize(sp->axis(4));
  }

  // V: tiles in parallel, channels vectorized; the alpha x alpha tile in two
  // passes, else unrolled whole.
  auto sv = sch[V];
  if (rows) {
    schedule_two_pass_input_transform(sch, V, rows);
  } else {
    sv->reorder({sv->axis(2), sv->axis(3), sv->axis(0), sv->axis(1), sv->axis(4)});
    sv->parallel(sv->fuse(sv->axis(2), sv->axis(3)));
    sv->unroll(sv->axis(0));
    sv->unroll(sv->axis(1));
    sv->vectorize(sv->axis(4));
  }

  // M: a register tile of p_tile rows x oc_bn, reduced over the channels.
  Tensor MC = sch.cache_write(M, MemScope::Local);
  auto sm = sch[M];
  IterVar po = sm->split(sm->axis(3), p_tile).first;
  IterVar tiles = sm->fuse({sm->axis(0), sm->axis(1), sm->axis(2), po});
  sm->parallel(tiles);
  sm->vectorize(sm->axis(4));
  auto sc = sch[MC];
  sc->compute_at(sm, tiles);
  sc->reorder({sc->reduce_axis(0), sc->reduce_axis(1), sc->axis(3), sc->axis(4)});
  if (unroll_ci) sc->unroll(sc->reduce_axis(1));
  sc->unroll(sc->axis(3));
  sc->vectorize(sc->axis(4));

  // Y (inlined into the output): tiles of m x m outputs, unrolled; with
  // dilation the phase loops sit between the tile loops and the tile.
  auto so = sch[output];
  IterVar oh = so->axis(2), ow = so->axis(3), ph, pw;
  if (dh > 1) std::tie(oh, ph) = so->split(oh, dh);
  if (dw > 1) std::tie(ow, pw) = so->split(ow, dw);
  auto [tho, r1] = so->split(oh, m);
  auto [two, r2] = so->split(ow, m);
  std::vector<IterVar> order = {so->axis(0), so->axis(1), tho};
  if (ph) order.push_back(ph);
  order.push_back(two);
  if (pw) order.push_back(pw);
  IterVar tile = order.back();
  // Within a tile, rows then columns; with the column pass, columns then rows
  // (per output column, its m outputs from the pass's alpha values), the
  // column loop rolled as V's.
  IterVar outer = r1, inner = r2;
  if (cols) std::swap(outer, inner);
  for (const IterVar& iv : {outer, inner, so->axis(4)}) order.push_back(iv);
  so->reorder(order);
  so->parallel(so->fuse({so->axis(0), so->axis(1), tho}));
  if (cols) {
    so->keep_rolled(outer);
    auto sq = sch[cols];
    sq->compute_at(so, tile);
    sq->keep_rolled(sq->axis(2));
    sq->unroll(sq->axis(3));
    sq->vectorize(sq->axis(4));
  } else {
    so->unroll(outer);
  }
  so->unroll(inner);
  so->vectorize(so->axis(4));
}

}  // namespace kiln::ops::winograd
