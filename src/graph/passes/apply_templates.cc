#include "graph/passes/apply_templates.h"

#include <stdexcept>

#include "graph/passes/pass_util.h"
#include "graph/passes/strategy.h"
#include "ops/dense.h"
#include "ops/op_template.h"

namespace kiln::graph {
namespace {

using passes::float_tensor;

struct Rewriter {
  Graph& g;
  const std::map<std::string, std::string>& configs;
  const Isa& isa;  // the target's, for the templates' fallbacks
  std::vector<TemplateUse> uses;
  std::vector<Node> out;  // the new node list
  // One numbering over the pass: new values are "<node>/<what>/<k>".
  // propagate_layout continues it (see next_value_index there).
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
    passes::set_initializer(g, name, std::move(init));
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

  void add(const std::string& name, const std::string& x, const std::string& y,
           const std::string& result) {
    Node n;
    n.op_type = "Add";
    n.name = name;
    n.inputs = {x, y};
    n.outputs = {result};
    emit(std::move(n));
  }

  // Resolves the config of a workload: explicit, else the fallback.
  schedule::Config config_for(const ops::OpTemplate& t, const ops::Workload& w, bool* configured) {
    auto it = configs.find(w.key());
    *configured = it != configs.end();
    if (!*configured) return t.fallback(w, isa);
    try {
      return schedule::Config::from_json(t.space(w), it->second);
    } catch (const std::exception& e) {
      throw std::runtime_error("config for " + w.key() + ": " + e.what());
    }
  }

  void emit_template(const Node& orig, const ops::OpTemplate& t, const ops::Workload& w,
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
    emit(std::move(n));
  }

