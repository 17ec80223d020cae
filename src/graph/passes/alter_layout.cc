#include "graph/passes/alter_layout.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "graph/op_registry.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/op_template.h"

namespace kiln::graph {
namespace {

// ---- small graph-building helpers ----------------------------------------------

struct Rewriter {
  Graph& g;
  const std::map<std::string, std::string>& configs;
  std::vector<TemplateUse> uses;
  std::vector<Node> out;  // the new node list
  int counter = 0;
  // (value, block) -> the value in NCHW[block]c, so that convolutions
  // reading the same activation share one transform.
  std::map<std::pair<std::string, int64_t>, std::string> blocked;

  std::string fresh(const std::string& base, const TensorType& t) {
    std::string name;
    do {
      name = base + "/" + std::to_string(counter++);
    } while (g.value_info.count(name) || g.initializers.count(name));
    g.value_info[name] = t;
    return name;
  }

  std::string add_constant(const std::string& base, Initializer init) {
    std::string name = fresh(base, init.type);
    g.initializers[name] = std::move(init);
    return name;
  }

  void emit(Node n) { out.push_back(std::move(n)); }

  // LT(x) from layout src_block to dst_block (0 = NCHW) into `result`.
  void layout_transform(const std::string& name, const std::string& x, const std::string& result,
                        int64_t src_block, int64_t dst_block) {
    Node n;
    n.op_type = "kiln.LayoutTransform";
    n.domain = "kiln";
    n.name = name;
    n.inputs = {x};
    n.outputs = {result};
    n.attrs["src_block"] = src_block;
    n.attrs["dst_block"] = dst_block;
    emit(std::move(n));
  }

  // Resolves the config of a workload: explicit, else the fallback.
  schedule::Config config_for(const ops::OpTemplate& t, const ops::Workload& w, bool* configured) {
    auto it = configs.find(w.key());
    *configured = it != configs.end();
    if (!*configured) return t.fallback(w);
    try {
      return schedule::Config::from_json(t.space(w), it->second);
    } catch (const std::exception& e) {
      throw std::runtime_error("config for " + w.key() + ": " + e.what());
    }
  }

  Node template_node(const Node& orig, const ops::OpTemplate& t, const ops::Workload& w,
                     const schedule::Config& cfg, std::vector<std::string> inputs,
                     const std::string& output, const std::vector<int64_t>& output_shape) {
    Node n;
    n.op_type = "kiln.Template";
    n.domain = "kiln";
    n.name = orig.name;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.attrs["template"] = t.name();
    n.attrs["workload"] = w.key();
    n.attrs["config"] = cfg.to_json();
    n.attrs["output_shape"] = output_shape;
    return n;
  }

