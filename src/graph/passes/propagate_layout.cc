#include "graph/passes/propagate_layout.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_registry.h"
#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph {
namespace {

using passes::float_tensor;

// The first index for this pass's new value names ("<node>/<what>/<k>"): one
// past the highest k apply_templates gave a value of a kiln.Template node
// ("<template node>/<what>/<k>"), 0 when there is none. Any unique numbering
// would do; continuing apply_templates' one keeps the value names (which
// mod.json lists) those of the single pass this one was split from.
int next_value_index(const Graph& g) {
  int next = 0;
  for (const Node& n : g.nodes) {
    if (n.op_type != "kiln.Template") continue;
    std::string prefix = n.name + "/";
    for (auto it = g.value_info.lower_bound(prefix);
         it != g.value_info.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      std::string rest = it->first.substr(prefix.size());  // "<what>/<k>"
      size_t slash = rest.find('/');
      std::string k = slash == std::string::npos ? "" : rest.substr(slash + 1);
      if (k.empty() || k.size() > 9 ||
          !std::all_of(k.begin(), k.end(), [](unsigned char c) { return std::isdigit(c); }))
        continue;
      next = std::max(next, std::stoi(k) + 1);
    }
  }
  return next;
}

// value -> (blocked source value, block) for outputs of LT(blocked -> NCHW).
using Unblocked = std::map<std::string, std::pair<std::string, int64_t>>;

Unblocked find_unblocked(const Graph& g) {
  Unblocked u;
  for (const Node& n : g.nodes)
    if (n.op_type == "kiln.LayoutTransform" && n.attr<int64_t>("dst_block").value_or(0) == 0)
      u[n.outputs[0]] = {n.inputs[0], n.attr<int64_t>("src_block").value_or(0)};
  return u;
}

// A constant that broadcasts against NCHW as a per-channel or scalar value,
// re-laid out for NCHW[b]c; false when it has another shape.
bool block_constant(const Initializer& c, int64_t channels, int64_t block, Initializer* out) {
  const auto& s = c.type.shape;
  if (c.type.dtype != "float32" || s.size() > 4) return false;
  if (passes::num_elements(s) == 1) {
    *out = float_tensor({1, 1, 1, 1, 1}, c.as<float>());
    return true;
  }
  // Right-aligned to [N, C, H, W]: only the C position may exceed 1.
  std::vector<int64_t> r(4 - s.size(), 1);
  r.insert(r.end(), s.begin(), s.end());
  if (r[0] != 1 || r[2] != 1 || r[3] != 1 || r[1] != channels) return false;
  *out = float_tensor({1, channels / block, 1, 1, block}, c.as<float>());
  return true;
}

bool is_4d_f32(const TensorType* t) { return t && t->shape.size() == 4 && t->dtype == "float32"; }
// uint8 / int8 activations run blocked too (the int8 templates' data, their
// QuantizeLinear / DequantizeLinear at the float boundaries).
bool is_4d(const TensorType* t) { return t && t->shape.size() == 4; }

// Runs elementwise operators (and channel Concats) whose activations all come
// out of NCHW[b]c in that layout, moving the transform back to NCHW after them.
class Propagator {
 public:
  Propagator(Graph& g, int counter) : g_(g), counter_(counter), unblocked_(find_unblocked(g)) {}

  void run() {
    for (Node n : g_.nodes) {
      if (int64_t block = channel_concat_block(n)) {
        std::vector<std::string> inputs;
        for (const std::string& in : n.inputs) inputs.push_back(unblocked_.at(in).first);
        n.attrs["axis"] = int64_t{1};
        emit_blocked(std::move(n), inputs, block);
        continue;
      }
      if (int64_t block = pool_block(n)) {
        std::vector<std::string> inputs = {unblocked_.at(n.inputs[0]).first};
        n.attrs["kiln_block"] = block;
        emit_blocked(std::move(n), inputs, block);
        continue;
      }
      if (int64_t block = channel_norm_block(n)) {
        std::vector<std::string> inputs = n.inputs;
        inputs[0] = unblocked_.at(n.inputs[0]).first;
        n.attrs["kiln_block"] = block;
        emit_blocked(std::move(n), inputs, block);
        continue;
      }
      std::vector<std::string> inputs;
      int64_t block = elementwise_block(n);
      if (block && blocked_inputs(n, block, &inputs))
        emit_blocked(std::move(n), inputs, block);
      else
        out_.push_back(std::move(n));
    }
    g_.nodes = std::move(out_);
  }

