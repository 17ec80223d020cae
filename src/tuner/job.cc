#include "tuner/job.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tuner/records.h"

namespace kiln::tuner {
namespace {

namespace fs = std::filesystem;

// "FILE:LINE:COL: why", or "FILE: why" when the place is unknown.
[[noreturn]] void fail(const std::string& file, const toml::source_region& where,
                       const std::string& why) {
  std::string at = file;
  if (where.begin.line > 0)
    at += ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
  throw std::runtime_error(at + ": " + why);
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

// Typed reads of one key's value; every error names the key and its place.
struct Reader {
  const std::string& file;
  const InputShapesCheck& check_input_shapes;

  std::string string(const std::string& key, const toml::node& n) const {
    if (!n.is_string())
      fail(file, n.source(), "'" + key + "' must be a string, not " + type_name(n));
    return n.as_string()->get();
  }
  int64_t integer(const std::string& key, const toml::node& n, int64_t min,
                  int64_t max = INT64_MAX) const {
    if (!n.is_integer())
      fail(file, n.source(), "'" + key + "' must be an integer, not " + type_name(n));
    int64_t v = n.as_integer()->get();
    if (v < min)
      fail(file, n.source(),
           "'" + key + "' must be at least " + std::to_string(min) + ", not " + std::to_string(v));
    if (v > max)
      fail(file, n.source(),
           "'" + key + "' must be at most " + std::to_string(max) + ", not " + std::to_string(v));
    return v;
  }
  double number(const std::string& key, const toml::node& n) const {
    double v = 0;
    if (n.is_integer())
      v = static_cast<double>(n.as_integer()->get());
    else if (n.is_floating_point())
      v = n.as_floating_point()->get();
    else
      fail(file, n.source(), "'" + key + "' must be a number, not " + type_name(n));
    if (!std::isfinite(v))
      fail(file, n.source(),
           "'" + key + "' must be a finite number of seconds, not " +
               (std::isnan(v) ? std::string("nan") : std::string("inf")));
    if (v < 0) fail(file, n.source(), "'" + key + "' must not be negative");
    return v;
  }
  std::vector<std::string> strings(const std::string& key, const toml::node& n) const {
    if (n.is_string()) return {n.as_string()->get()};
    if (!n.is_array())
      fail(file, n.source(), "'" + key + "' must be a string or an array of strings");
    std::vector<std::string> out;
    for (const toml::node& e : *n.as_array()) out.push_back(string(key, e));
    return out;
  }
};

// Relative paths in a job file are relative to the job file's folder, so that
// cron (which starts in $HOME) and a shell in the job's folder agree.
// A PostgreSQL URL is not a path.
std::string resolve(const std::string& file, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute() || is_postgres_url(p)) return p;
  return (fs::path(file).parent_path() / p).lexically_normal().string();
}

JobModel parse_model(const std::string& file, const toml::node& n, const Reader& r) {
  if (!n.is_table()) fail(file, n.source(), "each [[model]] must be a table");
  JobModel m;
  bool has_path = false;
  for (auto&& [k, v] : *n.as_table()) {
    std::string key(k.str());
    if (key == "name")
      m.name = r.string(key, v);
    else if (key == "path") {
      m.path = resolve(file, r.string(key, v));
      has_path = true;
    } else if (key == "input_shapes") {
      m.input_shapes = r.string(key, v);
      if (r.check_input_shapes) try {
          r.check_input_shapes(m.input_shapes);
        } catch (const std::exception& e) {
          // The frontend's message names the CLI option; here it is the key.
          std::string why = e.what();
          if (why.rfind("--input-shapes ", 0) == 0) why.erase(0, 15);
          fail(file, v.source(), "bad 'input_shapes' " + why);
        }
    } else if (key == "trials")
      m.trials = r.integer(key, v, 1);
    else if (key == "priority")
      m.priority = static_cast<int>(r.integer(key, v, 1, 1000));
    else
      fail(file, k.source(),
           "unknown key '" + key +
               "' in [[model]] (known: name, path, input_shapes, trials, priority)");
  }
  if (!has_path || m.path.empty()) fail(file, n.source(), "a [[model]] needs a 'path'");
  if (m.name.empty()) m.name = fs::path(m.path).stem().string();
  return m;
}

}  // namespace

Job parse_job(const std::string& text, const std::string& file,
              const InputShapesCheck& check_input_shapes) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    fail(file, e.source(), std::string(e.description()));
  }
  Reader r{file, check_input_shapes};
  Job job;
  job.file = file;
  std::set<std::string> names;
  for (auto&& [k, v] : root) {
    std::string key(k.str());
    if (key == "tuning_log")
      job.tuning_log = resolve(file, r.string(key, v));
    else if (key == "target")
      job.target = r.string(key, v);
    else if (key == "tuner") {
      job.tuner = r.string(key, v);
      if (job.tuner != "xgb" && job.tuner != "random" && job.tuner != "grid" && job.tuner != "ga")
        fail(file, v.source(), "'tuner' must be xgb, random, grid or ga, not '" + job.tuner + "'");
    } else if (key == "trials")
      job.trials = r.integer(key, v, 1);
    else if (key == "time_budget")
      job.time_budget_s = r.number(key, v);
    else if (key == "batch")
      job.batch = static_cast<int>(std::min<int64_t>(r.integer(key, v, 1), 4096));
    else if (key == "early_stopping")
      job.early_stopping = static_cast<int>(std::min<int64_t>(r.integer(key, v, 0), 1 << 30));
    else if (key == "report") {
      for (const std::string& p : r.strings(key, v)) job.reports.push_back(resolve(file, p));
    } else if (key == "model") {
      if (!v.is_array()) fail(file, v.source(), "'model' must be an array of tables: [[model]]");
      for (const toml::node& m : *v.as_array()) {
        job.models.push_back(parse_model(file, m, r));
        if (!names.insert(job.models.back().name).second)
          fail(file, m.source(),
               "two models are named '" + job.models.back().name + "'; give one a 'name'");
      }
    } else {
      fail(file, k.source(),
           "unknown key '" + key +
               "' (known: tuning_log, target, tuner, trials, time_budget, batch, early_stopping, "
               "report, [[model]])");
    }
  }
  if (job.models.empty()) fail(file, {}, "the job has no [[model]]");
  for (JobModel& m : job.models)
    if (m.trials == 0) m.trials = job.trials;
  return job;
}

