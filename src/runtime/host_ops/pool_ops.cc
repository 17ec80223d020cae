// Host MaxUnpool, for an output_shape fed at run time (the compiled one,
// graph/ops/unpool.cc, takes it as a build-time constant). The same
// semantics as the graph's reference: Y is zeros of output_shape and
// Y.flat[I[j]] = X.flat[j] for every j in order, a later j overwriting; an
// index outside the output is an error. One element copy per index.
#include <cstring>
#include <string>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

void max_unpool(HostOpContext& ctx) {
  const HostValue& x = ctx.required(0);
  const HostValue& ind = ctx.required(1);
  if (ind.shape != x.shape)
    ctx.fail("I has shape " + shape_text(ind.shape) + ", X " + shape_text(x.shape));
  if (!(ind.dtype == DType::i64())) ctx.fail("I must be int64");
  if (x.shape.size() < 3) ctx.fail("X must have rank >= 3; got " + shape_text(x.shape));
  Shape out;
  if (ctx.input(2)) {
    out = ctx.int_values(2);
    if (out.size() != x.shape.size() || out[0] != x.shape[0] || out[1] != x.shape[1])
      ctx.fail("output_shape " + shape_text(out) + " must have X's rank and its N and C " +
               shape_text(x.shape));
  } else {
    // Without output_shape: (in - 1) * stride - pads + kernel per spatial dim.
    const size_t r = x.shape.size() - 2;
    Shape kernel = ctx.attr_ints("kernel_shape");
    Shape strides = ctx.has_attr("strides") ? ctx.attr_ints("strides") : Shape(r, 1);
    Shape pads = ctx.has_attr("pads") ? ctx.attr_ints("pads") : Shape(2 * r, 0);
    if (kernel.size() != r || strides.size() != r || pads.size() != 2 * r)
      ctx.fail("kernel_shape, strides and pads do not fit X " + shape_text(x.shape));
    out = {x.shape[0], x.shape[1]};
    for (size_t d = 0; d < r; ++d)
      out.push_back((x.shape[d + 2] - 1) * strides[d] - pads[d] - pads[r + d] + kernel[d]);
  }
  int64_t total = 1;
  for (int64_t d : out) {
    if (d < 0) ctx.fail("negative output dim in " + shape_text(out));
    total *= d;
  }
  const int64_t bytes = x.dtype.bytes();
  auto* y = static_cast<uint8_t*>(ctx.allocate(0, out));
  std::memset(y, 0, static_cast<size_t>(total * bytes));
  const auto* from = static_cast<const uint8_t*>(x.data);
  const int64_t* idx = ind.as<int64_t>();
  for (int64_t j = 0; j < x.numel(); ++j) {
    if (idx[j] < 0 || idx[j] >= total)
      ctx.fail("index " + std::to_string(idx[j]) + " is out of range for the output " +
               shape_text(out) + " of " + std::to_string(total) + " elements");
    std::memcpy(y + idx[j] * bytes, from + j * bytes, static_cast<size_t>(bytes));
  }
}

}  // namespace

void register_pool_host_ops(std::map<std::string, HostOpFn>& t) { t["MaxUnpool"] = max_unpool; }

}  // namespace kiln::runtime
