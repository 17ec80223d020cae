#include "graph/passes/choose_layouts.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

#include "graph/op_registry.h"
#include "graph/passes/strategy.h"
#include "ops/op_template.h"

namespace kiln::graph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- The solver ----------------------------------------------------------

// The blocks a class may take: NCHW when fixed, else the blocks every
// convolution writing into it offers (they must agree), else NCHW.
std::vector<std::vector<int64_t>> class_domains(const LayoutProblem& p) {
  size_t n = p.fixed.size();
  std::vector<std::vector<int64_t>> dom(n);
  std::vector<bool> seen(n, false);
  for (const LayoutConv& c : p.convs) {
    if (p.fixed[c.out_class]) continue;
    std::set<int64_t> offered;
    for (const LayoutOption& o : c.options) offered.insert(o.out_block);
    std::vector<int64_t> v(offered.begin(), offered.end());
    if (!seen[c.out_class]) {
      dom[c.out_class] = v;
      seen[c.out_class] = true;
      continue;
    }
    std::vector<int64_t> both;
    std::set_intersection(dom[c.out_class].begin(), dom[c.out_class].end(), v.begin(), v.end(),
                          std::back_inserter(both));
    dom[c.out_class] = both;
  }
  // A join (several writers) must agree when its writers share a block:
  // letting it fall back to NCHW costs more than the transforms (the residual
  // Add then leaves its convolution's epilogue for a kernel of its own, with
  // a transform; measured on ResNet-18, bench/models/results/layout-dp-*).
  // Only a join whose writers share no block is NCHW, each writer paying its
  // transform back. A free class nobody writes is NCHW.
  for (size_t k = 0; k < n; ++k)
    if (p.fixed[k] || !seen[k] || dom[k].empty()) dom[k] = {0};
  return dom;
}

double transform(const LayoutProblem& p, const LayoutConv& c, int64_t from, int64_t to) {
  return from == to ? 0.0 : p.transform_ms(c.in_shape, from, to);
}

// The transform of c's output back to NCHW when its class is NCHW.
double out_transform(const LayoutProblem& p, const LayoutConv& c, int64_t out_block) {
  if (out_block == 0 || c.out_shape.empty()) return 0.0;
  return p.transform_ms(c.out_shape, out_block, 0);
}

// Conv c's best option given its input and output classes' blocks (out 0:
// NCHW, any option, its output transformed back): the option index, or
// options.size() when none offers `out`.
size_t best_option(const LayoutProblem& p, const LayoutConv& c, int64_t in, int64_t out,
                   double* cost) {
  size_t best = c.options.size();
  *cost = kInf;
  for (size_t i = 0; i < c.options.size(); ++i) {
    const LayoutOption& o = c.options[i];
    if (out != 0 && o.out_block != out) continue;
    double t = o.ms + transform(p, c, in, o.in_block) +
               (out == 0 ? out_transform(p, c, o.out_block) : 0.0);
    if (t < *cost) {
      *cost = t;
      best = i;
    }
  }
  return best;
}

// A table over a few class variables (min-sum factor), row-major in `vars`.
struct Factor {
  std::vector<int> vars;
  std::vector<double> table;
};

// Index of an assignment (values per variable of `vars`, indices into the
// domains) in a row-major table.
size_t index_of(const std::vector<int>& vars, const std::vector<size_t>& assign,
                const std::vector<std::vector<int64_t>>& dom) {
  size_t idx = 0;
  for (int v : vars) idx = idx * dom[v].size() + assign[v];
  return idx;
}

