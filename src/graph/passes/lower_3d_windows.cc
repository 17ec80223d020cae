#include "graph/passes/lower_3d_windows.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

using Ints = std::vector<int64_t>;

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The 3-D window of a rank-5 float32 Conv (constant or computed weight) or pool
// this pass rewrites, else nothing.
std::optional<op_util::Window> window_of(const Graph& g, const Node& n) {
  const bool conv = n.op_type == "Conv";
  const bool pool = n.op_type == "MaxPool" || n.op_type == "AveragePool" || n.op_type == "LpPool";
  if (!is_onnx(n) || (!conv && !pool) || n.inputs.empty() || n.outputs.size() != 1 ||
      n.attrs.count("kiln_block"))
    return std::nullopt;
  const TensorType* x = g.type_of(n.inputs[0]);
  if (!x || x->dtype != "float32" || x->shape.size() != 5) return std::nullopt;
  const Ints spatial(x->shape.begin() + 2, x->shape.end());
  if (!conv) return op_util::pool_window(n, spatial);
  const TensorType* w = n.inputs.size() > 1 ? g.type_of(n.inputs[1]) : nullptr;
  if (!w || w->dtype != "float32" || w->shape.size() != 5) return std::nullopt;
  return op_util::conv_window(n, spatial, Ints(w->shape.begin() + 2, w->shape.end()));
}

// Whether depth tap t of the window reads the input for some output depth.
bool tap_reads_input(const op_util::Window& w, int64_t t) {
  for (int64_t o = 0; o < w.out[0]; ++o) {
    int64_t p = w.start(0, o) + t * w.dilation[0];
    if (p >= 0 && p < w.in[0]) return true;
  }
  return false;
}

// Taps of output depth o inside [lo, hi): AveragePool's depth divisor.
int64_t taps_inside(const op_util::Window& w, int64_t o, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t t = 0; t < w.kernel[0]; ++t) {
    int64_t p = w.start(0, o) + t * w.dilation[0];
    n += p >= lo && p < hi;
  }
  return n;
}

// Appends the nodes of one rewrite, naming each value after the node.
class Emitter {
 public:
  Emitter(Graph& g, const Node& n, std::vector<Node>& out) : g_(g), n_(n), out_(out) {}

  std::string constant(const std::string& suffix, Initializer t) {
    std::string v = unique_value_name(g_, n_.name + "/" + suffix);
    set_initializer(g_, v, std::move(t));
    return v;
  }

  // A node writing one new value of `shape` (or the rewritten node's own
  // output when `last`).
  Node& node(const std::string& op, const std::string& suffix, std::vector<std::string> inputs,
             const Ints& shape, bool last = false) {
    Node k;
    k.op_type = op;
    k.name = unique_value_name(g_, n_.name + "/" + suffix);
    k.inputs = std::move(inputs);
    std::string v = last ? n_.outputs[0] : unique_value_name(g_, n_.name + "/" + suffix);
    if (!last) g_.value_info[v] = {"float32", shape};
    k.outputs = {v};
    out_.push_back(std::move(k));
    return out_.back();
  }

  std::string reshape(const std::string& v, const Ints& shape, bool last = false) {
    return node("Reshape", "reshape", {v, constant("shape", int64_tensor(shape))}, shape, last)
        .outputs[0];
  }

  std::string transpose(const std::string& v, const Ints& shape, bool last = false) {
    Node& t = node("Transpose", "transpose", {v}, shape, last);
    t.attrs["perm"] = Ints{0, 2, 1, 3, 4};
    return t.outputs[0];
  }

  // v padded along `axis` (of 5) by begin and end elements of `fill`.
  std::string pad(const std::string& v, Ints shape, int64_t axis, int64_t begin, int64_t end,
                  float fill) {
    if (begin == 0 && end == 0) return v;
    Ints pads(10, 0);
    pads[axis] = begin;
    pads[5 + axis] = end;
    shape[axis] += begin + end;
    return node("Pad", "pad_depth",
                {v, constant("pads", int64_tensor(pads)),
                 constant("fill", float_tensor({}, {fill}))},
                shape)
        .outputs[0];
  }

  // `count` positions of v along `axis` from begin, `step` apart.
  std::string slice(const std::string& v, Ints shape, int64_t axis, int64_t begin, int64_t count,
                    int64_t step) {
    const int64_t end = begin + (count - 1) * step + 1;
    if (begin == 0 && end == shape[axis] && (step == 1 || count == 1)) return v;
    shape[axis] = count;
    return node(
               "Slice", "tap",
               {v, constant("starts", int64_tensor({begin})), constant("ends", int64_tensor({end})),
                constant("axes", int64_tensor({axis})), constant("steps", int64_tensor({step}))},
               shape)
        .outputs[0];
  }