  bool rewrite_conv(const Node& n);
  bool rewrite_dense(const Node& n);
  bool rewrite_batch_matmul(const Node& n);
};

std::vector<float> floats_of(const Initializer& init) { return init.as<float>(); }

Initializer float_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  Initializer t;
  t.type = {"float32", std::move(shape)};
  t.data.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Conv pads [top, left, bottom, right] from pads / auto_pad.
std::vector<int64_t> conv_pads(const Node& n, int64_t h, int64_t w, int64_t kh, int64_t kw,
                               const std::vector<int64_t>& st, const std::vector<int64_t>& dil) {
  std::string auto_pad = n.attr<std::string>("auto_pad").value_or("NOTSET");
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    std::vector<int64_t> p(4);
    int64_t in[2] = {h, w}, k[2] = {kh, kw};
    for (int a = 0; a < 2; ++a) {
      int64_t out = (in[a] + st[a] - 1) / st[a];
      int64_t total = std::max<int64_t>(0, (out - 1) * st[a] + (k[a] - 1) * dil[a] + 1 - in[a]);
      int64_t small = total / 2, big = total - small;
      p[a] = auto_pad == "SAME_UPPER" ? small : big;
      p[a + 2] = auto_pad == "SAME_UPPER" ? big : small;
    }
    return p;
  }
  auto pads = n.attr<std::vector<int64_t>>("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  if (pads.size() != 4) return {};
  return {pads[0], pads[1], pads[2], pads[3]};
}

bool Rewriter::rewrite_conv(const Node& n) {
  if (n.inputs.size() < 2 || !g.initializers.count(n.inputs[1])) return false;
  const TensorType* xt = g.type_of(n.inputs[0]);
  const Initializer& wt = g.initializers.at(n.inputs[1]);
  if (!xt || xt->dtype != "float32" || xt->shape.size() != 4 || wt.type.shape.size() != 4 ||
      wt.type.dtype != "float32")
    return false;
  int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3];
  int64_t OC = wt.type.shape[0], KH = wt.type.shape[2], KW = wt.type.shape[3];
  int64_t group = n.attr<int64_t>("group").value_or(1);
  bool depthwise = group > 1 && group == C && OC == C && wt.type.shape[1] == 1;
  if (group != 1 && !depthwise) return false;
  auto st = n.attr<std::vector<int64_t>>("strides").value_or(std::vector<int64_t>{1, 1});
  auto dil = n.attr<std::vector<int64_t>>("dilations").value_or(std::vector<int64_t>{1, 1});
  if (st.size() != 2 || dil.size() != 2) return false;
  std::vector<int64_t> pads = conv_pads(n, H, W, KH, KW, st, dil);
  if (pads.size() != 4) return false;

  const ops::OpTemplate& t =
      ops::get_template(depthwise ? "depthwise_conv2d_NCHWc.x86" : "conv2d_NCHWc.x86");
  ops::Workload w;
  w.template_name = t.name();
  w.params = {{"data", {N, C, H, W}},
              {"kernel", wt.type.shape},
              {"strides", st},
              {"pads", pads},
              {"dilation", dil}};
  bool configured = false;
  schedule::Config cfg = config_for(t, w, &configured);
  auto in_shapes = t.input_shapes(w, cfg);
  std::vector<int64_t> out_shape = t.output_shape(w, cfg);
  int64_t icb = in_shapes.at(0).back(), ocb = out_shape.back();

  std::vector<float> packed = ops::oihw_to_blocked(floats_of(wt).data(), OC, depthwise ? 1 : C, KH,
                                                   KW, depthwise ? 1 : icb, ocb);
  std::string w_packed =
      add_constant(n.name + "/weight_packed", float_tensor(in_shapes.at(1), packed));
  std::string& x_c = blocked[{n.inputs[0], icb}];
  if (x_c.empty()) {
    x_c = fresh(n.name + "/data_nchwc", {"float32", in_shapes.at(0)});
    layout_transform(n.name + "/to_nchwc", n.inputs[0], x_c, 0, icb);
  }
  std::string y_c = fresh(n.name + "/out_nchwc", {"float32", out_shape});
  emit(template_node(n, t, w, cfg, {x_c, w_packed}, y_c, out_shape));
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    auto bias_it = g.initializers.find(n.inputs[2]);
    if (bias_it == g.initializers.end())
      throw std::runtime_error("node '" + n.name + "': a Conv bias must be a constant");
    std::string bias = add_constant(
        n.name + "/bias_nchwc", float_tensor({1, OC / ocb, 1, 1, ocb}, floats_of(bias_it->second)));
    std::string biased = fresh(n.name + "/biased_nchwc", {"float32", out_shape});
    Node add;
    add.op_type = "Add";
    add.name = n.name + "/bias_add";
    add.inputs = {y_c, bias};
    add.outputs = {biased};
    emit(std::move(add));
    y_c = biased;
  }
  layout_transform(n.name + "/to_nchw", y_c, n.outputs.at(0), ocb, 0);
  uses.push_back({t.name(), w.key(), configured});
  return true;
}

