#include "graph/passes/pad_channels.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"
#include "ops/conv2d.h"

namespace kiln::graph::passes {

namespace {

// What a node does with the channel axis of its rank-4 float values.
enum class Role {
  kOther,        // mixes, moves or needs exact channels: reads and writes unpadded values
  kConv,         // group-1 Conv: its input's and output's channels pad independently
  kDepthwise,    // group == channels: input and output share their channels
  kChannelwise,  // unary elementwise op or pool: input 0 and output share channels
  kBroadcast,    // Add, Mul, ...: every non-constant operand shares the output's channels
};

// Unary ops (and pools) that keep finite values finite and channels apart.
const std::set<std::string>& channelwise_ops() {
  static const std::set<std::string> ops = {"Relu",
                                            "LeakyRelu",
                                            "Clip",
                                            "Sigmoid",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Tanh",
                                            "Elu",
                                            "Selu",
                                            "Celu",
                                            "Softplus",
                                            "Softsign",
                                            "Mish",
                                            "Gelu",
                                            "Erf",
                                            "Abs",
                                            "Neg",
                                            "Identity",
                                            "MaxPool",
                                            "AveragePool",
                                            "GlobalAveragePool",
                                            "GlobalMaxPool",
                                            "ThresholdedRelu"};
  return ops;
}

// Binary ops whose padded operands stay finite. Div and PRelu take a padded
// constant as their second operand only (a padded zero divisor is a NaN).
const std::set<std::string>& broadcast_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Max", "Min", "Div", "PRelu"};
  return ops;
}

// The value a padded channel of op's constant operand takes: one for a
// divisor, zero otherwise (any finite value would do elsewhere).
float neutral_constant(const std::string& op) { return op == "Div" ? 1.0f : 0.0f; }

const std::vector<int64_t>* float4d(const Graph& g, const std::string& v) {
  const TensorType* t = v.empty() ? nullptr : g.type_of(v);
  return t && t->dtype == "float32" && t->shape.size() == 4 ? &t->shape : nullptr;
}

// The axis of constant `c` that broadcasts against the output's channels,
// -1 when it has none (a scalar, or size 1 there), -2 when it cannot pad.
int channel_axis_of_constant(const Initializer& c, int64_t channels) {
  const std::vector<int64_t>& s = c.type.shape;
  if (c.type.dtype != "float32" || s.size() > 4) return -2;
  if (s.size() < 3) return -1;  // broadcasts over (H, W) or less: no channel axis
  int axis = static_cast<int>(s.size()) - 3;
  if (s[static_cast<size_t>(axis)] == 1) return -1;
  return s[static_cast<size_t>(axis)] == channels ? axis : -2;
}

Role conv_role(const Graph& g, const Node& n) {
  const std::vector<int64_t>* x = float4d(g, n.inputs[0]);
  const std::vector<int64_t>* y = float4d(g, n.outputs[0]);
  const Initializer* w = constant_of(g, n.inputs[1]);
  if (!x || !y || !w || w->type.dtype != "float32" || w->type.shape.size() != 4)
    return Role::kOther;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant_of(g, n.inputs[2]))
    return Role::kOther;
  int64_t group = n.attr<int64_t>("group").value_or(1);
  if (group == 1) return Role::kConv;
  const int64_t c = (*x)[1];
  if (group == c && w->type.shape[0] == c && w->type.shape[1] == 1) return Role::kDepthwise;
  return Role::kOther;
}

Role broadcast_role(const Graph& g, const Node& n) {
  const std::vector<int64_t>* y = float4d(g, n.outputs[0]);
  if (!y || n.inputs.size() != 2) return Role::kOther;
  for (size_t i = 0; i < 2; ++i) {
    if (const Initializer* c = constant_of(g, n.inputs[i])) {
      if (channel_axis_of_constant(*c, (*y)[1]) == -2) return Role::kOther;
      continue;
    }
    // A divisor or a PRelu slope that is not a constant could be zero or
    // anything in its padded channels.
    if (i == 1 && (n.op_type == "Div" || n.op_type == "PRelu")) return Role::kOther;
    const std::vector<int64_t>* x = float4d(g, n.inputs[i]);
    if (!x || ((*x)[1] != (*y)[1] && (*x)[1] != 1)) return Role::kOther;
  }
  return Role::kBroadcast;
}

