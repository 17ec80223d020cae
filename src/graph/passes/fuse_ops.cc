#include "graph/passes/fuse_ops.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "ops/op_template.h"

namespace kiln::graph {
namespace {

// How many nodes read each value, plus one per appearance as a graph output.
std::map<std::string, int> count_uses(const Graph& g) {
  std::map<std::string, int> uses;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs)
      if (!in.empty()) ++uses[in];
  for (const std::string& out : g.outputs) ++uses[out];
  return uses;
}

OpPattern pattern_of(const Node& n) {
  const OpDef* d = find_op(n.op_type);
  return d ? d->pattern : OpPattern::kOpaque;
}

// A fused group becomes one kernel whose compile time grows faster than its
// size: each fused node nests its expression one level deeper, and every
// buffer the kernel reads is a noalias parameter whose scope LLVM attaches to
// every other access (schedule/code_size.cc). A chain of 1,000 Adds of
// distinct constants fused into one kernel took 39 s to build, 2,000 more
// than 110 s; a group that is full starts a new one instead (one more
// intermediate tensor per this many nodes, nothing measurable at run time).
// Real epilogues are far smaller: a residual block's bias, batch norm, add
// and relu, a decomposed GELU or LayerNorm, under 20 nodes and 10 inputs.
constexpr size_t kMaxGroupNodes = 128;
constexpr size_t kMaxGroupInputs = 64;

bool is_elementwise(OpPattern p) { return p == OpPattern::kElemWise || p == OpPattern::kBroadcast; }
bool is_injective(OpPattern p) { return is_elementwise(p) || p == OpPattern::kInjective; }

struct Builder {
  const Graph& g;
  std::map<std::string, int> uses;
  std::map<std::string, size_t> producer_group;  // value -> group index
  std::vector<FusedGroup> groups;
  std::vector<std::vector<int64_t>> group_shape;  // shape of each group's last output

  // A reduction re-reads its input (pooling windows overlap): a layout
  // transform inlined into it would redo its index arithmetic per read and
  // read with a stride of the channel block, so it stays a kernel of its own.
  bool has_layout_transform(const FusedGroup& grp) const {
    return std::any_of(grp.nodes.begin(), grp.nodes.end(),
                       [&](size_t ni) { return g.nodes[ni].op_type == "kiln.LayoutTransform"; });
  }

  // Whether a template anchor's graph output is its own output reshaped by
  // more than leading unit dims (dense_pack on a [1,56,56,C] activation writes
  // [3136,C]). An epilogue computed in the graph's shape would read the
  // anchor through div/mod index arithmetic, which bound inference cannot
  // see through (the whole output became the register tile and LLVM spent
  // minutes on it), so such an epilogue is computed in the anchor's flat
  // space instead, and only joins when all its inputs can be read there.
  bool anchor_reshapes_output(const Node& n) const {
    if (n.op_type != "kiln.Template") return false;
    const TensorType* t = g.type_of(n.outputs.empty() ? "" : n.outputs[0]);
    auto name = n.attr<std::string>("template");
    auto key = n.attr<std::string>("workload");
    auto cfg = n.attr<std::string>("config");
    if (!t || !name || !key || !cfg) return false;
    const ops::OpTemplate& tmpl = ops::get_template(*name);
    ops::Workload w = ops::Workload::parse(*key);
    std::vector<int64_t> own =
        tmpl.output_shape(w, schedule::Config::from_json(tmpl.space(w), *cfg));
    // Shapes apart only by unit dims ([1, 128, N] against [128, N]) map one to one.
    auto non_unit = [](const std::vector<int64_t>& s) {
      std::vector<int64_t> d;
      for (int64_t x : s)
        if (x != 1) d.push_back(x);
      return d;
    };
    return non_unit(own) != non_unit(t->shape);
  }

  // Whether group gi stays within kMaxGroupNodes and kMaxGroupInputs with
  // `extra_nodes` more nodes reading `reads`.
  bool has_room(size_t gi, const std::vector<std::string>& reads, size_t extra_nodes) const {
    const FusedGroup& grp = groups[gi];
    if (grp.nodes.size() + extra_nodes > kMaxGroupNodes) return false;
    std::set<std::string> added;
    for (const std::string& in : reads) {
      if (in.empty()) continue;
      auto p = producer_group.find(in);
      if (p != producer_group.end() && p->second == gi) continue;
      if (std::find(grp.inputs.begin(), grp.inputs.end(), in) == grp.inputs.end()) added.insert(in);
    }
    return grp.inputs.size() + added.size() <= kMaxGroupInputs;
  }
  bool has_room(size_t gi, const Node& n) const { return has_room(gi, n.inputs, 1); }

