// MaxUnpool: MaxPool's partial inverse. Y is zeros of the output shape
// (output_shape when given, else (in - 1) * stride - pads + kernel per
// spatial dim), and Y.flat[I[j]] = X.flat[j] for every element j of X, a
// later j overwriting an earlier one (ONNX's reference).
//
// evaluate is that scatter, for any index in range. The kernel is a gather:
// output element o looks only at the elements of X whose pooling window (the
// node's kernel_shape, strides and pads) covers o, ceil(kernel / stride)
// per spatial dim, which is where MaxPool's Indices put every index. An index
// outside its own window would be lost by such a gather, so the kernel
// checks each index it reads and fails the run (an index out of range)
// instead of writing a wrong output.
//
// output_shape is a build-time constant (OpDef::constant_inputs); fed at run
// time, the node runs in the executor (runtime/host_ops/pool_ops.cc).
#include <algorithm>
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
using Inputs = std::vector<const Initializer*>;
using Outputs = std::vector<TensorType>;

struct UnpoolSpec {
  Shape in, out;  // X's shape and Y's (rank 2 + spatial)
  Shape kernel, stride, pad_begin;
  size_t spatial() const { return kernel.size(); }
  // Windows of X that may cover one output position along spatial dim d.
  int64_t candidates(size_t d) const { return (kernel[d] + stride[d] - 1) / stride[d]; }
};

UnpoolSpec unpool_spec(const Node& node, const Shape& x, const Shape& indices,
                       const Initializer* output_shape) {
  if (x.size() < 3) fail(node, "X must have rank >= 3 (N, C, spatial...); got " + shape_str(x));
  if (indices != x)
    fail(node, "I must have X's shape " + shape_str(x) + "; got " + shape_str(indices));
  const size_t r = x.size() - 2;
  UnpoolSpec s;
  s.in = x;
  auto ks = node.attr<std::vector<int64_t>>("kernel_shape");
  if (!ks) fail(node, "kernel_shape is required");
  s.kernel = *ks;
  s.stride = attr_ints(node, "strides", Shape(r, 1));
  Shape pads = attr_ints(node, "pads", Shape(2 * r, 0));
  if (s.kernel.size() != r || s.stride.size() != r || pads.size() != 2 * r)
    fail(node, "kernel_shape, strides and pads must have " + std::to_string(r) + ", " +
                   std::to_string(r) + " and " + std::to_string(2 * r) + " values");
  for (size_t d = 0; d < r; ++d)
    if (s.kernel[d] < 1 || s.stride[d] < 1 || pads[d] < 0 || pads[r + d] < 0)
      fail(node, "kernel sizes and strides must be positive, pads non-negative");
  s.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  s.out = {x[0], x[1]};
  for (size_t d = 0; d < r; ++d)
    s.out.push_back((x[d + 2] - 1) * s.stride[d] - pads[d] - pads[r + d] + s.kernel[d]);
  if (output_shape && output_shape->type.num_elements() > 0) {
    Shape want = to_ints(node, *output_shape);
    if (want.size() != x.size() || want[0] != x[0] || want[1] != x[1])
      fail(node, "output_shape " + shape_str(want) + " must have X's rank and its N and C " +
                     shape_str(x));
    s.out = want;
  }
  for (size_t d = 2; d < s.out.size(); ++d)
    if (s.out[d] < 1) fail(node, "empty output " + shape_str(s.out));
  return s;
}

std::vector<Initializer> eval_max_unpool(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& ind = required_input(node, ins, 1);
  const UnpoolSpec s = unpool_spec(node, x.type.shape, ind.type.shape, optional_input(ins, 2));
  const Shape idx = to_ints(node, ind);
  Initializer y = make_tensor(x.type.dtype, s.out);
  const int64_t total = numel(s.out);
  const size_t bytes = dtype_size(x.type.dtype);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] < 0 || idx[j] >= total)
      fail(node, "index " + std::to_string(idx[j]) + " is out of range for the output " +
                     shape_str(s.out) + " of " + std::to_string(total) + " elements");
    std::copy_n(x.data.data() + j * bytes, bytes, y.data.data() + idx[j] * bytes);
  }
  return {std::move(y)};
}