Role role_of(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || !n.domain.empty()) return Role::kOther;
  if (n.op_type == "Conv" && n.inputs.size() >= 2) return conv_role(g, n);
  if (broadcast_ops().count(n.op_type)) return broadcast_role(g, n);
  if (!channelwise_ops().count(n.op_type)) return Role::kOther;
  const std::vector<int64_t>* x = float4d(g, n.inputs[0]);
  const std::vector<int64_t>* y = float4d(g, n.outputs[0]);
  if (!x || !y || (*x)[1] != (*y)[1]) return Role::kOther;
  for (size_t i = 1; i < n.inputs.size(); ++i)  // Clip's min and max
    if (!n.inputs[i].empty() && !constant_of(g, n.inputs[i])) return Role::kOther;
  return Role::kChannelwise;
}

// Values (non-constant rank-4 floats) and the classes of those that share
// their channel axis.
class ChannelClasses {
 public:
  std::string find(const std::string& v) {
    auto it = parent_.find(v);
    if (it == parent_.end()) return parent_[v] = v;
    if (it->second == v) return v;
    return it->second = find(it->second);
  }
  void join(const std::string& a, const std::string& b) { parent_[find(a)] = find(b); }

 private:
  std::map<std::string, std::string> parent_;
};

struct ClassInfo {
  int64_t channels = 0;
  bool has_conv_output = false;  // a Conv or a depthwise Conv writes one of its values
  int64_t padded = 0;            // the padded count; == channels when it stays
};

// Everything the rewrite needs to know about the graph's values.
struct Analysis {
  std::vector<Role> roles;  // per node
  ChannelClasses classes;
  std::map<std::string, ClassInfo> info;  // by class root
  std::set<std::string> wants_unpadded;   // read by a kOther node or a graph output
  std::set<std::string> wants_padded;     // read by a node with another role

  // The padded count of v's class (0 when v is not a padded value).
  int64_t padded(const Graph& g, const std::string& v) {
    if (v.empty() || !float4d(g, v) || constant_of(g, v)) return 0;
    const ClassInfo& c = info[classes.find(v)];
    return c.padded > c.channels ? c.padded : 0;
  }
};

bool spatial(const std::vector<int64_t>& shape) { return shape[2] * shape[3] > 1; }

// Which inputs of a node with role r share the channels of its output.
bool input_shares_output_channels(const Graph& g, Role r, const Node& n, size_t i) {
  if (r == Role::kDepthwise || r == Role::kChannelwise) return i == 0;
  if (r != Role::kBroadcast || constant_of(g, n.inputs[i])) return false;
  return (*float4d(g, n.inputs[i]))[1] == (*float4d(g, n.outputs[0]))[1];
}

Analysis analyse(const Graph& g, int64_t lanes) {
  Analysis a;
  for (const std::string& out : g.outputs) a.wants_unpadded.insert(out);
  for (const Node& n : g.nodes) {
    Role r = role_of(g, n);
    a.roles.push_back(r);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& v = n.inputs[i];
      if (!float4d(g, v) || constant_of(g, v)) continue;
      bool takes_padded = r != Role::kOther && (r == Role::kConv ? i == 0 : true);
      (takes_padded ? a.wants_padded : a.wants_unpadded).insert(v);
      if (input_shares_output_channels(g, r, n, i)) a.classes.join(v, n.outputs[0]);
    }
  }
  // Channel counts, and which classes hold a convolution's output.
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (const std::string& v : g.nodes[k].outputs) {
      const std::vector<int64_t>* s = float4d(g, v);
      if (!s) continue;
      ClassInfo& c = a.info[a.classes.find(v)];
      c.channels = (*s)[1];
      bool conv = a.roles[k] == Role::kConv || a.roles[k] == Role::kDepthwise;
      c.has_conv_output = c.has_conv_output || (conv && spatial(*s));
    }
  for (const ValueInfo& in : g.inputs)
    if (const std::vector<int64_t>* s = float4d(g, in.name))
      a.info[a.classes.find(in.name)].channels = (*s)[1];
  for (auto& [root, c] : a.info)
    c.padded = c.has_conv_output ? padded_channel_count(c.channels, lanes) : c.channels;
  return a;
}

