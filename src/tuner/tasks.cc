#include "tuner/tasks.h"

#include <map>

#include "ops/op_template.h"

namespace kiln::tuner {

std::vector<Task> make_tasks(const std::vector<std::vector<std::string>>& models) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> by_key;
  for (const std::vector<std::string>& keys : models) {
    for (const std::string& key : keys) {
      auto [it, inserted] = by_key.emplace(key, tasks.size());
      if (inserted) {
        ops::Workload w = ops::Workload::parse(key);
        const ops::OpTemplate& t = ops::get_template(w.template_name);
        tasks.push_back({key, w.template_name, 0, t.flops(w), 0.0});
      }
      ++tasks[it->second].count;
    }
  }
  double total = 0;
  for (const Task& t : tasks) total += t.count * t.flops;
  if (total > 0)
    for (Task& t : tasks) t.weight = t.count * t.flops / total;
  return tasks;
}

}  // namespace kiln::tuner
