#include "graph/passes/trim_conv_taps.h"

#include <algorithm>
#include <string>
#include <vector>

#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

// The live taps of one spatial dim: [first, last], and the pads that keep the
// output's size once the others are dropped.
struct TapRange {
  int64_t first = 0, last = -1, pad_begin = 0, pad_end = 0;
  bool empty() const { return last < first; }
};

bool tap_reads_input(const op_util::Window& w, size_t d, int64_t k) {
  for (int64_t o = 0; o < w.out[d]; ++o) {
    int64_t at = w.start(d, o) + k * w.dilation[d];
    if (at >= 0 && at < w.in[d]) return true;
  }
  return false;
}

TapRange live_taps(const op_util::Window& w, size_t d) {
  TapRange r;
  r.first = w.kernel[d];
  for (int64_t k = 0; k < w.kernel[d]; ++k)
    if (tap_reads_input(w, d, k)) {
      r.first = std::min(r.first, k);
      r.last = k;
    }
  if (r.empty()) return r;
  // Dropping tap k from the front moves the window's start by one dilation:
  // keep the taps whose removal would need a negative pad (a crop).
  while (r.first > 0 && w.pad_begin[d] - r.first * w.dilation[d] < 0) --r.first;
  int64_t tail = w.kernel[d] - 1 - r.last;
  while (tail > 0 && w.pad_end[d] - tail * w.dilation[d] < 0) --tail;
  r.last = w.kernel[d] - 1 - tail;
  r.pad_begin = w.pad_begin[d] - r.first * w.dilation[d];
  r.pad_end = w.pad_end[d] - tail * w.dilation[d];
  return r;
}

// weight[:, :, ranges...]: the kept taps of an [M, C/group, k...] weight.
Initializer slice_taps(const Initializer& weight, const std::vector<TapRange>& ranges) {
  const std::vector<int64_t>& shape = weight.type.shape;
  const size_t rank = ranges.size();
  std::vector<int64_t> kept = {shape[0], shape[1]};
  for (const TapRange& r : ranges) kept.push_back(r.last - r.first + 1);
  const std::vector<float> in = weight.as<float>();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(num_elements(kept)));
  const int64_t window = num_elements({shape.begin() + 2, shape.end()});
  std::vector<int64_t> tap(rank);
  for (int64_t filter = 0; filter < shape[0] * shape[1]; ++filter) {
    // Every kept tap in row-major order; `tap` counts within the kept ranges.
    std::fill(tap.begin(), tap.end(), 0);
    for (bool more = true; more;) {
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) offset = offset * shape[2 + d] + ranges[d].first + tap[d];
      out.push_back(in[static_cast<size_t>(filter * window + offset)]);
      more = false;
      for (size_t d = rank; d-- > 0;) {
        if (++tap[d] < kept[2 + d]) {
          more = true;
          break;
        }
        tap[d] = 0;
      }
    }
  }
  return float_tensor(kept, out);
}

// Trims one Conv when some dim has dead taps; returns whether it did.
bool trim(Graph& g, Node& conv) {
  if (conv.op_type != "Conv" || conv.inputs.size() < 2) return false;
  const TensorType* x = g.type_of(conv.inputs[0]);
  const Initializer* weight = constant_of(g, conv.inputs[1]);
  if (!x || !weight || x->dtype != "float32" || weight->type.dtype != "float32") return false;
  const std::vector<int64_t>& ws = weight->type.shape;
  if (x->shape.size() < 3 || ws.size() != x->shape.size()) return false;
  const std::vector<int64_t> spatial(x->shape.begin() + 2, x->shape.end());
  const op_util::Window w =
      op_util::conv_window(conv, spatial, std::vector<int64_t>(ws.begin() + 2, ws.end()));
  std::vector<TapRange> ranges;
  bool trims = false;
  for (size_t d = 0; d < w.rank(); ++d) {
    ranges.push_back(live_taps(w, d));
    if (ranges.back().empty()) return false;  // no live tap: the output is the bias
    trims = trims || ranges.back().first > 0 || ranges.back().last < w.kernel[d] - 1;
  }
  if (!trims) return false;
  const std::string name = unique_value_name(g, conv.inputs[1] + "/live_taps");
  set_initializer(g, name, slice_taps(*weight, ranges));
  conv.inputs[1] = name;
  std::vector<int64_t> kernel, pads(2 * w.rank());
  for (size_t d = 0; d < w.rank(); ++d) {
    kernel.push_back(ranges[d].last - ranges[d].first + 1);
    pads[d] = ranges[d].pad_begin;
    pads[w.rank() + d] = ranges[d].pad_end;
  }
  conv.attrs["kernel_shape"] = kernel;
  conv.attrs["pads"] = pads;
  conv.attrs.erase("auto_pad");  // the pads above are explicit
  return true;
}

}  // namespace

int trim_conv_taps(Graph& g) {
  int count = 0;
  for (Node& n : g.nodes) count += trim(g, n);
  return count;
}

}  // namespace kiln::graph::passes