bool Rewriter::rewrite_dense(const Node& n) {
  bool gemm = n.op_type == "Gemm";
  if (n.inputs.size() < 2 || !g.initializers.count(n.inputs[1])) return false;
  const TensorType* at = g.type_of(n.inputs[0]);
  const Initializer& bt = g.initializers.at(n.inputs[1]);
  const TensorType* yt = g.type_of(n.outputs.at(0));
  if (!at || !yt || at->dtype != "float32" || bt.type.dtype != "float32" ||
      bt.type.shape.size() != 2 || at->shape.size() < 2)
    return false;
  float alpha = 1, beta = 1;
  bool trans_b = false;
  if (gemm) {
    if (n.attr<int64_t>("transA").value_or(0) != 0) return false;
    trans_b = n.attr<int64_t>("transB").value_or(0) != 0;
    alpha = n.attr<float>("alpha").value_or(1.0f);
    beta = n.attr<float>("beta").value_or(1.0f);
  }
  int64_t K = at->shape.back();
  int64_t M = product(at->shape) / K;
  int64_t N = trans_b ? bt.type.shape[0] : bt.type.shape[1];
  if ((trans_b ? bt.type.shape[1] : bt.type.shape[0]) != K) return false;

  std::vector<float> b = floats_of(bt), b_kn(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      b_kn[k * N + j] = alpha * (trans_b ? b[j * K + k] : b[k * N + j]);

  const ops::OpTemplate& t = ops::get_template("dense_pack.x86");
  ops::Workload w;
  w.template_name = t.name();
  w.params = {{"data", {M, K}}, {"weight", {K, N}}};
  bool configured = false;
  schedule::Config cfg = config_for(t, w, &configured);
  auto in_shapes = t.input_shapes(w, cfg);
  int64_t bn = in_shapes.at(1).back();
  std::vector<float> packed = ops::pack_dense_weight(b_kn.data(), K, N, bn);
  std::string b_packed =
      add_constant(n.name + "/weight_packed", float_tensor(in_shapes.at(1), packed));

  bool has_c = gemm && n.inputs.size() > 2 && !n.inputs[2].empty() && beta != 0.0f;
  std::string y = has_c ? fresh(n.name + "/dense", *yt) : n.outputs[0];
  emit(template_node(n, t, w, cfg, {n.inputs[0], b_packed}, y, yt->shape));
  if (has_c) {
    std::string c = n.inputs[2];
    if (beta != 1.0f) {
      auto it = g.initializers.find(c);
      if (it == g.initializers.end()) return true;  // unreachable: checked below
      std::vector<float> cv = floats_of(it->second);
      for (float& v : cv) v *= beta;
      c = add_constant(n.name + "/c_scaled", float_tensor(it->second.type.shape, cv));
    }
    Node add;
    add.op_type = "Add";
    add.name = n.name + "/c_add";
    add.inputs = {y, c};
    add.outputs = {n.outputs[0]};
    emit(std::move(add));
  }
  uses.push_back({t.name(), w.key(), configured});
  return true;
}

// MatMul of two activations (attention's Q K^T and P V): batch_matmul.x86
// when the batch dimensions match or the right operand has none to broadcast.
bool Rewriter::rewrite_batch_matmul(const Node& n) {
  if (n.op_type != "MatMul" || n.inputs.size() != 2) return false;
  const TensorType* at = g.type_of(n.inputs[0]);
  const TensorType* bt = g.type_of(n.inputs[1]);
  const TensorType* yt = g.type_of(n.outputs.at(0));
  if (!at || !bt || !yt || at->dtype != "float32" || bt->dtype != "float32" ||
      at->shape.size() < 3 || bt->shape.size() < 2)
    return false;
  std::vector<int64_t> a_batch(at->shape.begin(), at->shape.end() - 2);
  std::vector<int64_t> b_batch(bt->shape.begin(), bt->shape.end() - 2);
  int64_t M = at->shape[at->shape.size() - 2], K = at->shape.back();
  int64_t N = bt->shape.back();
  if (bt->shape[bt->shape.size() - 2] != K) return false;
  int64_t B = product(a_batch), Bb = product(b_batch);
  if (Bb != 1 && b_batch != a_batch) return false;

  const ops::OpTemplate& t = ops::get_template("batch_matmul.x86");
  ops::Workload w;
  w.template_name = t.name();
  w.params = {{"a", {B, M, K}}, {"b", {Bb, K, N}}};
  bool configured = false;
  schedule::Config cfg = config_for(t, w, &configured);
  emit(template_node(n, t, w, cfg, {n.inputs[0], n.inputs[1]}, n.outputs[0], yt->shape));
  uses.push_back({t.name(), w.key(), configured});
  return true;
}

// ---- layout propagation ------------------------------------------------------------

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
  int64_t n = product(s);
  if (n == 1) {
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

// Runs elementwise operators whose activations all come out of NCHW[b]c in
// that layout, moving the transform back to NCHW after them.
void propagate_blocked(Graph& g, int* counter) {
  Unblocked unblocked = find_unblocked(g);
  std::vector<Node> out;
  // n runs on `inputs` in NCHW[block]c; its NCHW output comes from a
  // transform after it (which the next convolution's transform cancels).
  auto emit_blocked = [&](Node n, const std::vector<std::string>& inputs, int64_t block) {
    const TensorType* yt = g.type_of(n.outputs[0]);
    std::string result = n.outputs[0];
    std::string blocked_out = n.name + "/out_nchwc/" + std::to_string((*counter)++);
    const auto& s = yt->shape;
    g.value_info[blocked_out] = {"float32", {s[0], s[1] / block, s[2], s[3], block}};
    n.inputs = inputs;
    n.outputs = {blocked_out};
    out.push_back(std::move(n));
    Node lt;
    lt.op_type = "kiln.LayoutTransform";
    lt.domain = "kiln";
    lt.name = out.back().name + "/to_nchw";
    lt.inputs = {blocked_out};
    lt.outputs = {result};
    lt.attrs["src_block"] = block;
    lt.attrs["dst_block"] = int64_t{0};
    out.push_back(std::move(lt));
    unblocked[result] = {blocked_out, block};
  };
  // Concat along channels of tensors blocked alike is the same Concat on
  // the channel-block axis (SqueezeNet's fire modules, DenseNet, GoogLeNet).
  auto channel_concat_block = [&](const Node& n) -> int64_t {
    const TensorType* yt = n.outputs.size() == 1 ? g.type_of(n.outputs[0]) : nullptr;
    if (n.op_type != "Concat" || !yt || yt->shape.size() != 4 || yt->dtype != "float32") return 0;
    int64_t axis = n.attr<int64_t>("axis").value_or(0);
    if (axis != 1 && axis != -3) return 0;
    int64_t block = 0;
    for (const std::string& in : n.inputs) {
      auto u = unblocked.find(in);
      if (u == unblocked.end() || (block && block != u->second.second)) return 0;
      block = u->second.second;
    }
    return block;
  };
  for (Node n : g.nodes) {
    if (int64_t block = channel_concat_block(n)) {
      std::vector<std::string> inputs;
      for (const std::string& in : n.inputs) inputs.push_back(unblocked.at(in).first);
      n.attrs["axis"] = int64_t{1};
      emit_blocked(std::move(n), inputs, block);
      continue;
    }
    const OpDef* def = find_op(n.op_type);
    bool elementwise =
        def && (def->pattern == OpPattern::kElemWise || def->pattern == OpPattern::kBroadcast);
    const TensorType* yt = n.outputs.size() == 1 ? g.type_of(n.outputs[0]) : nullptr;
    if (!elementwise || !yt || yt->shape.size() != 4 || yt->dtype != "float32") {
      out.push_back(std::move(n));
      continue;
    }
    int64_t block = 0;
    bool ok = true, any = false;
    std::vector<std::string> inputs = n.inputs;
    for (std::string& in : inputs) {
      auto u = unblocked.find(in);
      if (u != unblocked.end()) {
        const TensorType* it = g.type_of(in);
        if ((block && block != u->second.second) || !it || it->shape != yt->shape) ok = false;
        block = u->second.second;
        any = true;
      }
    }
    if (!any || !ok) {
      out.push_back(std::move(n));
      continue;
    }
    for (std::string& in : inputs) {
      if (in.empty()) continue;
      if (auto u = unblocked.find(in); u != unblocked.end()) {
        in = u->second.first;
        continue;
      }
      auto c = g.initializers.find(in);
      Initializer blocked;
      if (c == g.initializers.end() || !block_constant(c->second, yt->shape[1], block, &blocked)) {
        ok = false;
        break;
      }
      std::string name = n.name + "/blocked_const/" + std::to_string((*counter)++);
      g.value_info[name] = blocked.type;
      g.initializers[name] = std::move(blocked);
      in = name;
    }
    if (!ok) {
      out.push_back(std::move(n));
      continue;
    }
    emit_blocked(std::move(n), inputs, block);
  }
  g.nodes = std::move(out);
}

// LT(NCHW -> b2) of an LT(b1 -> NCHW) output reads the blocked source
// directly: nothing when b1 == b2, one blocked-to-blocked transform otherwise.
void cancel_transforms(Graph& g) {
  Unblocked unblocked = find_unblocked(g);
  std::map<std::string, std::string> rename;
  std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<Node> out;
  for (Node n : g.nodes) {
    for (std::string& in : n.inputs)
      if (auto r = rename.find(in); r != rename.end()) in = r->second;
    if (n.op_type == "kiln.LayoutTransform" && n.attr<int64_t>("src_block").value_or(0) == 0) {
      auto u = unblocked.find(n.inputs[0]);
      int64_t dst = n.attr<int64_t>("dst_block").value_or(0);
      if (u != unblocked.end()) {
        if (u->second.second == dst && !graph_outputs.count(n.outputs[0])) {
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

// Removes nodes none of whose outputs is read or is a graph output.
void remove_dead_nodes(Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<std::string> used(g.outputs.begin(), g.outputs.end());
    for (const Node& n : g.nodes)
      for (const std::string& in : n.inputs) used.insert(in);
    std::vector<Node> keep;
    for (Node& n : g.nodes) {
      bool live = std::any_of(n.outputs.begin(), n.outputs.end(),
                              [&](const std::string& o) { return used.count(o) > 0; });
      if (live || !find_op(n.op_type) || n.op_type.rfind("kiln.", 0) != 0)
        keep.push_back(std::move(n));
      else
        changed = true;
    }
    g.nodes = std::move(keep);
  }
  std::set<std::string> used;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs) used.insert(in);
  for (auto it = g.initializers.begin(); it != g.initializers.end();)
    it = used.count(it->first) || std::count(g.outputs.begin(), g.outputs.end(), it->first)
             ? std::next(it)
             : g.initializers.erase(it);
}

}  // namespace

std::vector<TemplateUse> alter_layout(Graph& g, const std::map<std::string, std::string>& configs) {
  Rewriter rw{g, configs, {}, {}, 0};
  for (const Node& n : g.nodes) {
    bool done = false;
    if (n.op_type == "Conv") done = rw.rewrite_conv(n);
    if (n.op_type == "Gemm" || n.op_type == "MatMul") done = rw.rewrite_dense(n);
    if (!done && n.op_type == "MatMul") done = rw.rewrite_batch_matmul(n);
    if (!done) rw.emit(n);
  }
  g.nodes = std::move(rw.out);
  propagate_blocked(g, &rw.counter);
  cancel_transforms(g);
  remove_dead_nodes(g);
  return rw.uses;
}

}  // namespace kiln::graph