 private:
  // n runs on `inputs` in NCHW[block]c; its NCHW output comes from a
  // transform after it (which the next convolution's transform cancels).
  void emit_blocked(Node n, const std::vector<std::string>& inputs, int64_t block) {
    std::string result = n.outputs[0];
    const std::vector<int64_t> s = g_.type_of(result)->shape;
    std::string blocked_out = n.name + "/out_nchwc/" + std::to_string(counter_++);
    g_.value_info[blocked_out] = {g_.type_of(result)->dtype,
                                  {s[0], s[1] / block, s[2], s[3], block}};
    n.inputs = inputs;
    n.outputs = {blocked_out};
    out_.push_back(std::move(n));
    Node lt;
    lt.op_type = "kiln.LayoutTransform";
    lt.domain = "kiln";
    lt.name = out_.back().name + "/to_nchw";
    lt.inputs = {blocked_out};
    lt.outputs = {result};
    lt.attrs["src_block"] = block;
    lt.attrs["dst_block"] = int64_t{0};
    out_.push_back(std::move(lt));
    unblocked_[result] = {blocked_out, block};
  }

  // Concat along channels of tensors blocked alike is the same Concat on
  // the channel-block axis (SqueezeNet's fire modules, DenseNet, GoogLeNet).
  // The block, or 0 when n is not such a Concat.
  int64_t channel_concat_block(const Node& n) const {
    if (n.op_type != "Concat" || n.outputs.size() != 1 || !is_4d_f32(g_.type_of(n.outputs[0])))
      return 0;
    int64_t axis = n.attr<int64_t>("axis").value_or(0);
    if (axis != 1 && axis != -3) return 0;
    int64_t block = 0;
    for (const std::string& in : n.inputs) {
      auto u = unblocked_.find(in);
      if (u == unblocked_.end() || (block && block != u->second.second)) return 0;
      block = u->second.second;
    }
    return block;
  }

  // Pooling reads each channel on its own, so it runs on the blocked data as
  // it is (kiln_block; graph/ops/reduce.cc): MaxPool after ResNet's stem and
  // GlobalAveragePool before the classifier no longer cost a transform to
  // NCHW and back. The block of such a pool of an unblocked value, or 0.
  int64_t pool_block(const Node& n) const {
    static const std::set<std::string> kPools = {"MaxPool", "AveragePool", "GlobalAveragePool",
                                                 "GlobalMaxPool"};
    if (!kPools.count(n.op_type) || n.inputs.size() != 1 || n.outputs.size() != 1 ||
        n.attrs.count("kiln_block"))
      return 0;
    // MaxPool also runs on uint8 / int8 (fold_qdq's quantized MaxPool between
    // two int8 convolutions: ResNet's stem).
    auto pooled_type = [&](const TensorType* t) {
      return is_4d_f32(t) ||
             (n.op_type == "MaxPool" && is_4d(t) && (t->dtype == "uint8" || t->dtype == "int8"));
    };
    auto u = unblocked_.find(n.inputs[0]);
    if (u == unblocked_.end() || !pooled_type(g_.type_of(n.inputs[0])) ||
        !pooled_type(g_.type_of(n.outputs[0])))
      return 0;
    return u->second.second;
  }

  // kiln.ChannelNorm normalizes each pixel over its channels, which NCHW[b]c
  // holds as C/b vectors of b lanes: it runs on the blocked data as it is
  // (kiln_block; graph/ops/channel_norm.cc), its Scale and B [C] as they
  // are. ConvNeXt's norms sit between a depthwise and a 1x1 convolution. The
  // block of such a norm of an unblocked value, or 0.
  int64_t channel_norm_block(const Node& n) const {
    if (n.op_type != "kiln.ChannelNorm" || n.inputs.empty() || n.outputs.size() != 1 ||
        n.attrs.count("kiln_block"))
      return 0;
    auto u = unblocked_.find(n.inputs[0]);
    if (u == unblocked_.end() || !is_4d_f32(g_.type_of(n.inputs[0]))) return 0;
    return u->second.second;
  }