  // The group `n` may join through its input `x`, or -1.
  int64_t joinable_group(const Node& n, const std::string& x) {
    auto it = producer_group.find(x);
    if (it == producer_group.end() || uses[x] != 1) return -1;
    FusedGroup& grp = groups[it->second];
    if (grp.outputs.size() != 1 || grp.outputs[0] != x) return -1;
    if (!has_room(it->second, n)) return -1;
    OpPattern p = pattern_of(n);
    const TensorType* out = g.type_of(n.outputs.empty() ? "" : n.outputs[0]);
    const TensorType* in = g.type_of(x);
    bool same_shape = out && in && out->shape == in->shape && n.outputs.size() == 1;
    switch (grp.pattern) {
      case OpPattern::kAnchor:
        if (grp.anchor >= 0 && anchor_reshapes_output(g.nodes[static_cast<size_t>(grp.anchor)]))
          for (const std::string& other : n.inputs) {
            const TensorType* t = g.type_of(other);
            if (!other.empty() && other != x &&
                (!t || !out || !flat_epilogue_input(t->shape, out->shape)))
              return -1;
          }
        return is_elementwise(p) && same_shape ? static_cast<int64_t>(it->second) : -1;
      case OpPattern::kReduction:
        return is_elementwise(p) && same_shape ? static_cast<int64_t>(it->second) : -1;
      case OpPattern::kElemWise:
      case OpPattern::kBroadcast:
      case OpPattern::kInjective:
        if (p == OpPattern::kReduction && has_layout_transform(grp)) return -1;
        return is_injective(p) || p == OpPattern::kReduction ? static_cast<int64_t>(it->second)
                                                             : -1;
      case OpPattern::kOpaque: return -1;
    }
    return -1;
  }

  void add_to(size_t gi, size_t node_index) {
    const Node& n = g.nodes[node_index];
    FusedGroup& grp = groups[gi];
    grp.nodes.push_back(node_index);
    OpPattern p = pattern_of(n);
    if (p == OpPattern::kAnchor && grp.anchor < 0) grp.anchor = static_cast<int64_t>(node_index);
    if (p == OpPattern::kReduction && is_injective(grp.pattern))
      grp.pattern = OpPattern::kReduction;
    for (const std::string& out : n.outputs) producer_group[out] = gi;
  }

  void run() {
    uses = count_uses(g);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      int64_t target = -1;
      for (const std::string& in : n.inputs) {
        if (in.empty()) continue;
        target = joinable_group(n, in);
        if (target >= 0) break;
      }
      if (target < 0) {
        target = static_cast<int64_t>(groups.size());
        groups.push_back({});
        groups.back().pattern = pattern_of(n);
      }
      add_to(static_cast<size_t>(target), i);
      absorb_dequantize_inputs(static_cast<size_t>(target), n);
      recompute_boundary(groups[target]);
    }
    for (size_t gi = 0; gi < groups.size(); ++gi) merge_diamond_into_anchor(gi);
    std::erase_if(groups, [](const FusedGroup& grp) { return grp.nodes.empty(); });
  }

  // An elementwise group E whose input x, the float output of anchor group G,
  // is read only inside E, joins G: SiLU (x * Sigmoid(x)) and GELU's
  // x * (1 + erf(...)) read x twice, so x had two readers and ended G, and
  // the activation was a kernel of its own writing and re-reading the whole
  // tensor. Every node of E keeps x's shape (an epilogue), E has one output,
  // and G's only output is x, so the merged group still has one output and
  // no cycle (nothing else reads x).
  void merge_diamond_into_anchor(size_t ei) {
    FusedGroup& e = groups[ei];
    if (e.nodes.empty() || e.anchor >= 0 || e.outputs.size() != 1 || !is_elementwise(e.pattern))
      return;
    for (const std::string& x : e.inputs) {
      auto it = producer_group.find(x);
      if (it == producer_group.end() || it->second == ei) continue;
      size_t gi = it->second;
      FusedGroup& grp = groups[gi];
      if (grp.pattern != OpPattern::kAnchor || grp.anchor < 0 || grp.outputs != std::vector{x})
        continue;
      const TensorType* xt = g.type_of(x);
      if (!xt || xt->dtype != "float32" || uses[x] != reads_inside(e, x)) continue;
      if (!epilogue_of(e, *xt, grp)) continue;
      if (!has_room(gi, e.inputs, e.nodes.size())) continue;
      std::vector<size_t> nodes = e.nodes;
      e = FusedGroup{};  // emptied; run() drops it
      for (size_t ni : nodes) add_to(gi, ni);
      std::sort(grp.nodes.begin(), grp.nodes.end());
      recompute_boundary(grp);
      return;
    }
  }