std::vector<Tensor> compute_max_unpool(const Node& node, const ComputeInputs& in,
                                       const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& ind = required_tensor(node, in, 1);
  const UnpoolSpec s = unpool_spec(node, static_shape(x), static_shape(ind), const_input(in, 2));
  const std::string dtype = out_types.empty() ? "" : out_types[0].dtype;
  check_out_type(node, out_types, 0, s.out, dtype);
  if (!(x->dtype == ir_dtype(dtype))) fail(node, "Y's inferred dtype " + dtype + " is not X's");
  const size_t r = s.spatial();
  if (const Initializer* c = const_input(in, 1)) {
    const int64_t total = numel(s.out);
    for (int64_t v : to_ints(node, *c))
      if (v < 0 || v >= total)
        fail(node, "index " + std::to_string(v) + " is out of range for the output " +
                       shape_str(s.out) + " of " + std::to_string(total) + " elements");
  }
  std::vector<IterVar> axes;
  int64_t count = 1;
  for (size_t d = 0; d < r; ++d) {
    axes.push_back(ir::reduce_axis(Expr(s.candidates(d)), "cand" + std::to_string(d)));
    count *= s.candidates(d);
  }
  const Shape out_spatial_strides = strides_of(Shape(s.out.begin() + 2, s.out.end()));
  const int64_t out_plane = numel(Shape(s.out.begin() + 2, s.out.end()));
  // Candidate a (per dim) of output position o: window i = floor((o + pad) /
  // stride) - a of X, which covers o when it exists and o lies within its kernel.
  auto window_of = [&](const std::vector<Var>& o, size_t d, const Expr& a) {
    return ir::floordiv(o[d + 2] + Expr(s.pad_begin[d]), Expr(s.stride[d])) - a;
  };
  Tensor last = ir::compute(
      shape_exprs(s.out),
      [&](const std::vector<Var>& o) {
        Expr covers = ir::make_bool(true), linear = Expr(int64_t{0});
        std::vector<Expr> at = {o[0], o[1]};
        for (size_t d = 0; d < r; ++d) {
          Expr i = window_of(o, d, axes[d]->var);
          Expr start = i * Expr(s.stride[d]) - Expr(s.pad_begin[d]);
          covers = ir::logical_and(covers,
                                   ir::logical_and(i >= Expr(int64_t{0}), i < Expr(s.in[d + 2])));
          covers = ir::logical_and(covers, o[d + 2] - start < Expr(s.kernel[d]));
          at.push_back(clamp_index(i, 0, s.in[d + 2] - 1));
          linear = linear * Expr(s.candidates(d)) + axes[d]->var;
        }
        // The index this window holds, checked to lie in the window's own
        // plane and kernel (then the gather loses nothing).
        Expr index = ir::cast(ir::DataType::i64(), ir::read(ind, at));
        Expr q = index - (Expr(o[0]) * Expr(s.out[1]) + o[1]) * Expr(out_plane);
        Expr inside = ir::logical_and(q >= Expr(int64_t{0}), q < Expr(out_plane));
        for (size_t d = 0; d < r; ++d) {
          Expr qd = ir::floormod(ir::floordiv(q, Expr(out_spatial_strides[d])), Expr(s.out[d + 2]));
          Expr start =
              clamp_index(at[d + 2], 0, s.in[d + 2] - 1) * Expr(s.stride[d]) - Expr(s.pad_begin[d]);
          inside =
              ir::logical_and(inside, ir::logical_and(qd >= start, qd < start + Expr(s.kernel[d])));
        }
        index = ir::check_index(ir::logical_or(ir::logical_not(covers), inside), index);
        std::vector<Expr> me = vars_to_exprs(o);
        Expr hit = ir::logical_and(covers, ir::eq(index, flatten_index(me, s.out)));
        // The smallest candidate is the latest window in X's order: it wins.
        return ir::reduce_min(ir::select(hit, linear, Expr(count)), axes);
      },
      "MaxUnpool.last");
  return {ir::compute(
      shape_exprs(s.out),
      [&](const std::vector<Var>& o) {
        Expr a = ir::read(last, vars_to_exprs(o));
        std::vector<Expr> at = {o[0], o[1]};
        Expr rest = ir::min(a, Expr(count - 1));
        std::vector<Expr> cand(r);
        for (size_t d = r; d-- > 0;) {
          cand[d] = ir::floormod(rest, Expr(s.candidates(d)));
          rest = ir::floordiv(rest, Expr(s.candidates(d)));
        }
        for (size_t d = 0; d < r; ++d)
          at.push_back(clamp_index(window_of(o, d, cand[d]), 0, s.in[d + 2] - 1));
        return ir::select(a < Expr(count), ir::read(x, at), ir::make_const(x->dtype, 0));
      },
      "MaxUnpool")};
}

}  // namespace

void register_unpool_ops() {
  // A reduction over each output's candidate windows: opaque, never fused.
  register_op({"MaxUnpool", OpPattern::kOpaque, eval_max_unpool, compute_max_unpool, {2}});
}

}  // namespace kiln::graph
