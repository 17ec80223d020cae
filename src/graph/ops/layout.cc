// kiln.LayoutTransform: moves a 4-D activation between NCHW and the blocked
// NCHW[b]c layouts of the conv templates (NeoCPU). Inserted by the layout
// pass, never by a model. Attributes: src_block, dst_block (0 = plain NCHW).
//   NCHW     [N, C, H, W]          element (n, c, h, w)
//   NCHW[b]c [N, C/b, H, W, b]     element (n, c / b, h, w, c % b)
#include <cstring>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

struct Blocks {
  int64_t src, dst;
};

Blocks blocks_of(const Node& n) {
  Blocks b{n.attr<int64_t>("src_block").value_or(0), n.attr<int64_t>("dst_block").value_or(0)};
  if (b.src < 0 || b.dst < 0 || (b.src == 0 && b.dst == 0))
    op_util::fail(n, "needs src_block or dst_block > 0");
  return b;
}

// Logical NCHW dims of a tensor in layout `block`.
std::vector<int64_t> logical_dims(const std::vector<int64_t>& s, int64_t block) {
  if (block == 0) return s;
  return {s[0], s[1] * s[4], s[2], s[3]};
}

// Offset of logical (n, c, h, w) in a tensor of NCHW dims `d` stored in layout `block`.
int64_t offset(const std::vector<int64_t>& d, int64_t block, int64_t n, int64_t c, int64_t h,
               int64_t w) {
  if (block == 0) return ((n * d[1] + c) * d[2] + h) * d[3] + w;
  return ((((n * (d[1] / block) + c / block) * d[2] + h) * d[3] + w) * block) + c % block;
}

std::vector<Initializer> evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  Blocks b = blocks_of(node);
  const Initializer& x = *in.at(0);
  std::vector<int64_t> d = logical_dims(x.type.shape, b.src);
  if (b.dst && d[1] % b.dst) op_util::fail(node, "channels not divisible by the block");
  Initializer out;
  out.type.dtype = x.type.dtype;
  out.type.shape = b.dst ? std::vector<int64_t>{d[0], d[1] / b.dst, d[2], d[3], b.dst} : d;
  size_t es = dtype_size(x.type.dtype);
  out.data.resize(x.data.size());
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w)
          std::memcpy(&out.data[offset(d, b.dst, n, c, h, w) * es],
                      &x.data[offset(d, b.src, n, c, h, w) * es], es);
  return {out};
}

std::vector<ir::Tensor> compute(const Node& node, const ComputeInputs& in,
                                const std::vector<TensorType>& out_types) {
  Blocks b = blocks_of(node);
  ir::Tensor x = in.tensors.at(0);
  std::vector<ir::Expr> shape;
  for (int64_t s : out_types.at(0).shape) shape.push_back(ir::Expr(s));
  auto read_logical = [&](ir::Expr n, ir::Expr c, ir::Expr h, ir::Expr w) {
    if (b.src == 0) return ir::at(x, n, c, h, w);
    return ir::at(x, n, ir::floordiv(c, ir::Expr(b.src)), h, w, ir::floormod(c, ir::Expr(b.src)));
  };
  ir::Tensor out = ir::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        if (b.dst == 0) return read_logical(i[0], i[1], i[2], i[3]);
        return read_logical(i[0], i[1] * ir::Expr(b.dst) + i[4], i[2], i[3]);
      },
      "layout_transform");
  return {out};
}

}  // namespace

void register_layout_ops() {
  register_op({"kiln.LayoutTransform", OpPattern::kInjective, evaluate, compute, {}});
}

}  // namespace kiln::graph
