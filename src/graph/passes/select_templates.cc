#include "graph/passes/select_templates.h"

#include "graph/passes/strategy.h"

namespace kiln::graph {

std::vector<TemplateSelection> select_templates(const Graph& g, const Isa& isa) {
  std::vector<TemplateSelection> out;
  for (const Node& n : g.nodes)
    for (const Strategy& row : strategies()) {
      if (n.op_type != row.op_type) continue;
      std::optional<WorkloadParams> params = row.match(g, n, isa);
      if (!params) continue;
      TemplateSelection s{n.name, row.template_name, {}};
      s.workload.template_name = row.template_name;
      s.workload.params = std::move(*params);
      out.push_back(std::move(s));
      break;  // the first row that matches wins
    }
  return out;
}

}  // namespace kiln::graph
