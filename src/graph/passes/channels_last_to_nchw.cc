#include "graph/passes/channels_last_to_nchw.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"
#include "graph/passes/pattern_rewriter.h"
#include "graph/passes/simplify.h"

namespace kiln::graph::passes {
namespace {

using Ints = std::vector<int64_t>;

const Ints kToNhwc = {0, 2, 3, 1};
const Ints kToNchw = {0, 3, 1, 2};

// Unary elementwise operators: they read one value per element, so they run
// alike in any layout. Their attributes (alpha, ...) never name an axis.
const std::set<std::string>& unary_ops() {
  static const std::set<std::string> ops = {
      "Gelu", "Relu",       "LeakyRelu", "Elu",  "Selu",     "Sigmoid", "HardSigmoid",
      "Tanh", "Erf",        "Abs",       "Neg",  "Exp",      "Log",     "Sqrt",
      "Sign", "Reciprocal", "HardSwish", "Mish", "Softplus", "Identity"};
  return ops;
}

const std::set<std::string>& binary_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div"};
  return ops;
}

bool is_f32_4d(const TensorType* t) { return t && t->dtype == "float32" && t->shape.size() == 4; }

// One region: the start Transpose, the nodes between, the end Transposes,
// and how each region node is rewritten.
struct Region {
  size_t start = 0;
  std::vector<size_t> nodes, ends;
  std::set<std::string> values;  // every value the region computes in NHWC
};

class ChannelsLastRewriter : public PatternRewriter {
 public:
  using PatternRewriter::PatternRewriter;