// `c` padded along `axis` from `from` to `to` entries with `fill`.
Initializer pad_axis(const Initializer& c, size_t axis, int64_t to, float fill) {
  std::vector<int64_t> shape = c.type.shape;
  const int64_t from = shape[axis];
  const int64_t outer = num_elements({shape.begin(), shape.begin() + static_cast<long>(axis)});
  const int64_t inner = num_elements({shape.begin() + static_cast<long>(axis) + 1, shape.end()});
  std::vector<float> in = c.as<float>(), out(static_cast<size_t>(outer * to * inner), fill);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(in.begin() + o * from * inner, from * inner, out.begin() + o * to * inner);
  shape[axis] = to;
  return float_tensor(shape, out);
}

class Rewriter {
 public:
  Rewriter(Graph& g, Analysis& a) : g_(g), a_(a) {}

  void run() {
    for (const Node& n : g_.nodes) {
      node_names_.insert(n.name);
      taken_.insert(n.outputs.begin(), n.outputs.end());
    }
    std::vector<Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    for (const ValueInfo& in : g_.inputs) after_write(in.name, false);
    for (size_t k = 0; k < old.size(); ++k) {
      Node n = std::move(old[k]);
      Role r = a_.roles[k];
      std::vector<std::string> outs = n.outputs;  // the names before widening
      if (r != Role::kOther) widen(n, r);
      g_.nodes.push_back(std::move(n));
      for (const std::string& v : outs) after_write(v, r != Role::kOther);
    }
  }

 private:
  // The padded twin of value v.
  const std::string& wide(const std::string& v) {
    std::string& w = wide_[v];
    if (w.empty()) {
      w = fresh_value(v + "/padded");
      TensorType t = *g_.type_of(v);
      t.shape[1] = a_.padded(g_, v);
      g_.value_info[w] = t;
    }
    return w;
  }

  // After v is written: a padded writer's value is sliced for the readers
  // that want it unpadded; an unpadded one is padded for the others.
  void after_write(const std::string& v, bool written_padded) {
    const int64_t p = a_.padded(g_, v);
    if (p == 0) return;
    const int64_t c = g_.type_of(v)->shape[1];
    if (written_padded && a_.wants_unpadded.count(v)) {
      Node s;
      s.op_type = "Slice";
      s.name = unique_node_name(v + "/drop_padded_channels");
      s.inputs = {wide(v), constant(v + "/slice_starts", int64_tensor({0})),
                  constant(v + "/slice_ends", int64_tensor({c})),
                  constant(v + "/slice_axes", int64_tensor({1}))};
      s.outputs = {v};
      g_.nodes.push_back(std::move(s));
    } else if (!written_padded && a_.wants_padded.count(v)) {
      Node pad;
      pad.op_type = "Pad";
      pad.name = unique_node_name(v + "/pad_channels");
      pad.inputs = {v, constant(v + "/channel_pads", int64_tensor({0, 0, 0, 0, 0, p - c, 0, 0}))};
      pad.outputs = {wide(v)};
      g_.nodes.push_back(std::move(pad));
    }
  }