// Exact min-sum variable elimination; false when a table would exceed
// max_table (then `choice` is untouched).
bool eliminate(const LayoutProblem& p, const std::vector<std::vector<int64_t>>& dom,
               std::vector<size_t>* block_index) {
  size_t n = dom.size();
  std::vector<Factor> factors;
  for (const LayoutConv& c : p.convs) {
    Factor f;
    if (!p.fixed[c.in_class]) f.vars.push_back(c.in_class);
    if (!p.fixed[c.out_class] && c.out_class != c.in_class) f.vars.push_back(c.out_class);
    std::sort(f.vars.begin(), f.vars.end());
    size_t size = 1;
    for (int v : f.vars) size *= dom[v].size();
    f.table.assign(size, kInf);
    std::vector<size_t> assign(n, 0);
    for (size_t idx = 0; idx < size; ++idx) {
      size_t rest = idx;
      for (size_t k = f.vars.size(); k-- > 0;) {
        assign[f.vars[k]] = rest % dom[f.vars[k]].size();
        rest /= dom[f.vars[k]].size();
      }
      int64_t in = dom[c.in_class][p.fixed[c.in_class] ? 0 : assign[c.in_class]];
      int64_t out = dom[c.out_class][p.fixed[c.out_class] ? 0 : assign[c.out_class]];
      best_option(p, c, in, out, &f.table[idx]);
    }
    factors.push_back(std::move(f));
  }

  // Eliminate free classes, smallest resulting table first; keep each
  // combined table (with the eliminated variable) to read back its argmin.
  std::vector<bool> done(n, false);
  std::vector<std::pair<int, Factor>> trail;  // variable, combined factor over it and the rest
  for (size_t k = 0; k < n; ++k)
    if (p.fixed[k]) done[k] = true;
  for (;;) {
    int pick = -1;
    size_t pick_size = 0;
    std::vector<int> pick_scope;
    for (size_t v = 0; v < n; ++v) {
      if (done[v]) continue;
      std::set<int> scope;
      for (const Factor& f : factors)
        if (std::count(f.vars.begin(), f.vars.end(), static_cast<int>(v)))
          scope.insert(f.vars.begin(), f.vars.end());
      scope.insert(static_cast<int>(v));
      size_t size = 1;
      for (int s : scope) size *= dom[s].size();
      if (pick < 0 || size < pick_size) {
        pick = static_cast<int>(v);
        pick_size = size;
        pick_scope.assign(scope.begin(), scope.end());
      }
    }
    if (pick < 0) break;
    if (pick_size > p.max_table) return false;
    // Combine the factors over `pick`.
    Factor combined{pick_scope, std::vector<double>(pick_size, 0.0)};
    std::vector<Factor> rest;
    std::vector<Factor> over;
    for (Factor& f : factors)
      (std::count(f.vars.begin(), f.vars.end(), pick) ? over : rest).push_back(std::move(f));
    std::vector<size_t> assign(n, 0);
    for (size_t idx = 0; idx < pick_size; ++idx) {
      size_t r = idx;
      for (size_t k = pick_scope.size(); k-- > 0;) {
        assign[pick_scope[k]] = r % dom[pick_scope[k]].size();
        r /= dom[pick_scope[k]].size();
      }
      for (const Factor& f : over) combined.table[idx] += f.table[index_of(f.vars, assign, dom)];
    }
    // Minimise `pick` out.
    Factor reduced;
    for (int v : pick_scope)
      if (v != pick) reduced.vars.push_back(v);
    size_t rsize = 1;
    for (int v : reduced.vars) rsize *= dom[v].size();
    reduced.table.assign(rsize, kInf);
    for (size_t idx = 0; idx < pick_size; ++idx) {
      size_t r = idx;
      for (size_t k = pick_scope.size(); k-- > 0;) {
        assign[pick_scope[k]] = r % dom[pick_scope[k]].size();
        r /= dom[pick_scope[k]].size();
      }
      double& slot = reduced.table[index_of(reduced.vars, assign, dom)];
      slot = std::min(slot, combined.table[idx]);
    }
    rest.push_back(std::move(reduced));
    factors = std::move(rest);
    trail.emplace_back(pick, std::move(combined));
    done[pick] = true;
  }
  // Back-substitute in reverse elimination order: each variable's later
  // neighbours are assigned by then.
  std::vector<size_t> assign(n, 0);
  for (size_t t = trail.size(); t-- > 0;) {
    int v = trail[t].first;
    const Factor& f = trail[t].second;
    double best = kInf;
    size_t best_value = 0;
    for (size_t val = 0; val < dom[v].size(); ++val) {
      assign[v] = val;
      double c = f.table[index_of(f.vars, assign, dom)];
      if (c < best) {
        best = c;
        best_value = val;
      }
    }
    assign[v] = best_value;
  }
  *block_index = assign;
  return true;
}