  int reads_inside(const FusedGroup& grp, const std::string& v) const {
    int n = 0;
    for (size_t ni : grp.nodes)
      n += static_cast<int>(std::count(g.nodes[ni].inputs.begin(), g.nodes[ni].inputs.end(), v));
    return n;
  }

  // Whether every node of e is elementwise with output type xt, and (for an
  // anchor whose output is reshaped, see anchor_reshapes_output) every value e
  // reads from outside is readable in the anchor's flat space.
  bool epilogue_of(const FusedGroup& e, const TensorType& xt,
                   const FusedGroup& anchor_group) const {
    for (size_t ni : e.nodes) {
      const Node& n = g.nodes[ni];
      const TensorType* t = g.type_of(n.outputs.size() == 1 ? n.outputs[0] : "");
      if (!is_elementwise(pattern_of(n)) || !t || *t != xt) return false;
    }
    if (!anchor_reshapes_output(g.nodes[static_cast<size_t>(anchor_group.anchor)])) return true;
    for (const std::string& in : e.inputs) {
      const TensorType* t = g.type_of(in);
      if (!t || !flat_epilogue_input(t->shape, xt.shape)) return false;
    }
    return true;
  }

  // A DequantizeLinear alone in its group whose only reader `n` has just
  // joined the template group gi (the residual Add of an int8 ResNet or
  // MobileNet reading the skip connection's DQ) joins it too: the epilogue
  // dequantizes the 8-bit value inline, where the DQ was a kernel of its own
  // writing float32 that the epilogue read back (4 bytes per element for 1).
  void absorb_dequantize_inputs(size_t gi, const Node& n) {
    if (groups[gi].pattern != OpPattern::kAnchor || groups[gi].anchor < 0 ||
        anchor_reshapes_output(g.nodes[static_cast<size_t>(groups[gi].anchor)]))
      return;
    const TensorType* out = g.type_of(n.outputs.empty() ? "" : n.outputs[0]);
    for (const std::string& y : n.inputs) {
      auto it = producer_group.find(y);
      if (y.empty() || it == producer_group.end() || it->second == gi || uses[y] != 1) continue;
      FusedGroup& p = groups[it->second];
      if (p.nodes.size() != 1 || p.outputs != std::vector<std::string>{y}) continue;
      const TensorType* t = g.type_of(y);
      if (g.nodes[p.nodes[0]].op_type != "DequantizeLinear" || !t || !out ||
          t->shape != out->shape || !has_room(gi, g.nodes[p.nodes[0]]))
        continue;
      size_t dq = p.nodes[0];
      p = FusedGroup{};  // emptied; run() drops it
      add_to(gi, dq);
      // Lowering computes the nodes in order: the DQ before its reader.
      std::sort(groups[gi].nodes.begin(), groups[gi].nodes.end());
    }
  }

  // Inputs: values read by the group but not produced in it. Outputs:
  // values produced in the group and read outside it or graph outputs.
  void recompute_boundary(FusedGroup& grp) {
    std::set<std::string> produced, seen;
    std::map<std::string, int> inner_uses;
    for (size_t ni : grp.nodes)
      for (const std::string& o : g.nodes[ni].outputs) produced.insert(o);
    grp.inputs.clear();
    grp.outputs.clear();
    for (size_t ni : grp.nodes)
      for (const std::string& in : g.nodes[ni].inputs) {
        if (in.empty()) continue;
        if (produced.count(in))
          ++inner_uses[in];
        else if (seen.insert(in).second)
          grp.inputs.push_back(in);
      }
    for (size_t ni : grp.nodes)
      for (const std::string& o : g.nodes[ni].outputs) {
        if (o.empty()) continue;
        // Outputs nobody reads (an unused Dropout mask) still get written.
        if (uses[o] > inner_uses[o] || uses[o] == 0) grp.outputs.push_back(o);
      }
  }
};

