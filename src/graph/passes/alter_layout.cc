#include "graph/passes/alter_layout.h"

#include "graph/passes/propagate_layout.h"
#include "graph/passes/select_templates.h"

namespace kiln::graph {

std::vector<TemplateUse> alter_layout(Graph& g, const std::map<std::string, std::string>& configs) {
  std::vector<TemplateUse> uses = apply_templates(g, select_templates(g), configs);
  propagate_layout(g);
  return uses;
}

}  // namespace kiln::graph