  // One depth tap of v (depth along `axis`): positions begin + o * stride
  // for o < out.
  std::string tap(const std::string& v, const Ints& shape, int64_t axis, const op_util::Window& w,
                  int64_t begin) {
    return slice(v, shape, axis, begin, w.out[0], w.stride[0]);
  }

 private:
  Graph& g_;
  const Node& n_;
  std::vector<Node>& out_;
};

// The depth taps that read the input for some output depth (a tap that
// reads only padding adds nothing: zeros to a Conv or an AveragePool's sum,
// the lowest value to a MaxPool), at least one.
Ints useful_taps(const op_util::Window& w) {
  Ints taps;
  for (int64_t t = 0; t < w.kernel[0]; ++t)
    if (tap_reads_input(w, t)) taps.push_back(t);
  if (taps.empty()) taps.push_back(0);
  return taps;
}

// The depth padding that `taps` read, and where tap t starts in the padded
// input: only what they reach is materialized (ceil_mode may run past the
// explicit end pad; an end pad no window reaches is dropped).
struct DepthPads {
  int64_t begin, end, offset;  // offset: explicit begin pad not materialized
  int64_t start(const op_util::Window& w, int64_t t) const { return t * w.dilation[0] - offset; }
};

DepthPads depth_pads(const op_util::Window& w, const Ints& taps) {
  DepthPads p;
  p.begin = std::max<int64_t>(0, w.pad_begin[0] - taps.front() * w.dilation[0]);
  p.offset = w.pad_begin[0] - p.begin;
  const int64_t reach = w.start(0, w.out[0] - 1) + taps.back() * w.dilation[0] + 1;
  p.end = std::max<int64_t>(0, reach - w.in[0]);
  return p;
}

// The H and W attributes of the 2-D op from the resolved 3-D window.
void set_2d_window(Node& k, const op_util::Window& w) {
  k.attrs["strides"] = Ints{w.stride[1], w.stride[2]};
  k.attrs["dilations"] = Ints{w.dilation[1], w.dilation[2]};
  k.attrs["pads"] = Ints{w.pad_begin[1], w.pad_begin[2], w.pad_end[1], w.pad_end[2]};
  k.attrs["kernel_shape"] = Ints{w.kernel[1], w.kernel[2]};
}

// W[:, :, t] as a 2-D weight [M, C / group, KH, KW]: a constant when W is,
// else a Slice and Reshape.
std::string weight_tap(const Graph& g, Emitter& e, const std::string& wt, int64_t t) {
  const Ints& s = g.type_of(wt)->shape;
  const Ints shape = {s[0], s[1], s[3], s[4]};
  if (const Initializer* c = constant_of(g, wt)) {
    const std::vector<float> v = c->as<float>();
    std::vector<float> cut;
    const size_t plane = static_cast<size_t>(s[3] * s[4]);
    for (int64_t oc = 0; oc < s[0] * s[1]; ++oc) {
      auto from = v.begin() + static_cast<std::ptrdiff_t>((oc * s[2] + t) * plane);
      cut.insert(cut.end(), from, from + static_cast<std::ptrdiff_t>(plane));
    }
    return e.constant("weight_tap" + std::to_string(t), float_tensor(shape, cut));
  }
  std::string sl =
      e.node("Slice", "weight_tap" + std::to_string(t),
             {wt, e.constant("starts", int64_tensor({t})),
              e.constant("ends", int64_tensor({t + 1})), e.constant("axes", int64_tensor({2}))},
             {s[0], s[1], 1, s[3], s[4]})
          .outputs[0];
  return e.reshape(sl, shape);
}