// Total cost when every class has the block of `assign` (indices into the
// domains), each conv taking its best option then.
double cost_of_blocks(const LayoutProblem& p, const std::vector<std::vector<int64_t>>& dom,
                      const std::vector<size_t>& assign) {
  double total = 0;
  for (const LayoutConv& c : p.convs) {
    double cost;
    best_option(p, c, dom[c.in_class][assign[c.in_class]], dom[c.out_class][assign[c.out_class]],
                &cost);
    total += cost;
  }
  return total;
}

// The fallback: coordinate descent over class blocks, from the blocks of
// each class's writers' fastest options (the most common where they differ
// and that block is allowed), until no single class change helps.
std::vector<size_t> greedy(const LayoutProblem& p, const std::vector<std::vector<int64_t>>& dom) {
  size_t n = dom.size();
  std::vector<size_t> assign(n, 0);
  std::vector<std::map<int64_t, int>> votes(n);
  for (const LayoutConv& c : p.convs) {
    auto fastest =
        std::min_element(c.options.begin(), c.options.end(),
                         [](const LayoutOption& a, const LayoutOption& b) { return a.ms < b.ms; });
    ++votes[c.out_class][fastest->out_block];
  }
  for (size_t k = 0; k < n; ++k) {
    int best_votes = -1;
    for (size_t i = 0; i < dom[k].size(); ++i) {
      auto it = votes[k].find(dom[k][i]);
      int v = it == votes[k].end() ? 0 : it->second;
      if (v > best_votes) {
        best_votes = v;
        assign[k] = i;
      }
    }
  }
  double cost = cost_of_blocks(p, dom, assign);
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t k = 0; k < n; ++k)
      for (size_t i = 0; i < dom[k].size(); ++i) {
        size_t old = assign[k];
        assign[k] = i;
        double c = cost_of_blocks(p, dom, assign);
        if (c < cost) {
          cost = c;
          improved = true;
        } else {
          assign[k] = old;
        }
      }
  }
  return assign;
}

}  // namespace

double layout_cost(const LayoutProblem& p, const std::vector<size_t>& choice) {
  // Each free class: its writers' block when they agree, else NCHW.
  std::vector<int64_t> block(p.fixed.size(), 0);
  std::vector<int> state(p.fixed.size(), 0);  // 0 unset, 1 agreed, 2 disagree
  for (size_t i = 0; i < p.convs.size(); ++i) {
    const LayoutConv& c = p.convs[i];
    if (p.fixed[c.out_class]) continue;
    int64_t b = c.options.at(choice.at(i)).out_block;
    int& st = state[c.out_class];
    if (st == 0) {
      block[c.out_class] = b;
      st = 1;
    } else if (st == 1 && block[c.out_class] != b) {
      st = 2;
    }
  }
  for (size_t k = 0; k < block.size(); ++k)
    if (state[k] == 2) block[k] = 0;
  double total = 0;
  for (size_t i = 0; i < p.convs.size(); ++i) {
    const LayoutConv& c = p.convs[i];
    const LayoutOption& o = c.options[choice[i]];
    total += o.ms + transform(p, c, block[c.in_class], o.in_block);
    if (block[c.out_class] == 0) total += out_transform(p, c, o.out_block);
  }
  return total;
}

