#include "graph/passes/fold_batch_norm.h"

#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

// y' = y * scale[c] + shift[c] along the anchor's channel axis.
struct Affine {
  std::vector<double> scale, shift;
};

bool all_equal(const std::vector<double>& v, double x) {
  for (double e : v)
    if (e != x) return false;
  return true;
}

// Where an anchor's output channels are, and whether it has a bias to absorb shifts.
struct Anchor {
  size_t rank = 0;
  size_t channel_axis = 0;
  int64_t channels = 0;
  bool can_shift = false;
};

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

const Initializer* float_constant(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return nullptr;
  const Initializer* c = constant_of(g, n.inputs[i]);
  return c && c->type.dtype == "float32" ? c : nullptr;
}

std::vector<double> to_double(const Initializer& t) {
  std::vector<float> f = t.as<float>();
  return std::vector<double>(f.begin(), f.end());
}

// The values of `c` as one per channel, when `c` broadcast against an output
// of rank `a.rank` varies along the channel axis only.
std::optional<std::vector<double>> per_channel(const Initializer& c, const Anchor& a) {
  const auto& s = c.type.shape;
  if (c.type.dtype != "float32" || s.size() > a.rank) return std::nullopt;
  const size_t pad = a.rank - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    const bool channel = d + pad == a.channel_axis;
    if (s[d] != 1 && !(channel && s[d] == a.channels)) return std::nullopt;
  }
  std::vector<double> v = to_double(c);
  if (static_cast<int64_t>(v.size()) == a.channels) return v;
  return std::vector<double>(a.channels, v[0]);  // one element broadcast to every channel
}

// Gemm's C as one value per output column (after beta), or nullopt when C
// varies along rows. An absent C is zeros.
std::optional<std::vector<double>> gemm_bias(const Graph& g, const Node& n, int64_t cols) {
  const float beta = n.attr<float>("beta").value_or(1.0f);
  if (n.inputs.size() < 3 || n.inputs[2].empty()) return std::vector<double>(cols, 0.0);
  const Initializer* c = float_constant(g, n, 2);
  if (!c) return std::nullopt;
  auto v = per_channel(*c, Anchor{2, 1, cols, true});
  if (!v) return std::nullopt;
  for (double& x : *v) x *= beta;
  return v;
}

std::optional<Anchor> anchor_of(const Graph& g, const Node& n) {
  if (!is_onnx(n) || n.outputs.size() != 1) return std::nullopt;
  const TensorType* out = g.type_of(n.outputs[0]);
  if (!out || out->dtype != "float32" || out->shape.empty()) return std::nullopt;
  const size_t rank = out->shape.size();
  if (n.op_type == "Conv") {
    const Initializer* w = float_constant(g, n, 1);
    if (!w || w->type.shape.size() != rank || rank < 3) return std::nullopt;
    const int64_t oc = w->type.shape[0];
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Initializer* b = float_constant(g, n, 2);
      if (!b || b->type.shape != std::vector<int64_t>{oc}) return std::nullopt;
    }
    return Anchor{rank, 1, oc, true};
  }
  if (n.op_type == "Gemm") {
    const Initializer* b = float_constant(g, n, 1);
    if (!b || b->type.shape.size() != 2 || rank != 2) return std::nullopt;
    if (!gemm_bias(g, n, out->shape[1])) return std::nullopt;
    return Anchor{2, 1, out->shape[1], true};
  }
  if (n.op_type == "MatMul") {
    const Initializer* b = float_constant(g, n, 1);
    if (!b || b->type.shape.size() != 2) return std::nullopt;
    return Anchor{rank, rank - 1, b->type.shape[1], false};
  }
  return std::nullopt;
}

// BatchNormalization(y, gamma, beta, mean, var) in inference mode as an affine map.
std::optional<Affine> batch_norm_affine(const Graph& g, const Node& m, const Anchor& a) {
  if (m.inputs.size() != 5 || m.attr<int64_t>("training_mode").value_or(0) != 0 ||
      a.channel_axis != 1)
    return std::nullopt;
  std::vector<std::vector<double>> p;
  for (size_t i = 1; i < 5; ++i) {
    const Initializer* c = float_constant(g, m, i);
    if (!c || c->type.shape != std::vector<int64_t>{a.channels}) return std::nullopt;
    p.push_back(to_double(*c));
  }
  const double eps = m.attr<float>("epsilon").value_or(1e-5f);
  Affine f{std::vector<double>(a.channels), std::vector<double>(a.channels)};
  for (int64_t c = 0; c < a.channels; ++c) {
    f.scale[c] = p[0][c] / std::sqrt(p[3][c] + eps);
    f.shift[c] = p[1][c] - p[2][c] * f.scale[c];
  }
  return f;
}

// The affine map of a binary Mul/Div/Add/Sub of `y` by a per-channel constant.
std::optional<Affine> binary_affine(const Graph& g, const Node& m, const std::string& y,
                                    const Anchor& a) {
  const bool binary = m.inputs.size() == 2 && m.outputs.size() == 1;
  const bool commutative = m.op_type == "Mul" || m.op_type == "Add";
  if (!binary || !(commutative || m.op_type == "Div" || m.op_type == "Sub")) return std::nullopt;
  const size_t other = m.inputs[0] == y ? 1 : 0;
  if (other == 0 && !commutative)
    return std::nullopt;  // c / y and c - y are not affine in y's weights
  const Initializer* c = constant_of(g, m.inputs[other]);
  if (!c) return std::nullopt;
  auto v = per_channel(*c, a);
  if (!v) return std::nullopt;
  Affine f{std::vector<double>(a.channels, 1.0), std::vector<double>(a.channels, 0.0)};
  if (m.op_type == "Mul") f.scale = *v;
  if (m.op_type == "Div") {
    for (int64_t i = 0; i < a.channels; ++i) {
      if ((*v)[i] == 0.0) return std::nullopt;  // keep inf/nan behaviour exact
      f.scale[i] = 1.0 / (*v)[i];
    }
  }
  if (m.op_type == "Add") f.shift = *v;
  if (m.op_type == "Sub")
    for (int64_t i = 0; i < a.channels; ++i) f.shift[i] = -(*v)[i];
  return f;
}

