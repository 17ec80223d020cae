#include "driver/tasks.h"

#include <map>

#include "graph/passes/alter_layout.h"
#include "graph/passes/pipeline.h"
#include "ops/op_template.h"

namespace kiln::driver {

std::vector<tuner::Task> extract_tasks(const std::vector<graph::Graph>& models) {
  std::vector<tuner::Task> tasks;
  std::map<std::string, size_t> by_key;
  for (graph::Graph g : models) {  // a copy: the passes rewrite it
    graph::passes::run_default_passes(g);
    // No configs: every workload gets its fallback, which is all that the
    // layouts (hence the keys) of the rest of the graph may depend on.
    for (const graph::TemplateUse& use : graph::alter_layout(g, {})) {
      auto [it, inserted] = by_key.emplace(use.workload, tasks.size());
      if (inserted) {
        const ops::OpTemplate& t = ops::get_template(use.template_name);
        tasks.push_back(
            {use.workload, use.template_name, 0, t.flops(ops::Workload::parse(use.workload)), 0.0});
      }
      ++tasks[it->second].count;
    }
  }
  double total = 0;
  for (const tuner::Task& t : tasks) total += t.count * t.flops;
  if (total > 0)
    for (tuner::Task& t : tasks) t.weight = t.count * t.flops / total;
  return tasks;
}

}  // namespace kiln::driver