LayoutSolution solve_layouts(const LayoutProblem& p) {
  for (const LayoutConv& c : p.convs) {
    if (c.options.empty())
      throw std::invalid_argument("choose_layouts: convolution '" + c.name + "' has no options");
    if (c.in_class < 0 || c.out_class < 0 || static_cast<size_t>(c.in_class) >= p.fixed.size() ||
        static_cast<size_t>(c.out_class) >= p.fixed.size())
      throw std::invalid_argument("choose_layouts: convolution '" + c.name +
                                  "' names a class out of range");
  }
  const LayoutProblem& q = p;
  std::vector<std::vector<int64_t>> dom = class_domains(q);
  LayoutSolution s;
  std::vector<size_t> assign;
  if (!eliminate(q, dom, &assign)) {
    assign = greedy(q, dom);
    s.exact = false;
  }
  s.block.resize(dom.size());
  for (size_t k = 0; k < dom.size(); ++k) s.block[k] = dom[k][assign[k]];
  for (const LayoutConv& c : q.convs) {
    double cost;
    s.choice.push_back(best_option(q, c, s.block[c.in_class], s.block[c.out_class], &cost));
  }
  s.total_ms = layout_cost(q, s.choice);
  return s;
}

// ---- The problem of a graph ----------------------------------------------

namespace {

// Union-find over value names.
struct Classes {
  std::map<std::string, std::string> parent;
  std::string find(const std::string& v) {
    auto it = parent.find(v);
    if (it == parent.end()) {
      parent[v] = v;
      return v;
    }
    if (it->second == v) return v;
    std::string root = find(it->second);
    parent[v] = root;
    return root;
  }
  void join(const std::string& a, const std::string& b) {
    std::string ra = find(a), rb = find(b);
    if (ra != rb) parent[ra] = rb;
  }
};

bool is_4d_f32(const TensorType* t) { return t && t->shape.size() == 4 && t->dtype == "float32"; }

// The activations a node passes its layout through to its output, as
// propagate_layout does (elementwise / broadcast operators with inputs of
// the output's shape, channel Concats, pools); empty when it does not.
std::vector<std::string> pass_through_inputs(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !is_4d_f32(g.type_of(n.outputs[0]))) return {};
  std::vector<std::string> acts;
  for (const std::string& in : n.inputs)
    if (!in.empty() && !g.initializers.count(in)) acts.push_back(in);
  static const std::set<std::string> kPools = {"MaxPool", "AveragePool", "GlobalAveragePool",
                                               "GlobalMaxPool"};
  if (kPools.count(n.op_type)) return acts.size() == 1 ? acts : std::vector<std::string>{};
  if (n.op_type == "Concat") {
    int64_t axis = n.attr<int64_t>("axis").value_or(0);
    return axis == 1 || axis == -3 ? acts : std::vector<std::string>{};
  }
  const OpDef* def = find_op(n.op_type);
  if (!def || (def->pattern != OpPattern::kElemWise && def->pattern != OpPattern::kBroadcast))
    return {};
  for (const std::string& in : acts)
    if (!g.type_of(in) || g.type_of(in)->shape != g.type_of(n.outputs[0])->shape) return {};
  return acts;
}

// Whether a selection is rewritten as a float blocked convolution.
bool blocked_conv(const Graph& g, const TemplateSelection& s) {
  const Node* n = nullptr;
  for (const Node& m : g.nodes)
    if (m.name == s.node) n = &m;
  if (!n) return false;
  for (const ops::Workload& w : s.implementations) {
    const Strategy* row = find_strategy(n->op_type, w.template_name);
    if (!row || row->rewrite != Rewrite::kBlockedConv ||
        !ops::get_template(w.template_name).channel_blocked())
      return false;
  }
  return !s.implementations.empty() && is_4d_f32(g.type_of(n->inputs.at(0)));
}

}  // namespace