Job parse_job_file(const std::string& path, const InputShapesCheck& check_input_shapes) {
  auto cannot = [&](const std::string& why) {
    throw std::runtime_error("cannot read job file '" + path + "': " + why);
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) cannot("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) cannot(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) cannot(std::strerror(errno));
  return parse_job(text.str(), path, check_input_shapes);
}

JobTasks make_job_tasks(const Job& job, const std::vector<JobModelWorkloads>& models) {
  std::vector<std::vector<std::string>> plain, weighted;
  for (const JobModelWorkloads& m : models) {
    plain.push_back(m.workload_keys);
    // Priority p: the model's kernels counted p times, which is what the
    // scheduler's gradient (count x latency gain) should see.
    std::vector<std::string> w;
    for (int i = 0; i < std::max(1, m.model ? m.model->priority : 1); ++i)
      w.insert(w.end(), m.workload_keys.begin(), m.workload_keys.end());
    weighted.push_back(std::move(w));
  }
  JobTasks jt;
  jt.tasks = make_tasks(plain);
  jt.sched_tasks = make_tasks(weighted);  // same keys, same first-use order
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jt.tasks.size(); ++i) index[jt.tasks[i].workload_key] = i;
  jt.trials.assign(jt.tasks.size(), 0);
  jt.models_of.assign(jt.tasks.size(), {});
  for (size_t mi = 0; mi < models.size(); ++mi) {
    int64_t trials =
        models[mi].model && models[mi].model->trials > 0 ? models[mi].model->trials : job.trials;
    for (const std::string& key : models[mi].workload_keys) {
      size_t ti = index.at(key);
      jt.trials[ti] = std::max(jt.trials[ti], trials);
      std::vector<size_t>& of = jt.models_of[ti];
      if (of.empty() || of.back() != mi) of.push_back(mi);
    }
  }
  return jt;
}

}  // namespace kiln::tuner
