// kiln.ChannelNorm: layer normalization over the channel axis of NCHW, one
// mean and variance per pixel. It is what ONNX's LayerNormalization(axis=-1)
// over the channels of an NHWC tensor becomes once the channels-last region
// around it runs in NCHW (graph/passes/channels_last_to_nchw.h: ConvNeXt's
// blocks); LayerNormalization itself cannot express it, since axis = 1 would
// normalize over C, H and W together.
//
//   inputs:  X [N, C, spatial...], Scale [C], B [C] (optional)
//   attrs:   epsilon (float, default 1e-5),
//            kiln_block (int, default 0): with b > 0, X and Y are NCHW[b]c,
//            [N, C/b, H, W, b] (propagate_layout, between blocked convs)
//   output:  Y of X's shape, Y[n, c, p] = (X[n, c, p] - mean[n, p]) *
//            inv_std[n, p] * Scale[c] + B[c], mean and variance over c.
//
// evaluate is the reference (double accumulation). compute: in NCHW[b]c the
// per-pixel sums run as partial sums across the b lanes (a vector per pixel,
// reduced over the channel blocks), then one horizontal sum of the b
// partials: whole vector loads, no gathers; in NCHW a plain strided sum over
// c (only reached when no blocked convolution is near the node).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;
using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers

struct ChannelNormShape {
  int64_t n = 0, c = 0;  // c: channels (not blocks)
  int64_t pixels = 0;    // product of the spatial dims
  int64_t block = 0;     // 0: NCHW
};

ChannelNormShape channel_norm_shape(const Node& node, const Shape& x) {
  ChannelNormShape s;
  s.block = attr_int(node, "kiln_block", 0);
  if (s.block < 0 || (s.block > 0 && (x.size() != 5 || x[4] != s.block)))
    fail(node, "kiln_block " + std::to_string(s.block) + " needs an NCHW" +
                   std::to_string(s.block) + "c input; got " + shape_str(x));
  if (!s.block && x.size() < 2)
    fail(node, "needs an input [N, C, ...] of rank >= 2; got " + shape_str(x));
  s.n = x[0];
  s.c = s.block ? x[1] * s.block : x[1];
  s.pixels = 1;
  for (size_t d = 2; d < x.size() - (s.block ? 1 : 0); ++d) s.pixels *= x[d];
  if (s.c == 0) fail(node, "normalizing over zero channels");
  return s;
}

void check_channel_param(const Node& node, const Shape& p, int64_t c, const char* what) {
  if (p.size() != 1 || p[0] != c)
    fail(node, std::string(what) + " must be [" + std::to_string(c) + "]; got " + shape_str(p));
}

// Element (n, c, p) of X in its layout.
int64_t offset_of(const ChannelNormShape& s, int64_t n, int64_t c, int64_t p) {
  if (!s.block) return (n * s.c + c) * s.pixels + p;
  int64_t blocks = s.c / s.block;
  return ((n * blocks + c / s.block) * s.pixels + p) * s.block + c % s.block;
}

std::vector<Initializer> channel_norm_evaluate(const Node& node,
                                               const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& scale = required_input(node, inputs, 1);
  const Initializer* bias = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, scale, "Scale");
  if (bias) require_f32(node, *bias, "B");
  ChannelNormShape s = channel_norm_shape(node, x.type.shape);
  check_channel_param(node, scale.type.shape, s.c, "Scale");
  if (bias) check_channel_param(node, bias->type.shape, s.c, "B");
  const double eps = attr_float(node, "epsilon", 1e-5f);
  const float* xp = data_of<float>(x);
  const float* gp = data_of<float>(scale);
  const float* bp = bias ? data_of<float>(*bias) : nullptr;
  Initializer y = make_tensor("float32", x.type.shape);
  float* yp = data_of<float>(y);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t p = 0; p < s.pixels; ++p) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < s.c; ++c) mean += xp[offset_of(s, n, c, p)];
      mean /= static_cast<double>(s.c);
      for (int64_t c = 0; c < s.c; ++c) {
        double d = xp[offset_of(s, n, c, p)] - mean;
        var += d * d;
      }
      var /= static_cast<double>(s.c);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t c = 0; c < s.c; ++c) {
        int64_t o = offset_of(s, n, c, p);
        double v = (xp[o] - mean) * inv * gp[c] + (bp ? bp[c] : 0.0);
        yp[o] = static_cast<float>(v);
      }
    }
  std::vector<Initializer> out;
  out.push_back(std::move(y));
  return out;
}

// The index of output element i's statistics: 0 at the normalized dims.
std::vector<Expr> pixel_of(const std::vector<Var>& i, bool blocked) {
  std::vector<Expr> p(i.begin(), i.end());
  p[1] = Expr(int64_t{0});
  if (blocked) p.back() = Expr(int64_t{0});
  return p;
}