  void rewrite(const Node& n, const TemplateSelection& s);
  void rewrite_conv(const Node& n, const Strategy& row, const ops::OpTemplate& t,
                    const ops::Workload& w, const schedule::Config& cfg);
  void rewrite_dense(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                     const schedule::Config& cfg);
};

// The rewrite of the strategy row that selected the template (strategy.h).
void Rewriter::rewrite(const Node& n, const TemplateSelection& s) {
  const ops::OpTemplate& t = ops::get_template(s.template_name);
  const Strategy* row = find_strategy(n.op_type, t.name());
  if (!row)
    throw std::invalid_argument("node '" + n.name + "': no strategy row for " + n.op_type +
                                " with template " + t.name());
  bool configured = false;
  schedule::Config cfg = config_for(t, s.workload, &configured);
  switch (row->rewrite) {
    case Rewrite::kBlockedConv: rewrite_conv(n, *row, t, s.workload, cfg); break;
    case Rewrite::kDense: rewrite_dense(n, t, s.workload, cfg); break;
    case Rewrite::kPlain:
      emit_template(n, t, s.workload, cfg, n.inputs, n.outputs.at(0),
                    g.type_of(n.outputs.at(0))->shape);
      break;
  }
  uses.push_back({t.name(), s.workload.key(), configured});
}

void Rewriter::rewrite_conv(const Node& n, const Strategy& row, const ops::OpTemplate& t,
                            const ops::Workload& w, const schedule::Config& cfg) {
  if (!t.channel_blocked() || !row.pack_weight)
    throw std::invalid_argument("node '" + n.name + "': " + t.name() +
                                " is not a channel-blocked template with a weight packer");
  int64_t OC = w.get("kernel")[0];
  auto in_shapes = t.input_shapes(w, cfg);
  std::vector<int64_t> out_shape = t.output_shape(w, cfg);
  auto [icb, ocb] = ops::layout_blocks(t, w, cfg);

  std::vector<float> weight = g.initializers.at(n.inputs[1]).as<float>();
  std::vector<float> packed = row.pack_weight(w, cfg, icb, ocb, weight.data());
  std::string w_packed =
      add_constant(n.name + "/weight_packed", float_tensor(in_shapes.at(1), packed));
  std::string& x_c = blocked[{n.inputs[0], icb}];
  if (x_c.empty()) {
    x_c = fresh(n.name + "/data_nchwc", {"float32", in_shapes.at(0)});
    layout_transform(n.name + "/to_nchwc", n.inputs[0], x_c, 0, icb);
  }
  std::string y_c = fresh(n.name + "/out_nchwc", {"float32", out_shape});
  emit_template(n, t, w, cfg, {x_c, w_packed}, y_c, out_shape);
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    std::vector<float> bias = g.initializers.at(n.inputs[2]).as<float>();
    std::string bias_c =
        add_constant(n.name + "/bias_nchwc", float_tensor({1, OC / ocb, 1, 1, ocb}, bias));
    std::string biased = fresh(n.name + "/biased_nchwc", {"float32", out_shape});
    add(n.name + "/bias_add", y_c, bias_c, biased);
    y_c = biased;
  }
  layout_transform(n.name + "/to_nchw", y_c, n.outputs.at(0), ocb, 0);
}

// Gemm's alpha goes into the packed weight and beta into a constant C.
void Rewriter::rewrite_dense(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                             const schedule::Config& cfg) {
  bool gemm = n.op_type == "Gemm";
  bool trans_b = gemm && n.attr<int64_t>("transB").value_or(0) != 0;
  float alpha = gemm ? n.attr<float>("alpha").value_or(1.0f) : 1.0f;
  float beta = gemm ? n.attr<float>("beta").value_or(1.0f) : 1.0f;
  const TensorType& yt = *g.type_of(n.outputs.at(0));
  int64_t K = w.get("weight")[0], N = w.get("weight")[1];

  std::vector<float> b = g.initializers.at(n.inputs[1]).as<float>();
  std::vector<float> b_kn(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < N; ++j)
      b_kn[i * N + j] = alpha * (trans_b ? b[j * K + i] : b[i * N + j]);
  auto in_shapes = t.input_shapes(w, cfg);
  int64_t bn = in_shapes.at(1).back();
  std::vector<float> packed = ops::pack_dense_weight(b_kn.data(), K, N, bn);
  std::string b_packed =
      add_constant(n.name + "/weight_packed", float_tensor(in_shapes.at(1), packed));

  bool has_c = gemm && n.inputs.size() > 2 && !n.inputs[2].empty() && beta != 0.0f;
  std::string y = has_c ? fresh(n.name + "/dense", yt) : n.outputs[0];
  emit_template(n, t, w, cfg, {n.inputs[0], b_packed}, y, yt.shape);
  if (!has_c) return;
  std::string c = n.inputs[2];
  if (beta != 1.0f) {  // select_templates only covers a constant C here
    const Initializer& c0 = g.initializers.at(c);
    std::vector<float> cv = c0.as<float>();
    for (float& v : cv) v *= beta;
    c = add_constant(n.name + "/c_scaled", float_tensor(c0.type.shape, cv));
  }
  add(n.name + "/c_add", y, c, n.outputs[0]);
}

}  // namespace

std::vector<TemplateUse> apply_templates(Graph& g, const std::vector<TemplateSelection>& selected,
                                         const std::map<std::string, std::string>& configs,
                                         const Isa& isa) {
  std::map<std::string, const TemplateSelection*> by_node;
  for (const TemplateSelection& s : selected) by_node[s.node] = &s;
  Rewriter rw{g, configs, isa, {}, {}, 0, {}};
  for (const Node& n : g.nodes) {
    auto it = by_node.find(n.name);
    if (it == by_node.end()) {
      rw.emit(n);
      continue;
    }
    rw.rewrite(n, *it->second);
    by_node.erase(it);
  }
  if (!by_node.empty())
    throw std::invalid_argument("apply_templates: no node named '" + by_node.begin()->first + "'");
  g.nodes = std::move(rw.out);
  return rw.uses;
}

}  // namespace kiln::graph
