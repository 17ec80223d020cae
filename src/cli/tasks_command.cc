// kiln tasks: the tuning tasks of one or more models.
#include "cli/tasks_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "codegen/target.h"
#include "driver/build.h"
#include "frontend/onnx_import.h"
#include "runtime/c_runtime_api.h"
#include "tuner/records.h"
#include "tuner/target_key.h"
#include "tuner/tasks.h"

namespace kiln::cli {
namespace {

const char* kTasksUsage =
    "usage: kiln tasks MODEL.onnx [MORE.onnx ...] [--input-shapes S] [--tuning-log DB]\n"
    "  Lists the distinct template workloads (tuning tasks) of the models, as kiln tune\n"
    "  extracts them: identical workloads of different models are one task.\n"
    "  columns: task number, template, count (kernels using it, all models),\n"
    "  GFLOP per call, weight (share of the estimated latency, every workload assumed\n"
    "  at the same GFLOP/s), tuned, trials, best GFLOP/s, workload key.\n"
    "  --input-shapes S   bind dynamic axes, e.g. \"input:[1,3,224,224]\" (every model)\n"
    "  --tuning-log DB    records database: fills the tuned, trials and best GFLOP/s columns\n"
    "                     and lists each task's failed trials by error class (compile_budget,\n"
    "                     timeout, wrong_result, ...) below the table\n";

struct TasksArgs {
  std::vector<std::string> models;
  std::string input_shapes, tuning_log;
  bool help = false;
};

TasksArgs parse_args(const std::vector<std::string>& args) {
  TasksArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(s + " needs a value\n" + kTasksUsage);
      return args[++i];
    };
    if (s == "--help" || s == "-h")
      a.help = true;
    else if (s == "--input-shapes")
      a.input_shapes = value();
    else if (s == "--tuning-log")
      a.tuning_log = value();
    else if (!s.empty() && s[0] == '-')
      throw std::invalid_argument("unknown option " + s + "\n" + kTasksUsage);
    else
      a.models.push_back(s);
  }
  if (!a.help && a.models.empty())
    throw std::invalid_argument(std::string("no model given\n") + kTasksUsage);
  return a;
}

}  // namespace

int run_tasks(const std::vector<std::string>& args) {
  TasksArgs a;
  try {
    a = parse_args(args);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "kiln tasks: %s", e.what());
    return 2;
  }
  if (a.help) {
    std::fputs(kTasksUsage, stdout);
    return 0;
  }
  frontend::InputShapes shapes = frontend::parse_input_shapes(a.input_shapes);
  std::vector<std::vector<std::string>> workloads;
  for (const std::string& m : a.models)
    workloads.push_back(driver::template_workloads(frontend::import_onnx(m, shapes),
                                                   codegen::Target::host().isa()));
  std::vector<tuner::Task> tasks = tuner::make_tasks(workloads);
  // The database opens before anything is printed: a bad --tuning-log is
  // one error, not a table header followed by one.
  std::optional<tuner::RecordDB> db;
  std::string tkey, cold_key;
  if (!a.tuning_log.empty()) {
    db = tuner::RecordDB::open(a.tuning_log, tuner::RecordDB::Mode::kMustExist);
    tuner::TargetKey k =
        tuner::TargetKey::for_target(codegen::Target::host(), kiln_get_num_threads());
    tkey = k.key();
    cold_key = k.isolated(true).key();
  }

  int kernels = 0;
  for (const auto& t : tasks) kernels += t.count;
  std::printf("%zu task%s from %zu model%s (%d template kernel%s)\n", tasks.size(),
              tasks.size() == 1 ? "" : "s", a.models.size(), a.models.size() == 1 ? "" : "s",
              kernels, kernels == 1 ? "" : "s");
  if (tasks.empty()) return 0;
  size_t tw = std::string("template").size();
  for (const auto& t : tasks) tw = std::max(tw, t.template_name.size());
  const int w = static_cast<int>(tw);
  std::printf("%3s  %-*s %5s %11s %7s %6s %7s %13s  %s\n", "#", w, "template", "count",
              "GFLOP/call", "weight", "tuned", "trials", "best GFLOP/s", "workload");
  // Per task with failed trials: how many of each error class
  // (compile_budget, timeout, ...), printed below the table.
  std::vector<std::string> failures;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const tuner::Task& t = tasks[i];
    std::string tuned = "-", trials = "-", best = "-";
    if (db) {
      // A cold-weight run's records (kiln tune --cold-weights) where there are any.
      std::string key = db->records(t.workload_key, cold_key).empty() ? tkey : cold_key;
      std::vector<tuner::Record> rs = db->records(t.workload_key, key);
      std::map<std::string, int> by_class;
      for (const tuner::Record& r : rs)
        if (r.error != tuner::ErrorClass::kOk) ++by_class[tuner::to_string(r.error)];
      std::string line;
      for (const auto& [name, n] : by_class)
        line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + name;
      if (!line.empty()) failures.push_back("  task " + std::to_string(i) + ": " + line);
      std::optional<tuner::Record> b = db->best(t.workload_key, key);
      tuned = b ? "yes" : "no";
      trials = std::to_string(rs.size());
      if (b) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", b->gflops);
        best = buf;
      }
    }
    std::printf("%3zu  %-*s %5d %11.4f %6.1f%% %6s %7s %13s  %s\n", i, w, t.template_name.c_str(),
                t.count, t.flops / 1e9, 100 * t.weight, tuned.c_str(), trials.c_str(), best.c_str(),
                t.workload_key.c_str());
  }
  if (!failures.empty()) {
    std::printf("failed trials:\n");
    for (const std::string& f : failures) std::printf("%s\n", f.c_str());
  }
  return 0;
}

}  // namespace kiln::cli
