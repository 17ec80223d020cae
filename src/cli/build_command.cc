// kiln build: ONNX model -> package (docs/package-format.md).
#include "cli/build_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "driver/build_module.h"
#include "driver/package_writer.h"
#include "frontend/onnx_import.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "tuner/records.h"
#include "tuner/target_key.h"

namespace kiln::cli {
namespace {

const char* kBuildUsage =
    "usage: kiln build MODEL.onnx [-o OUT] [--target TARGET] [--input-shapes SHAPES]\n"
    "                  [--output-format tar|so] [--config FILE] [--tuning-log DB "
    "[--require-tuned]]\n"
    "  -o OUT             package to write (default: MODEL.tar, or MODEL.so with --output-format "
    "so)\n"
    "  --target TARGET    'llvm -mcpu=... -mattr=...' (default: this machine)\n"
    "  --input-shapes S   bind dynamic axes, e.g. \"input:[1,3,224,224],mask:[1,128]\"\n"
    "  --output-format F  tar (mod.so + mod.json + mod.params) or so (one self-contained library)\n"
    "  --config FILE      JSON lines {\"workload\": KEY, \"config\": {...}} applied by workload "
    "key\n"
    "  --tuning-log DB    use the best verified record per workload from kiln tune's database\n"
    "  --require-tuned    fail (writing nothing) when a workload has no record\n";

struct BuildArgs {
  std::string model, output, target, input_shapes, format = "tar", config_file, tuning_log;
  bool require_tuned = false;
};

BuildArgs parse_args(const std::vector<std::string>& args) {
  BuildArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(s + " needs a value\n" + kBuildUsage);
      return args[++i];
    };
    if (s == "-o" || s == "--output")
      a.output = value();
    else if (s == "--target")
      a.target = value();
    else if (s == "--input-shapes")
      a.input_shapes = value();
    else if (s == "--output-format")
      a.format = value();
    else if (s == "--config")
      a.config_file = value();
    else if (s == "--tuning-log")
      a.tuning_log = value();
    else if (s == "--require-tuned")
      a.require_tuned = true;
    else if (!s.empty() && s[0] == '-')
      throw std::invalid_argument("unknown option " + s + "\n" + kBuildUsage);
    else if (a.model.empty())
      a.model = s;
    else
      throw std::invalid_argument("more than one model given\n" + std::string(kBuildUsage));
  }
  if (a.model.empty()) throw std::invalid_argument(std::string("no model given\n") + kBuildUsage);
  if (a.require_tuned && a.tuning_log.empty())
    throw std::invalid_argument("--require-tuned needs --tuning-log DB");
  if (a.format != "tar" && a.format != "so")
    throw std::invalid_argument("--output-format must be tar or so, not '" + a.format + "'");
  if (a.output.empty()) {
    std::string stem = a.model;
    if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".onnx") stem.resize(stem.size() - 5);
    a.output = stem + (a.format == "so" ? ".so" : ".tar");
  }
  return a;
}

// --config FILE: one JSON object per line, {"workload": KEY, "config": CONFIG}.
std::map<std::string, std::string> read_configs(const std::string& path) {
  std::map<std::string, std::string> configs;
  if (path.empty()) return configs;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read config file '" + path + "'");
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      configs[j.at("workload").get<std::string>()] = j.at("config").dump();
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": bad config line: " + e.what());
    }
  }
  return configs;
}

// The fastest verified record of a workload whose channel blocks match the
// fallback's (every convolution then agrees on one layout with its
// neighbours), else the fastest of all.
std::optional<std::string> best_layout_consistent(const tuner::RecordDB& db,
                                                  const std::string& workload,
                                                  const std::string& target_key) {
  std::optional<tuner::Record> best = db.best(workload, target_key);
  if (!best) return std::nullopt;
  try {
    ops::Workload w = ops::Workload::parse(workload);
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    schedule::ConfigSpace space = t.space(w);
    auto want = ops::layout_blocks(t, w, t.fallback(w));
    if (want == std::pair<int64_t, int64_t>{0, 0}) return best->config_json;
    const tuner::Record* pick = nullptr;
    std::vector<tuner::Record> records = db.records(workload, target_key);
    for (const tuner::Record& r : records) {
      if (r.error != tuner::ErrorClass::kOk || (pick && r.mean_ms() >= pick->mean_ms())) continue;
      if (ops::layout_blocks(t, w, schedule::Config::from_json(space, r.config_json)) == want)
        pick = &r;
    }
    return pick ? pick->config_json : best->config_json;
  } catch (const std::exception&) {
    return best->config_json;  // a record of an older space: the build checks it
  }
}