void lower_conv(Graph& g, const Node& n, const op_util::Window& w, std::vector<Node>& out) {
  Emitter e(g, n, out);
  const Ints x = g.type_of(n.inputs[0])->shape;
  const int64_t m = g.type_of(n.inputs[1])->shape[0];
  const Ints taps = useful_taps(w);
  const DepthPads pads = depth_pads(w, taps);
  // Depth beside the batch, so that a tap's slice folds into it by a Reshape.
  Ints shape = {x[0], x[2], x[1], x[3], x[4]};
  std::string v = e.pad(e.transpose(n.inputs[0], shape), shape, 1, pads.begin, pads.end, 0.f);
  shape[1] += pads.begin + pads.end;
  const Ints conv_shape = {x[0] * w.out[0], m, w.out[1], w.out[2]};
  std::string sum;
  for (int64_t t : taps) {
    std::string s = e.tap(v, shape, 1, w, pads.start(w, t));
    s = e.reshape(s, {x[0] * w.out[0], x[1], x[3], x[4]});
    Node& c = e.node("Conv", "conv_tap" + std::to_string(t), {s, weight_tap(g, e, n.inputs[1], t)},
                     conv_shape);
    // The bias once, on the first tap.
    if (sum.empty() && n.inputs.size() > 2 && !n.inputs[2].empty()) c.inputs.push_back(n.inputs[2]);
    set_2d_window(c, w);
    c.attrs["group"] = n.attr<int64_t>("group").value_or(1);
    std::string y = c.outputs[0];
    sum = sum.empty() ? y : e.node("Add", "sum_taps", {sum, y}, conv_shape).outputs[0];
  }
  sum = e.reshape(sum, {x[0], w.out[0], m, w.out[1], w.out[2]});
  e.transpose(sum, {x[0], m, w.out[0], w.out[1], w.out[2]}, /*last=*/true);
}

// AveragePool's depth divisor per output depth, shaped [Dout, 1, 1] to
// broadcast over [N, C, Dout, H, W].
Initializer depth_counts(const Node& n, const op_util::Window& w) {
  const bool include_pad = n.attr<int64_t>("count_include_pad").value_or(0) != 0;
  const int64_t lo = include_pad ? -w.pad_begin[0] : 0;
  const int64_t hi = include_pad ? w.in[0] + w.pad_end[0] : w.in[0];
  std::vector<float> c;
  for (int64_t o = 0; o < w.out[0]; ++o) c.push_back(static_cast<float>(taps_inside(w, o, lo, hi)));
  return float_tensor({w.out[0], 1, 1}, c);
}

void lower_pool(Graph& g, const Node& n, const op_util::Window& w, std::vector<Node>& out) {
  Emitter e(g, n, out);
  const bool max = n.op_type == "MaxPool";
  Ints shape = g.type_of(n.inputs[0])->shape;
  const Ints taps = useful_taps(w);
  const DepthPads pads = depth_pads(w, taps);
  const float fill = max ? -std::numeric_limits<float>::infinity() : 0.f;
  std::string v = e.pad(n.inputs[0], shape, 2, pads.begin, pads.end, fill);
  shape[2] += pads.begin + pads.end;
  const Ints reduced = {shape[0], shape[1], w.out[0], shape[3], shape[4]};
  std::string acc;
  for (int64_t t : taps) {
    std::string s = e.tap(v, shape, 2, w, pads.start(w, t));
    acc = acc.empty() ? s : e.node(max ? "Max" : "Add", "depth", {acc, s}, reduced).outputs[0];
  }
  if (!max)
    acc =
        e.node("Div", "depth_mean", {acc, e.constant("depth_counts", depth_counts(n, w))}, reduced)
            .outputs[0];
  // Pools are per channel: depth folds into the channels.
  acc = e.reshape(acc, {shape[0], shape[1] * w.out[0], shape[3], shape[4]});
  Node& p =
      e.node(n.op_type, "pool_hw", {acc}, {shape[0], shape[1] * w.out[0], w.out[1], w.out[2]});
  p.attrs = n.attrs;
  p.attrs.erase("auto_pad");  // resolved into the pads
  set_2d_window(p, w);
  // ceil_mode is in w.out: explicit pads with the node's rounding give the
  // same H and W sizes, but auto_pad's sizes are floor-mode ones.
  if (n.attr<std::string>("auto_pad").value_or("NOTSET") != "NOTSET")
    p.attrs["ceil_mode"] = int64_t{0};
  const std::string pooled = p.outputs[0];  // p dangles once the next node is appended
  e.reshape(pooled, {shape[0], shape[1], w.out[0], w.out[1], w.out[2]}, /*last=*/true);
}