// The affine map `m` (y's only reader) applies to the anchor output `y`, or
// nullopt when it is not one the anchor can absorb.
std::optional<Affine> affine_of(const Graph& g, const Node& m, const std::string& y,
                                const Anchor& a,
                                const std::map<std::string, std::vector<size_t>>& consumers) {
  if (!is_onnx(m) || m.inputs.empty() || m.outputs.empty() || m.outputs[0].empty())
    return std::nullopt;
  const TensorType* ty = g.type_of(y);
  const TensorType* tm = g.type_of(m.outputs[0]);
  if (!ty || !tm || !(*ty == *tm)) return std::nullopt;  // the op must not broadcast y up
  for (size_t k = 1; k < m.outputs.size(); ++k) {
    const std::string& o = m.outputs[k];
    if (!o.empty() && (is_graph_output(g, o) || consumers.count(o))) return std::nullopt;
  }
  std::optional<Affine> f;
  if (m.op_type == "BatchNormalization")
    f = m.inputs[0] == y ? batch_norm_affine(g, m, a) : std::nullopt;
  else
    f = binary_affine(g, m, y, a);
  if (f && !a.can_shift && !all_equal(f->shift, 0.0)) return std::nullopt;
  return f;
}

// w' = w scaled along `axis` (of a row-major tensor) by scale[index on axis].
Initializer scale_along(const Initializer& w, size_t axis, const std::vector<double>& scale) {
  std::vector<float> v = w.as<float>();
  int64_t inner = 1;
  for (size_t d = axis + 1; d < w.type.shape.size(); ++d) inner *= w.type.shape[d];
  const int64_t n = w.type.shape[axis];
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(v[i] * scale[(i / inner) % n]);
  return float_tensor(w.type.shape, v);
}

Initializer vector_of(const std::vector<double>& v) {
  return float_tensor({static_cast<int64_t>(v.size())}, std::vector<float>(v.begin(), v.end()));
}

// Sets input `i` of `n` to a new constant named after the node.
void set_constant_input(Graph& g, Node& n, size_t i, const std::string& what, Initializer value) {
  std::string name = unique_value_name(g, n.name + "." + what + "_folded");
  set_initializer(g, name, std::move(value));
  if (n.inputs.size() <= i) n.inputs.resize(i + 1);
  n.inputs[i] = name;
}

void apply(Graph& g, Node& n, const Anchor& a, const Affine& f) {
  const bool scales = !all_equal(f.scale, 1.0);
  const bool shifts = !all_equal(f.shift, 0.0);
  if (n.op_type == "Conv") {
    if (scales)
      set_constant_input(g, n, 1, "weight", scale_along(*constant_of(g, n.inputs[1]), 0, f.scale));
    const Initializer* b =
        n.inputs.size() > 2 && !n.inputs[2].empty() ? constant_of(g, n.inputs[2]) : nullptr;
    if (!scales && !shifts) return;
    if (!b && !shifts) return;
    std::vector<double> bias = b ? to_double(*b) : std::vector<double>(a.channels, 0.0);
    for (int64_t c = 0; c < a.channels; ++c) bias[c] = bias[c] * f.scale[c] + f.shift[c];
    set_constant_input(g, n, 2, "bias", vector_of(bias));
  } else if (n.op_type == "Gemm") {
    const bool trans_b = n.attr<int64_t>("transB").value_or(0) != 0;
    if (scales)
      set_constant_input(g, n, 1, "weight",
                         scale_along(*constant_of(g, n.inputs[1]), trans_b ? 0 : 1, f.scale));
    const bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (!has_c && !shifts) return;
    std::vector<double> c = *gemm_bias(g, n, a.channels);
    for (int64_t i = 0; i < a.channels; ++i) c[i] = c[i] * f.scale[i] + f.shift[i];
    set_constant_input(g, n, 2, "bias", vector_of(c));
    n.attrs["beta"] = 1.0f;
  } else {  // MatMul: B is [K, N], output channels along B's columns
    if (scales)
      set_constant_input(g, n, 1, "weight", scale_along(*constant_of(g, n.inputs[1]), 1, f.scale));
  }
}

}  // namespace

int fold_batch_norm(Graph& g) {
  const auto consumers = consumers_of(g);
  std::vector<bool> removed(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (removed[i]) continue;
    // Absorb the anchor's single reader for as long as it is an affine op.
    while (true) {
      Node& n = g.nodes[i];
      std::optional<Anchor> a = anchor_of(g, n);
      if (!a) break;
      const std::string y = n.outputs[0];
      auto readers = consumers.find(y);
      if (is_graph_output(g, y) || readers == consumers.end() || readers->second.size() != 1) break;
      const size_t j = readers->second[0];
      std::optional<Affine> f = affine_of(g, g.nodes[j], y, *a, consumers);
      if (!f) break;
      apply(g, g.nodes[i], *a, *f);
      Node& m = g.nodes[j];
      g.nodes[i].outputs[0] = m.outputs[0];
      g.value_info.erase(y);
      for (size_t k = 1; k < m.outputs.size(); ++k) g.value_info.erase(m.outputs[k]);
      removed[j] = true;
      ++folded;
    }
  }
  erase_nodes(g, removed);
  return folded;
}

}  // namespace kiln::graph::passes