// The best verified record of every workload tuned for this target and
// thread count. Says so when the database only holds other targets' records.
std::map<std::string, std::string> read_tuning_log(const std::string& path,
                                                   const codegen::Target& target) {
  tuner::RecordDB db = tuner::RecordDB::open(path, tuner::RecordDB::Mode::kMustExist);
  tuner::TargetKey key = tuner::TargetKey::for_target(target, kiln_get_num_threads());
  std::map<std::string, std::string> configs;
  for (const std::string& w : db.workloads(key.key()))
    if (std::optional<std::string> cfg = best_layout_consistent(db, w, key.key()))
      configs[w] = *cfg;
  if (configs.empty() && db.count() > 0)
    std::printf("note: %s holds %zu records, none for this target (%s)\n", path.c_str(), db.count(),
                key.key().c_str());
  return configs;
}

}  // namespace

int run_build(const std::vector<std::string>& args) {
  BuildArgs a = parse_args(args);
  auto start = std::chrono::steady_clock::now();
  driver::BuildOptions options;
  if (!a.target.empty()) options.target = codegen::Target::parse(a.target);
  std::map<std::string, std::string> tuned;
  if (!a.tuning_log.empty()) tuned = read_tuning_log(a.tuning_log, options.target);
  options.configs = tuned;
  for (auto& [key, cfg] : read_configs(a.config_file)) options.configs[key] = cfg;  // --config wins
  driver::check_output_path(a.output);  // before the slow part

  graph::Graph g = frontend::import_onnx(a.model, frontend::parse_input_shapes(a.input_shapes));
  driver::BuiltModule m = driver::build_module(std::move(g), options);
  if (a.require_tuned) {
    std::string missing;
    size_t n = 0;
    for (const auto& w : m.workloads)
      if (!w.configured && n++ < 20) missing += "\n  " + w.key;
    if (n)
      throw std::runtime_error(std::to_string(n) + " of " + std::to_string(m.workloads.size()) +
                               " workloads have no record in " + a.tuning_log +
                               " (--require-tuned):" + missing);
  }
  driver::write_package(
      m, options.target, a.output,
      a.format == "so" ? driver::PackageFormat::kSharedLibrary : driver::PackageFormat::kTar);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t templated = 0, configured = 0;
  for (const auto& w : m.workloads) {
    templated += static_cast<size_t>(w.count);
    if (w.configured) ++configured;
  }
  std::printf("kiln build: %s -> %s (%zu kernels: %zu templated, %zu generic; %.1f s)\n",
              a.model.c_str(), a.output.c_str(), m.funcs.size(), templated, m.generic_kernels,
              secs);
  if (!a.tuning_log.empty()) {
    size_t from_log = 0;
    for (const auto& w : m.workloads) from_log += tuned.count(w.key);
    std::printf("tuned: %zu of %zu workloads (records from %s)\n", from_log, m.workloads.size(),
                a.tuning_log.c_str());
  }
  std::printf("configs: %zu of %zu workloads configured", configured, m.workloads.size());
  if (configured < m.workloads.size()) {
    std::printf("; fallback configs for:\n");
    for (const auto& w : m.workloads)
      if (!w.configured) std::printf("  %s (x%d)\n", w.key.c_str(), w.count);
  } else {
    std::printf("\n");
  }
  // A shared config file may hold other models' workloads; still say so, so
  // that a key with a typo is not silently ignored.
  size_t unused = 0;
  std::string first_unused;
  for (const auto& [key, cfg] : options.configs) {
    bool used = std::any_of(m.workloads.begin(), m.workloads.end(),
                            [&](const driver::WorkloadUse& w) { return w.key == key; });
    if (!used && unused++ == 0) first_unused = key;
  }
  if (unused)
    std::printf("note: %zu config(s) in %s match no workload of this model (first: %s)\n", unused,
                a.config_file.c_str(), first_unused.c_str());
  return 0;
}

}  // namespace kiln::cli