// LpPool: (sum of |x|^p over the window)^(1/p). Per (h, w), t = (sum over
// the depth taps of |x|^p)^(1/p) is >= 0, so an LpPool over H and W of t
// gives the 3-D result (up to rounding). The depth pool is a 2-D LpPool on
// [N, C, D, H * W] (kernel, stride, dilation 1 and no pads along H * W) with
// the node's resolved depth window, which pads, skips padded taps and keeps
// ceil_mode's size by itself.
void lower_lp_pool(Graph& g, const Node& n, const op_util::Window& w, std::vector<Node>& out) {
  Emitter e(g, n, out);
  const Ints x = g.type_of(n.inputs[0])->shape;
  const int64_t plane = x[3] * x[4];
  // ceil_mode is in w.out; auto_pad's sizes are floor-mode ones with its pads.
  const bool auto_pad = n.attr<std::string>("auto_pad").value_or("NOTSET") != "NOTSET";
  const int64_t ceil_mode = auto_pad ? 0 : n.attr<int64_t>("ceil_mode").value_or(0);
  auto lp_pool = [&](const std::string& suffix, const std::string& v, const Ints& shape) -> Node& {
    Node& p = e.node("LpPool", suffix, {v}, shape);
    p.attrs["p"] = n.attr<int64_t>("p").value_or(2);
    if (ceil_mode) p.attrs["ceil_mode"] = ceil_mode;
    return p;
  };
  std::string v = e.reshape(n.inputs[0], {x[0], x[1], x[2], plane});
  Node& d = lp_pool("pool_depth", v, {x[0], x[1], w.out[0], plane});
  d.attrs["kernel_shape"] = Ints{w.kernel[0], 1};
  d.attrs["strides"] = Ints{w.stride[0], 1};
  d.attrs["dilations"] = Ints{w.dilation[0], 1};
  d.attrs["pads"] = Ints{w.pad_begin[0], 0, w.pad_end[0], 0};
  v = e.reshape(d.outputs[0], {x[0], x[1] * w.out[0], x[3], x[4]});
  Node& p = lp_pool("pool_hw", v, {x[0], x[1] * w.out[0], w.out[1], w.out[2]});
  set_2d_window(p, w);
  const std::string pooled = p.outputs[0];  // p dangles once the next node is appended
  e.reshape(pooled, {x[0], x[1], w.out[0], w.out[1], w.out[2]}, /*last=*/true);
}

// ---- ConvTranspose ------------------------------------------------------------------

// The 3-D geometry of a rank-5 float32 ConvTranspose, else nothing.
std::optional<op_util::TransposeWindow> transpose_window_of(const Graph& g, const Node& n) {
  if (!is_onnx(n) || n.op_type != "ConvTranspose" || n.inputs.size() < 2 || n.outputs.size() != 1)
    return std::nullopt;
  const TensorType* x = g.type_of(n.inputs[0]);
  const TensorType* w = g.type_of(n.inputs[1]);
  if (!x || !w || x->dtype != "float32" || w->dtype != "float32" || x->shape.size() != 5 ||
      w->shape.size() != 5)
    return std::nullopt;
  return op_util::conv_transpose_window(n, Ints(x->shape.begin() + 2, x->shape.end()),
                                        Ints(w->shape.begin() + 2, w->shape.end()));
}

// Along depth, output od takes input id through tap k where od + pad =
// id * stride + k * dilation. On the input with stride - 1 zeros after
// each depth (upsampled) and `lead` zeros before it, tap k of od is
// position od + pad - k * dilation + lead: a stride-1 tap of a plain
// convolution, as in lower_conv.
struct TransposeDepth {
  Ints taps;         // taps that meet an input depth for some output depth
  int64_t lead = 0;  // zeros before the upsampled input
  int64_t tail = 0;  // zeros after it
  int64_t start(const op_util::TransposeWindow& w, int64_t k) const {
    return w.pad_begin[0] - k * w.dilation[0] + lead;
  }
};

TransposeDepth transpose_depth(const op_util::TransposeWindow& w) {
  TransposeDepth t;
  const int64_t s = w.stride[0];
  for (int64_t k = 0; k < w.kernel[0]; ++k)
    for (int64_t o = 0; o < w.out[0]; ++o) {
      const int64_t p = o + w.pad_begin[0] - k * w.dilation[0];
      if (p >= 0 && p % s == 0 && p / s < w.in[0]) {
        t.taps.push_back(k);
        break;
      }
    }
  if (t.taps.empty()) t.taps.push_back(0);  // no input reaches the output: bias only
  t.lead = std::max<int64_t>(0, t.taps.back() * w.dilation[0] - w.pad_begin[0]);
  const int64_t reach = t.start(w, t.taps.front()) + w.out[0];
  t.tail = std::max<int64_t>(0, reach - t.lead - w.in[0] * s);
  return t;
}