  int run() {
    int count = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!is_transpose(g_.nodes[i], kToNhwc)) continue;
      std::optional<Region> r = grow(i);
      if (!r) continue;
      apply(*r);
      ++count;
    }
    // The Transposes are Identity nodes now: simplify drops them, renaming
    // their readers (or, for a graph output, the value feeding them).
    if (count) simplify(g_);
    return count;
  }

 private:
  bool is_transpose(const Node& n, const Ints& perm) const {
    if (n.op_type != "Transpose" || !n.domain.empty() || n.inputs.size() != 1 ||
        n.outputs.size() != 1)
      return false;
    auto p = n.attr<Ints>("perm");
    return p && *p == perm && is_f32_4d(g_.type_of(n.inputs[0])) &&
           is_f32_4d(g_.type_of(n.outputs[0]));
  }

  // A float32 constant that broadcasts against [N, H, W, c] along the last
  // axis only (or is a scalar).
  const Initializer* channel_constant(const std::string& v, int64_t c) const {
    const Initializer* k = constant_of(g_, v);
    if (!k || k->type.dtype != "float32" || k->type.shape.size() > 4) return nullptr;
    if (num_elements(k->type.shape) == 1) return k;
    const Ints& s = k->type.shape;
    for (size_t d = 0; d + 1 < s.size(); ++d)
      if (s[d] != 1) return nullptr;
    return s.back() == c ? k : nullptr;
  }

  // A float32 constant of exactly [c] elements (LayerNormalization's Scale, B).
  const Initializer* vector_constant(const std::string& v, int64_t c) const {
    const Initializer* k = constant_of(g_, v);
    if (!k || k->type.dtype != "float32" || num_elements(k->type.shape) != c) return nullptr;
    for (size_t d = 0; d + 1 < k->type.shape.size(); ++d)
      if (k->type.shape[d] != 1) return nullptr;
    return k;
  }

  // Whether node n, reading at least one region value, can run in NCHW.
  bool understood(const Node& n, const Region& r, const Ints& pixels) const {
    if (n.outputs.size() != 1 && n.op_type != "LayerNormalization") return false;
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty() &&
          (!readers(n.outputs[k]).empty() || is_graph_output(g_, n.outputs[k])))
        return false;  // LayerNormalization's Mean / InvStdDev
    const TensorType* yt = g_.type_of(n.outputs[0]);
    if (!is_f32_4d(yt) || Ints(yt->shape.begin(), yt->shape.end() - 1) != pixels) return false;
    const int64_t c_out = yt->shape[3];
    auto in_region = [&](const std::string& v) { return r.values.count(v) > 0; };
    auto same_shape = [&](const std::string& v) {
      const TensorType* t = g_.type_of(v);
      return t && *t == *yt;
    };
    if (!n.domain.empty() && n.domain != "ai.onnx") return false;
    if (unary_ops().count(n.op_type))
      return n.inputs.size() == 1 && in_region(n.inputs[0]) && same_shape(n.inputs[0]);
    if (n.op_type == "Clip") {
      if (n.inputs.empty() || !in_region(n.inputs[0]) || !same_shape(n.inputs[0])) return false;
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (!n.inputs[k].empty() && (in_region(n.inputs[k]) || !constant_of(g_, n.inputs[k]) ||
                                     num_elements(constant_of(g_, n.inputs[k])->type.shape) != 1))
          return false;
      return true;
    }
    if (binary_ops().count(n.op_type)) {
      if (n.inputs.size() != 2) return false;
      for (const std::string& in : n.inputs) {
        if (in_region(in)) {
          if (!same_shape(in)) return false;
        } else if (!channel_constant(in, c_out)) {
          return false;
        }
      }
      return true;
    }
    if (n.op_type == "LayerNormalization") {
      int64_t axis = n.attr<int64_t>("axis").value_or(-1);
      if ((axis != -1 && axis != 3) || n.attr<int64_t>("stash_type").value_or(1) != 1) return false;
      if (n.inputs.size() < 2 || !in_region(n.inputs[0]) || !same_shape(n.inputs[0])) return false;
      if (!vector_constant(n.inputs[1], c_out)) return false;
      return n.inputs.size() < 3 || n.inputs[2].empty() || vector_constant(n.inputs[2], c_out);
    }
    if (n.op_type == "MatMul") {
      if (n.inputs.size() != 2 || !in_region(n.inputs[0])) return false;
      const Initializer* w = constant_of(g_, n.inputs[1]);
      const TensorType* xt = g_.type_of(n.inputs[0]);
      return w && w->type.dtype == "float32" && w->type.shape.size() == 2 &&
             w->type.shape[0] == xt->shape[3] && w->type.shape[1] == c_out;
    }
    return false;
  }

  // The region starting at Transpose `start`, or nothing when any node
  // reading one of its values is not understood (or a value is a graph
  // output). Nodes are in topological order, so every region value a node
  // reads is known by the time the scan reaches it.
  std::optional<Region> grow(size_t start) const {
    Region r;
    r.start = start;
    const std::string& t = g_.nodes[start].outputs[0];
    const Ints& nhwc = g_.type_of(t)->shape;
    const Ints pixels(nhwc.begin(), nhwc.end() - 1);
    r.values.insert(t);
    for (size_t k = start + 1; k < g_.nodes.size(); ++k) {
      const Node& n = g_.nodes[k];
      bool reads = false;
      for (const std::string& in : n.inputs) reads = reads || r.values.count(in);
      if (!reads) continue;
      if (is_transpose(n, kToNchw)) {
        r.ends.push_back(k);
        continue;
      }
      if (!understood(n, r, pixels)) return std::nullopt;
      r.nodes.push_back(k);
      r.values.insert(n.outputs[0]);
    }
    if (r.ends.empty()) return std::nullopt;
    for (const std::string& v : r.values)
      if (is_graph_output(g_, v)) return std::nullopt;
    return r;
  }

  // A constant's data under a new initializer of shape `shape`.
  std::string reshaped(const std::string& v, const Ints& shape, const std::string& base) {
    const Initializer* k = constant_of(g_, v);
    if (k->type.shape == shape) return v;
    std::string name = unique_value_name(g_, base);
    set_initializer(g_, name, float_tensor(shape, k->as<float>()));
    return name;
  }

  static void to_identity(Node& n) {
    n.op_type = "Identity";
    n.attrs.clear();
  }

  void apply(const Region& r) {
    to_identity(g_.nodes[r.start]);
    for (size_t e : r.ends) to_identity(g_.nodes[e]);
    for (size_t k : r.nodes) {
      Node& n = g_.nodes[k];
      const int64_t c_out = g_.type_of(n.outputs[0])->shape[3];
      if (n.op_type == "MatMul") {
        const Initializer* w = constant_of(g_, n.inputs[1]);
        const int64_t c_in = w->type.shape[0];
        std::vector<float> wv = w->as<float>(), wt(wv.size());
        for (int64_t i = 0; i < c_in; ++i)
          for (int64_t o = 0; o < c_out; ++o) wt[o * c_in + i] = wv[i * c_out + o];
        std::string name = unique_value_name(g_, n.name + "/conv_weight");
        set_initializer(g_, name, float_tensor({c_out, c_in, 1, 1}, wt));
        n.op_type = "Conv";
        n.inputs = {n.inputs[0], name};
        n.attrs = {{"kernel_shape", Ints{1, 1}},
                   {"strides", Ints{1, 1}},
                   {"pads", Ints{0, 0, 0, 0}},
                   {"dilations", Ints{1, 1}},
                   {"group", int64_t{1}}};
      } else if (n.op_type == "LayerNormalization") {
        float eps = n.attr<float>("epsilon").value_or(1e-5f);
        for (size_t i = 1; i < n.inputs.size() && i < 3; ++i)
          if (!n.inputs[i].empty())
            n.inputs[i] = reshaped(n.inputs[i], {c_out}, n.name + (i == 1 ? "/gamma" : "/beta"));
        for (size_t o = 1; o < n.outputs.size(); ++o) g_.value_info.erase(n.outputs[o]);
        n.inputs.resize(std::min<size_t>(n.inputs.size(), 3));
        n.outputs.resize(1);
        n.op_type = "kiln.ChannelNorm";
        n.domain = "kiln";
        n.attrs = {{"epsilon", eps}};
      } else {
        for (std::string& in : n.inputs) {
          if (in.empty() || r.values.count(in)) continue;
          const Initializer* k = constant_of(g_, in);
          if (num_elements(k->type.shape) > 1)
            in = reshaped(in, {c_out, 1, 1}, n.name + "/nchw_const");
        }
      }
    }
    // Every region value now holds its NHWC tensor as NCHW.
    for (const std::string& v : r.values) {
      Ints& s = g_.value_info.at(v).shape;
      s = {s[0], s[3], s[1], s[2]};
    }
  }
};

}  // namespace

int channels_last_to_nchw(Graph& g) { return ChannelsLastRewriter(g).run(); }

}  // namespace kiln::graph::passes
