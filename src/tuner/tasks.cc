#include "tuner/tasks.h"

#include <algorithm>
#include <limits>
#include <map>

#include "ops/op_template.h"

namespace kiln::tuner {

std::vector<Task> make_tasks(const std::vector<std::vector<std::string>>& models) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> by_key;
  std::vector<std::map<size_t, int>> counts_in_model;  // per model: task -> kernels
  for (const std::vector<std::string>& keys : models) {
    std::map<size_t, int>& in_model = counts_in_model.emplace_back();
    for (const std::string& key : keys) {
      auto [it, inserted] = by_key.emplace(key, tasks.size());
      if (inserted) {
        ops::Workload w = ops::Workload::parse(key);
        const ops::OpTemplate& t = ops::get_template(w.template_name);
        tasks.push_back({key, w.template_name, 0, t.flops(w), 0.0});
      }
      ++tasks[it->second].count;
      ++in_model[it->second];
    }
  }
  double total = 0;
  for (const Task& t : tasks) total += t.count * t.flops;
  if (total > 0)
    for (Task& t : tasks) t.weight = t.count * t.flops / total;
  std::vector<int> best_rank(tasks.size(), std::numeric_limits<int>::max());
  for (const std::map<size_t, int>& in_model : counts_in_model) {
    std::vector<std::pair<size_t, double>> by_weight;  // task, count x flops in this model
    for (const auto& [i, n] : in_model) by_weight.emplace_back(i, n * tasks[i].flops);
    std::stable_sort(by_weight.begin(), by_weight.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t r = 0; r < by_weight.size(); ++r)
      best_rank[by_weight[r].first] = std::min(best_rank[by_weight[r].first], static_cast<int>(r));
  }
  for (size_t i = 0; i < tasks.size(); ++i) tasks[i].model_rank = best_rank[i];
  return tasks;
}

std::vector<std::vector<std::string>> node_workloads(const std::vector<ModelNodes>& models) {
  std::vector<std::vector<std::string>> out;
  for (const ModelNodes& nodes : models) {
    out.emplace_back();
    for (const std::vector<std::string>& keys : nodes)
      out.back().insert(out.back().end(), keys.begin(), keys.end());
  }
  return out;
}

std::vector<std::vector<std::string>> alternative_sets(const std::vector<ModelNodes>& models) {
  std::vector<std::vector<std::string>> out;
  for (const ModelNodes& nodes : models)
    for (const std::vector<std::string>& keys : nodes)
      if (keys.size() > 1 && std::find(out.begin(), out.end(), keys) == out.end())
        out.push_back(keys);
  return out;
}

int64_t kernel_weight_bytes(const ModelNodes& nodes, const Isa& isa) {
  int64_t total = 0;
  for (const std::vector<std::string>& keys : nodes) {
    int64_t largest = 0;
    for (const std::string& key : keys) {
      ops::Workload w = ops::Workload::parse(key);
      const ops::OpTemplate& t = ops::get_template(w.template_name);
      std::vector<std::vector<int64_t>> shapes = t.input_shapes(w, t.fallback(w, isa));
      std::vector<ir::DataType> types = t.input_dtypes(w);
      int64_t bytes = 0;
      for (size_t i = 1; i < shapes.size() && i < types.size(); ++i) {
        int64_t n = types[i].bytes();
        for (int64_t d : shapes[i]) n *= d;
        bytes += n;
      }
      largest = std::max(largest, bytes);
    }
    total += largest;
  }
  return total;
}

}  // namespace kiln::tuner