LayoutChoice choose_layouts(
    const Graph& g, const std::vector<TemplateSelection>& selected,
    const std::map<std::string, std::vector<ConfigCandidate>>& candidates,
    const std::map<std::string, std::string>& baseline,
    const std::function<double(const std::vector<int64_t>&, int64_t, int64_t)>& transform_ms) {
  LayoutChoice out;
  std::map<std::string, const TemplateSelection*> conv_sel;
  for (const TemplateSelection& s : selected)
    if (blocked_conv(g, s)) conv_sel[s.node] = &s;
  if (conv_sel.empty()) return out;

  // Classes of values, and which are fixed (see the header).
  Classes cls;
  std::set<std::string> fixed_values;
  for (const ValueInfo& in : g.inputs) fixed_values.insert(in.name);
  for (const Node& n : g.nodes) {
    if (conv_sel.count(n.name)) {
      cls.find(n.inputs.at(0));
      cls.find(n.outputs.at(0));
      continue;
    }
    std::vector<std::string> acts = pass_through_inputs(g, n);
    if (acts.empty()) {
      for (const std::string& o : n.outputs) fixed_values.insert(o);
      continue;
    }
    for (const std::string& a : acts) cls.join(a, n.outputs[0]);
  }
  std::map<std::string, int> class_index;
  LayoutProblem p;
  p.transform_ms = transform_ms;
  auto index = [&](const std::string& value) {
    std::string root = cls.find(value);
    auto [it, fresh] = class_index.emplace(root, static_cast<int>(p.fixed.size()));
    if (fresh) p.fixed.push_back(false);
    return it->second;
  };
  for (const std::string& v : fixed_values) {
    int k = index(v);
    p.fixed[k] = true;
  }

  // Options per conv: each implementation's candidates, else its fallback.
  struct Source {
    const ops::Workload* workload;
    std::string config_json;  // "" = the template's fallback
  };
  std::vector<std::vector<Source>> sources;
  std::vector<std::string> node_order;
  for (const Node& n : g.nodes) {
    auto it = conv_sel.find(n.name);
    if (it == conv_sel.end()) continue;
    const TemplateSelection& s = *it->second;
    LayoutConv c;
    c.name = n.name;
    c.in_class = index(n.inputs[0]);
    c.out_class = index(n.outputs[0]);
    c.in_shape = g.type_of(n.inputs[0])->shape;
    c.out_shape = g.type_of(n.outputs[0])->shape;
    std::vector<Source> src;
    for (const ops::Workload& w : s.implementations) {
      auto cand = candidates.find(w.key());
      if (cand == candidates.end()) continue;
      for (const ConfigCandidate& k : cand->second) {
        c.options.push_back({k.ms, k.in_block, k.out_block});
        src.push_back({&w, k.config_json});
      }
    }
    if (c.options.empty()) {
      // No records: the node runs the build's choice (its untuned default's
      // fallback); only its blocks matter here.
      const ops::Workload& w = s.workload;
      auto [ib, ob] = ops::fallback_layout_blocks(ops::get_template(w.template_name), w);
      c.options.push_back({0.0, ib, ob});
      src.push_back({&w, ""});
    }
    p.convs.push_back(std::move(c));
    sources.push_back(std::move(src));
    node_order.push_back(n.name);
  }
  LayoutSolution sol = solve_layouts(p);
  out.exact = sol.exact;
  out.predicted_ms = sol.total_ms;
  out.convs = p.convs.size();

  // The baseline: per node, the option that is its per-workload-best config.
  std::vector<size_t> base(p.convs.size(), 0);
  for (size_t i = 0; i < p.convs.size(); ++i) {
    const TemplateSelection& s = *conv_sel.at(node_order[i]);
    size_t fastest = 0;
    bool found = false;
    for (size_t k = 0; k < sources[i].size(); ++k) {
      if (p.convs[i].options[k].ms < p.convs[i].options[fastest].ms) fastest = k;
      auto b = baseline.find(sources[i][k].workload->key());
      if (!found && sources[i][k].workload->key() == s.workload.key() && b != baseline.end() &&
          b->second == sources[i][k].config_json) {
        base[i] = k;
        found = true;
      }
    }
    if (!found) base[i] = fastest;
  }
  out.baseline_ms = layout_cost(p, base);

  for (size_t i = 0; i < p.convs.size(); ++i) {
    const LayoutOption& chosen = p.convs[i].options[sol.choice[i]];
    const LayoutOption& was = p.convs[i].options[base[i]];
    if (chosen.in_block != was.in_block || chosen.out_block != was.out_block) ++out.changed;
    const Source& src = sources[i][sol.choice[i]];
    if (!src.config_json.empty()) out.configs[node_order[i]] = {*src.workload, src.config_json};
  }
  return out;
}

}  // namespace kiln::graph
