#include "graph/passes/select_templates.h"

#include <algorithm>

#include "graph/passes/strategy.h"

namespace kiln::graph {

namespace {

// A node with a zero-sized input or output (MatMul(x[2, 0], w[0, 4])) is no
// template workload: the matchers divide by the extents, and the generic
// kernel computes the ONNX result (an empty sum is 0) as it is.
bool has_empty_tensor(const Graph& g, const Node& n) {
  for (const auto* list : {&n.inputs, &n.outputs})
    for (const std::string& v : *list) {
      const TensorType* t = v.empty() ? nullptr : g.type_of(v);
      if (t && std::find(t->shape.begin(), t->shape.end(), 0) != t->shape.end()) return true;
    }
  return false;
}

}  // namespace

std::vector<TemplateSelection> select_templates(const Graph& g, const Isa& isa,
                                                Precision precision) {
  std::vector<TemplateSelection> out;
  for (const Node& n : g.nodes) {
    if (has_empty_tensor(g, n)) continue;
    std::optional<TemplateSelection> s;
    Precision first = Precision::kFp32;  // the precision of the row that took the node
    for (const Strategy& row : strategies()) {
      if (n.op_type != row.op_type || (s && !row.alternative)) continue;
      if (row.precision == Precision::kBf16 && precision != Precision::kBf16) continue;
      // An alternative joins only a node of its own precision (no float
      // Winograd beside a bf16 convolution).
      if (s && row.precision != first) continue;
      std::optional<WorkloadParams> params = row.match(g, n, isa);
      if (!params) continue;
      ops::Workload w{row.template_name, std::move(*params), row.dtype};
      if (!s) {
        s = TemplateSelection{n.name, row.template_name, w, {}, 0, {}};
        first = row.precision;
      }
      if (row.untuned_default && (!row.untuned_default_if || row.untuned_default_if(w, isa)))
        s->untuned_default = s->implementations.size();
      s->implementations.push_back(std::move(w));
    }
    if (!s) continue;
    out.push_back(std::move(*s));
  }
  choose_implementations(out, {});
  return out;
}

void choose_implementations(std::vector<TemplateSelection>& selected,
                            const std::map<std::string, double>& gflops) {
  for (TemplateSelection& s : selected) {
    const ops::Workload* best = &s.implementations.at(s.untuned_default);
    double best_gflops = 0;
    for (const ops::Workload& w : s.implementations) {
      auto it = gflops.find(w.key());
      if (it != gflops.end() && it->second > best_gflops) {
        best = &w;
        best_gflops = it->second;
      }
    }
    s.workload = *best;
    s.template_name = best->template_name;
  }
}

}  // namespace kiln::graph