  // The block of an elementwise node whose unblocked activations share one
  // block and have its output shape or are per-channel ([N, C, 1, 1]: a
  // squeeze-excitation gate, whose blocked [N, C/b, 1, 1, b] broadcasts over
  // the blocked activation as it does in NCHW), with at least one of the
  // output shape; or 0. (EfficientNet's 16 SE multiplies each ran between a
  // transform of the activation to NCHW and one back.)
  int64_t elementwise_block(const Node& n) const {
    const OpDef* def = find_op(n.op_type);
    bool elementwise =
        def && (def->pattern == OpPattern::kElemWise || def->pattern == OpPattern::kBroadcast);
    const TensorType* yt = n.outputs.size() == 1 ? g_.type_of(n.outputs[0]) : nullptr;
    if (!elementwise || !is_4d(yt)) return 0;
    auto per_channel = [&](const std::vector<int64_t>& s) {
      return s.size() == 4 && s[0] == yt->shape[0] && s[1] == yt->shape[1] && s[2] == 1 &&
             s[3] == 1;
    };
    int64_t block = 0;
    bool ok = true, full = false;
    for (const std::string& in : n.inputs) {
      auto u = unblocked_.find(in);
      if (u == unblocked_.end()) continue;
      const TensorType* it = g_.type_of(in);
      if (block && block != u->second.second) ok = false;
      if (it && it->shape == yt->shape)
        full = true;
      else if (!it || !per_channel(it->shape))
        ok = false;
      block = u->second.second;
    }
    return ok && full ? block : 0;
  }

  // n's inputs in NCHW[block]c: blocked sources, and constants re-laid out
  // (added to the graph as they are made). False when an input is neither.
  bool blocked_inputs(const Node& n, int64_t block, std::vector<std::string>* inputs) {
    *inputs = n.inputs;
    int64_t channels = g_.type_of(n.outputs[0])->shape[1];
    // QuantizeLinear / DequantizeLinear read per-tensor parameters (a scalar
    // or one element) at any rank, as they are; per-channel ones would need
    // the channel axis of NCHW, so such a node stays there.
    bool qdq = n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear";
    for (size_t k = 0; k < inputs->size(); ++k) {
      std::string& in = (*inputs)[k];
      if (in.empty()) continue;
      if (qdq && k > 0) {
        const TensorType* pt = g_.type_of(in);
        if (!pt || passes::num_elements(pt->shape) != 1) return false;
        continue;
      }
      if (auto u = unblocked_.find(in); u != unblocked_.end()) {
        in = u->second.first;
        continue;
      }
      const Initializer* c = passes::constant_of(g_, in);
      Initializer blocked;
      if (!c || !block_constant(*c, channels, block, &blocked)) return false;
      std::string name = n.name + "/blocked_const/" + std::to_string(counter_++);
      passes::set_initializer(g_, name, std::move(blocked));
      in = name;
    }
    return true;
  }

  Graph& g_;
  int counter_;
  Unblocked unblocked_;
  std::vector<Node> out_;
};

// LT(NCHW -> b2) of an LT(b1 -> NCHW) output reads the blocked source
// directly: nothing when b1 == b2, one blocked-to-blocked transform otherwise.
void cancel_transforms(Graph& g) {
  Unblocked unblocked = find_unblocked(g);
  std::map<std::string, std::string> rename;
  std::vector<Node> out;
  for (Node n : g.nodes) {
    for (std::string& in : n.inputs)
      if (auto r = rename.find(in); r != rename.end()) in = r->second;
    if (n.op_type == "kiln.LayoutTransform" && n.attr<int64_t>("src_block").value_or(0) == 0) {
      auto u = unblocked.find(n.inputs[0]);
      int64_t dst = n.attr<int64_t>("dst_block").value_or(0);
      if (u != unblocked.end()) {
        if (u->second.second == dst && !passes::is_graph_output(g, n.outputs[0])) {
          rename[n.outputs[0]] = u->second.first;
          continue;
        }
        n.inputs[0] = u->second.first;
        n.attrs["src_block"] = u->second.second;
      }
    }
    out.push_back(std::move(n));
  }
  g.nodes = std::move(out);
}

// A Resize whose every reader blocks its output again (an upsample between
// two blocked convolutions) is fused with those transforms into a kernel that
// writes NCHW[b]c, the channel block innermost: it interpolates in one stage
// (kiln_reblocked = 1; graph/ops/shape_ops.cc), not the rows first.
void mark_reblocked_resizes(Graph& g) {
  std::map<std::string, std::vector<const Node*>> readers;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs) readers[in].push_back(&n);
  for (Node& n : g.nodes) {
    if (n.op_type != "Resize" || n.outputs.size() != 1 || passes::is_graph_output(g, n.outputs[0]))
      continue;
    const auto& r = readers[n.outputs[0]];
    bool reblocked = !r.empty() && std::all_of(r.begin(), r.end(), [](const Node* m) {
      return m->op_type == "kiln.LayoutTransform" && m->attr<int64_t>("dst_block").value_or(0) > 0;
    });
    if (reblocked) n.attrs["kiln_reblocked"] = int64_t{1};
  }
}

}  // namespace

void propagate_layout(Graph& g) {
  Propagator(g, next_value_index(g)).run();
  cancel_transforms(g);
  passes::eliminate_dead_code(g);
  mark_reblocked_resizes(g);
}

}  // namespace kiln::graph