  // Rewrites node n (role r) to read and write padded values.
  void widen(Node& n, Role r) {
    const std::string& y = n.outputs[0];
    const int64_t py = a_.padded(g_, y);
    if (r == Role::kConv || r == Role::kDepthwise) widen_conv_weights(n, r, py);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      std::string& v = n.inputs[i];
      if (v.empty()) continue;
      if (r == Role::kConv && i > 0) break;
      if (const Initializer* c = constant_of(g_, v)) {
        if (r == Role::kBroadcast && py > 0) v = padded_constant(n, i, *c, py);
        continue;
      }
      if (a_.padded(g_, v) > 0) v = wide(v);
    }
    if (py > 0) n.outputs[0] = wide(y);
  }

  // Zero weights for padded input channels (a Conv's dim 1) and padded
  // output channels (dim 0; the bias too).
  void widen_conv_weights(Node& n, Role r, int64_t py) {
    const int64_t px = a_.padded(g_, n.inputs[0]);
    Initializer w = g_.initializers.at(n.inputs[1]);
    if (r == Role::kConv && px > 0) w = pad_axis(w, 1, px, 0.0f);
    if (py > 0) w = pad_axis(w, 0, py, 0.0f);
    if (r == Role::kDepthwise && py > 0) n.attrs["group"] = py;
    if (px == 0 && py == 0) return;
    n.inputs[1] = constant(n.name + "/weight_padded", std::move(w));
    if (py > 0 && n.inputs.size() > 2 && !n.inputs[2].empty())
      n.inputs[2] =
          constant(n.name + "/bias_padded", pad_axis(g_.initializers.at(n.inputs[2]), 0, py, 0.0f));
  }

  std::string padded_constant(const Node& n, size_t i, const Initializer& c, int64_t py) {
    int axis = channel_axis_of_constant(c, g_.type_of(n.outputs[0])->shape[1]);
    if (axis < 0) return n.inputs[i];
    return constant(n.name + "/operand" + std::to_string(i) + "_padded",
                    pad_axis(c, static_cast<size_t>(axis), py, neutral_constant(n.op_type)));
  }

  std::string constant(const std::string& base, Initializer value) {
    std::string name = fresh_value(base);
    set_initializer(g_, name, std::move(value));
    return name;
  }

  // unique_value_name, also among the outputs of the nodes not yet moved
  // back into g_.nodes.
  std::string fresh_value(const std::string& base) {
    std::string name = unique_value_name(g_, base);
    for (int i = 1; taken_.count(name); ++i)
      name = unique_value_name(g_, base + "_" + std::to_string(i));
    taken_.insert(name);
    return name;
  }

  std::string unique_node_name(const std::string& base) {
    std::string name = base;
    for (int i = 1; node_names_.count(name); ++i) name = base + "_" + std::to_string(i);
    node_names_.insert(name);
    return name;
  }

  Graph& g_;
  Analysis& a_;
  std::map<std::string, std::string> wide_;
  std::set<std::string> node_names_, taken_;
};

}  // namespace

int64_t padded_channel_count(int64_t channels, int64_t lanes) {
  // Blocks of a quarter vector or less: padding at least doubles the lanes
  // used. Above that the gain is small and the Slice that drops the padding
  // costs more (LRASPP's 21-class head, blocks of 7 -> 8: 8 % slower).
  if (lanes < 4 || ops::detail::fallback_channel_block(channels) * 4 > lanes) return channels;
  for (int64_t multiple : {lanes, lanes / 2}) {
    int64_t p = (channels + multiple - 1) / multiple * multiple;
    int64_t limit = multiple == lanes ? 8 : 4;  // at most 1/8, then 1/4 more channels
    if ((p - channels) * limit <= channels) return p;
  }
  return channels;
}

int pad_channels(Graph& g, int64_t lanes) {
  Analysis a = analyse(g, lanes);
  int classes = 0;
  for (const auto& [root, c] : a.info) classes += c.padded > c.channels;
  if (classes == 0) return 0;
  Rewriter(g, a).run();
  return classes;
}

}  // namespace kiln::graph::passes