std::vector<Tensor> channel_norm_compute(const Node& node, const ComputeInputs& in,
                                         const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& scale = required_tensor(node, in, 1);
  Tensor bias = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  const Shape xs = static_shape(x);
  ChannelNormShape s = channel_norm_shape(node, xs);
  check_channel_param(node, static_shape(scale), s.c, "Scale");
  if (bias) check_channel_param(node, static_shape(bias), s.c, "B");
  check_out_type(node, out_types, 0, xs, "float32");
  const float eps = attr_float(node, "epsilon", 1e-5f);
  const Expr inv_c = Expr(static_cast<float>(1.0 / static_cast<double>(s.c)));
  const bool blocked = s.block > 0;

  // The statistics have X's rank, 1 at the normalized dims (C or C/b, and
  // the lanes): the generic schedule then computes them pixel by pixel
  // inside the output's loop over pixels (ops::schedule_generic).
  Shape stat_shape = xs;
  stat_shape[1] = 1;
  if (blocked) stat_shape.back() = 1;
  // x at pixel `p` (stat indices) and channel block / channel `cb`, lane `l`.
  auto x_at = [&](const std::vector<Var>& p, const Expr& cb, const Expr* lane) {
    std::vector<Expr> idx(p.begin(), p.end());
    idx[1] = cb;
    if (lane) idx.back() = *lane;
    return ir::read(x, idx);
  };
  auto stat = [&](const Tensor& t, const std::vector<Var>& p) {
    return ir::read(t, {p.begin(), p.end()});
  };

  // A per-pixel statistic: post(the sum of f(x, pixel) over every channel),
  // computed once per pixel. It is written as a reduction over one element
  // because the generic schedule computes a reduction stage once at root,
  // where an injective stage would be inlined into its readers: 1/std would
  // cost a square root and a division per element instead of per pixel.
  using Term = std::function<Expr(const Expr& xv, const std::vector<Var>& p)>;
  using Post = std::function<Expr(const Expr& total)>;
  auto channel_stat = [&](const Term& f, const Post& post, const std::string& what) {
    IterVar one = ir::reduce_axis(1, "one");
    if (!blocked) {
      IterVar c = ir::reduce_axis(s.c, "c");
      Tensor sum = ir::compute(
          shape_exprs(stat_shape),
          [&](const std::vector<Var>& p) { return ir::sum(f(x_at(p, c->var, nullptr), p), {c}); },
          node.name + what + ".sum");
      return ir::compute(
          shape_exprs(stat_shape),
          [&](const std::vector<Var>& p) { return ir::sum(post(stat(sum, p)), {one}); },
          node.name + what);
    }
    // One partial per lane, vectorized across the lanes with the channel
    // blocks as the reduction loop; then the b partials summed as a balanced
    // tree (independent adds, not a chain of b dependent ones).
    Shape part_shape = stat_shape;
    part_shape.push_back(s.block);
    IterVar cb = ir::reduce_axis(s.c / s.block, "cb");
    Tensor part = ir::compute(
        shape_exprs(part_shape),
        [&](const std::vector<Var>& pl) {
          std::vector<Var> p(pl.begin(), pl.end() - 1);
          Expr lane = pl.back();
          return ir::sum(f(x_at(p, cb->var, &lane), p), {cb});
        },
        node.name + what + ".partials");
    return ir::compute(
        shape_exprs(stat_shape),
        [&](const std::vector<Var>& p) {
          std::function<Expr(int64_t, int64_t)> tree = [&](int64_t lo, int64_t hi) {
            if (hi - lo == 1) {
              std::vector<Expr> idx(p.begin(), p.end());
              idx.push_back(Expr(lo));
              return ir::read(part, idx);
            }
            int64_t mid = lo + (hi - lo) / 2;
            return tree(lo, mid) + tree(mid, hi);
          };
          return ir::sum(post(tree(0, s.block)), {one});
        },
        node.name + what);
  };

  Tensor mean = channel_stat([](const Expr& xv, const std::vector<Var>&) { return xv; },
                             [&](const Expr& total) { return total * inv_c; }, ".mean");
  Tensor inv = channel_stat(
      [&](const Expr& xv, const std::vector<Var>& p) {
        Expr d = xv - stat(mean, p);
        return d * d;
      },
      [&](const Expr& total) { return Expr(1.0f) / ir::sqrt(total * inv_c + Expr(eps)); },
      ".invstd");
  Tensor y = ir::compute(
      shape_exprs(xs),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        std::vector<Expr> pe = pixel_of(i, blocked);
        Expr c = blocked ? Expr(i[1]) * Expr(s.block) + Expr(i.back()) : Expr(i[1]);
        Expr m = ir::read(mean, pe), r = ir::read(inv, pe);
        Expr v = (ir::read(x, idx) - m) * r * ir::read(scale, {c});
        if (bias) v = v + ir::read(bias, {c});
        return v;
      },
      node.name + ".channelnorm");
  return {y};
}

}  // namespace

void register_channel_norm_ops() {
  register_op(
      {"kiln.ChannelNorm", OpPattern::kReduction, channel_norm_evaluate, channel_norm_compute, {}});
}

}  // namespace kiln::graph