// The H and W attributes of the 2-D ConvTranspose: the 3-D node's sizes as
// explicit pads, and output_padding where the output reaches past the full
// transposed convolution (output_shape can ask for that).
void set_2d_transpose_window(Node& k, const op_util::TransposeWindow& w) {
  Ints pad_end(2), out_pad(2);
  for (size_t d = 1; d < 3; ++d) {
    const int64_t full = w.stride[d] * (w.in[d] - 1) + (w.kernel[d] - 1) * w.dilation[d] + 1;
    const int64_t end = full - w.pad_begin[d] - w.out[d];
    pad_end[d - 1] = std::max<int64_t>(end, 0);
    out_pad[d - 1] = std::max<int64_t>(-end, 0);
  }
  k.attrs["strides"] = Ints{w.stride[1], w.stride[2]};
  k.attrs["dilations"] = Ints{w.dilation[1], w.dilation[2]};
  k.attrs["pads"] = Ints{w.pad_begin[1], w.pad_begin[2], pad_end[0], pad_end[1]};
  k.attrs["output_padding"] = out_pad;
  k.attrs["kernel_shape"] = Ints{w.kernel[1], w.kernel[2]};
}

// Depth beside the batch, stride - 1 zeros after each depth, and the lead
// and tail zeros the taps read.
std::string upsample_depth(Emitter& e, const std::string& x, const Ints& xs,
                           const op_util::TransposeWindow& w, const TransposeDepth& t,
                           Ints& shape) {
  const int64_t s = w.stride[0];
  shape = {xs[0], xs[2], xs[1], xs[3], xs[4]};
  std::string v = e.transpose(x, shape);
  if (s > 1) {
    Ints rows = {xs[0], xs[2], 1, xs[1], xs[3] * xs[4]};
    v = e.pad(e.reshape(v, rows), rows, 2, 0, s - 1, 0.f);
    shape[1] *= s;
    v = e.reshape(v, shape);
  }
  v = e.pad(v, shape, 1, t.lead, t.tail, 0.f);
  shape[1] += t.lead + t.tail;
  return v;
}

void lower_conv_transpose(Graph& g, const Node& n, const op_util::TransposeWindow& w,
                          std::vector<Node>& out) {
  Emitter e(g, n, out);
  const Ints xs = g.type_of(n.inputs[0])->shape;
  const int64_t group = n.attr<int64_t>("group").value_or(1);
  const int64_t m = g.type_of(n.inputs[1])->shape[1] * group;
  const TransposeDepth t = transpose_depth(w);
  Ints shape;
  std::string v = upsample_depth(e, n.inputs[0], xs, w, t, shape);
  const Ints conv_shape = {xs[0] * w.out[0], m, w.out[1], w.out[2]};
  std::string sum;
  for (int64_t k : t.taps) {
    std::string s = e.slice(v, shape, 1, t.start(w, k), w.out[0], 1);
    s = e.reshape(s, {xs[0] * w.out[0], xs[1], xs[3], xs[4]});
    Node& c = e.node("ConvTranspose", "conv_transpose_tap" + std::to_string(k),
                     {s, weight_tap(g, e, n.inputs[1], k)}, conv_shape);
    if (sum.empty() && n.inputs.size() > 2 && !n.inputs[2].empty()) c.inputs.push_back(n.inputs[2]);
    set_2d_transpose_window(c, w);
    c.attrs["group"] = group;
    std::string y = c.outputs[0];
    sum = sum.empty() ? y : e.node("Add", "sum_taps", {sum, y}, conv_shape).outputs[0];
  }
  sum = e.reshape(sum, {xs[0], w.out[0], m, w.out[1], w.out[2]});
  e.transpose(sum, {xs[0], m, w.out[0], w.out[1], w.out[2]}, /*last=*/true);
}

}  // namespace

int lower_3d_windows(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    if (std::optional<op_util::TransposeWindow> t = transpose_window_of(g, n)) {
      lower_conv_transpose(g, n, *t, out);
      return true;
    }
    std::optional<op_util::Window> w = window_of(g, n);
    if (!w) return false;
    if (n.op_type == "Conv")
      lower_conv(g, n, *w, out);
    else if (n.op_type == "LpPool")
      lower_lp_pool(g, n, *w, out);
    else
      lower_pool(g, n, *w, out);
    return true;
  });
}

}  // namespace kiln::graph::passes