// A node that joins an earlier group may read values of groups created after
// that group: order the groups by their dependencies (stable, so the
// original order is kept where it is free).
std::vector<FusedGroup> sort_groups(std::vector<FusedGroup> groups) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t ni = 0; ni < groups[i].outputs.size(); ++ni) producer[groups[i].outputs[ni]] = i;
  std::vector<int> state(groups.size(), 0);  // 0 new, 1 visiting, 2 done
  std::vector<FusedGroup> sorted;
  std::function<void(size_t)> visit = [&](size_t i) {
    if (state[i] == 2) return;
    if (state[i] == 1) throw std::logic_error("operator fusion produced a cycle");
    state[i] = 1;
    for (const std::string& in : groups[i].inputs)
      if (auto it = producer.find(in); it != producer.end() && it->second != i) visit(it->second);
    state[i] = 2;
    sorted.push_back(groups[i]);
  };
  for (size_t i = 0; i < groups.size(); ++i) visit(i);
  return sorted;
}

}  // namespace

bool flat_epilogue_input(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  if (shape == out || shape.empty()) return true;
  if (out.empty() || shape.size() > out.size()) return false;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    if (shape[d] != 1) return false;
  return shape.back() == 1 || shape.back() == out.back();
}

std::vector<FusedGroup> fuse_ops(const Graph& g) {
  Builder b{g, {}, {}, {}, {}};
  b.run();
  return sort_groups(std::move(b.groups));
}

std::optional<std::pair<std::string, std::string>> storage_alias(const Graph& g,
                                                                 const FusedGroup& group) {
  if (group.nodes.size() != 1 || group.outputs.size() != 1) return std::nullopt;
  const Node& n = g.nodes[group.nodes[0]];
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  if (!kViews.count(n.op_type) || n.inputs.empty() || n.inputs[0].empty() ||
      n.outputs.size() != 1 || n.outputs[0] != group.outputs[0])
    return std::nullopt;
  const std::string& out = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) return std::nullopt;
  const TensorType* in_t = g.type_of(n.inputs[0]);
  const TensorType* out_t = g.type_of(out);
  if (!in_t || !out_t || in_t->dtype != out_t->dtype ||
      in_t->num_elements() != out_t->num_elements())
    return std::nullopt;
  return std::make_pair(out, n.inputs[0]);
}

std::optional<ConcatView> concat_view(const Graph& g, const FusedGroup& group) {
  if (group.nodes.size() != 1 || group.outputs.size() != 1) return std::nullopt;
  const Node& n = g.nodes[group.nodes[0]];
  if (n.op_type != "Concat" || n.inputs.size() < 2 || n.outputs.size() != 1 ||
      n.outputs[0] != group.outputs[0])
    return std::nullopt;
  const std::string& out = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) return std::nullopt;
  const TensorType* out_t = g.type_of(out);
  if (!out_t || out_t->shape.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(out_t->shape.size());
  int64_t axis = n.attr<int64_t>("axis").value_or(0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  for (int64_t d = 0; d < axis; ++d)
    if (out_t->shape[static_cast<size_t>(d)] != 1) return std::nullopt;
  ConcatView view{out, {}, {}};
  size_t offset = 0;
  for (const std::string& in : n.inputs) {
    const TensorType* t = in.empty() ? nullptr : g.type_of(in);
    if (!t || t->dtype != out_t->dtype ||
        std::find(view.inputs.begin(), view.inputs.end(), in) != view.inputs.end())
      return std::nullopt;
    view.inputs.push_back(in);
    view.offsets.push_back(offset);
    offset += static_cast<size_t>(t->num_elements()) * dtype_size(t->dtype);
  }
  if (offset != static_cast<size_t>(out_t->num_elements()) * dtype_size(out_t->dtype))
    return std::nullopt;
  return view;
}

std::string group_label(const Graph& g, const FusedGroup& group) {
  std::string label = "fused";
  for (size_t ni : group.nodes) {
    std::string t = g.nodes[ni].op_type;
    std::string lower;
    for (char c : t) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    label += "_" + lower;
  }
  if (label.size() > 60) label = label.substr(0, 60);
  return label;
}

}  // namespace kiln::graph
