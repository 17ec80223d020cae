// kiln.build: the same build as `kiln build` (src/cli/build_command.cc):
// driver::build with configs from tuner::configs_for_build; the package is
// kept in memory (Package) and written by Package.export with the driver's
// package writer.
#include "driver/build.h"

#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "driver/package_writer.h"
#include "frontend/host_region.h"
#include "frontend/op_support.h"
#include "python/bindings.h"
#include "quantize/quantize.h"
#include "runtime/cpu_features.h"
#include "support/same_file.h"
#include "support/stale_temps.h"
#include "tuner/tuned_configs.h"

namespace kiln::python {
namespace {

struct Package {
  driver::BuiltModule module;
  codegen::Target target;
  driver::PackageFormat format = driver::PackageFormat::kTar;
  std::string model_path;  // refused as an export path
};

driver::PackageFormat parse_format(const std::string& f) {
  if (f == "tar") return driver::PackageFormat::kTar;
  if (f == "so") return driver::PackageFormat::kSharedLibrary;
  throw std::invalid_argument("output_format must be 'tar' or 'so', not '" + f + "'");
}

const char* origin_name(tuner::ConfigChoice::Origin o) {
  switch (o) {
    case tuner::ConfigChoice::Origin::kDatabase: return "database";
    case tuner::ConfigChoice::Origin::kShippedLog: return "shipped log";
    case tuner::ConfigChoice::Origin::kBorrowed: return "borrowed";
  }
  return "";
}

// Per workload: what kiln build prints about it, as data.
py::list workload_rows(const driver::BuiltModule& m,
                       const std::map<std::string, tuner::ConfigChoice>& tuned,
                       const std::map<std::string, std::string>& explicit_configs) {
  py::list rows;
  for (const driver::WorkloadUse& w : m.workloads) {
    py::dict r;
    r["key"] = w.key, r["count"] = w.count, r["configured"] = w.configured;
    r["origin"] = "fallback", r["source"] = "", r["borrowed_from"] = "", r["gflops"] = 0.0;
    auto it = tuned.find(w.key);
    if (explicit_configs.count(w.key)) {
      r["origin"] = "config";  // --config / configs= wins over records
    } else if (it != tuned.end()) {
      r["origin"] = origin_name(it->second.origin), r["source"] = it->second.source;
      r["borrowed_from"] = it->second.borrowed_from, r["gflops"] = it->second.gflops;
    }
    rows.append(r);
  }
  return rows;
}

// The report kiln build prints, as a dict (python/kiln/_build.py wraps it).
py::dict build_report(const std::string& model, const Package& p, double seconds,
                      const std::map<std::string, tuner::ConfigChoice>& tuned,
                      const std::map<std::string, std::string>& explicit_configs,
                      const std::vector<std::string>& notes) {
  const driver::BuiltModule& m = p.module;
  size_t templated = 0;
  std::vector<std::string> keys;
  for (const auto& w : m.workloads)
    templated += static_cast<size_t>(w.count), keys.push_back(w.key);
  tuner::TunedSummary s = tuner::summarize_choices(keys, tuned);
  py::dict d;
  d["model"] = model, d["seconds"] = seconds, d["kernels"] = m.funcs.size();
  d["templated_kernels"] = templated, d["generic_kernels"] = m.generic_kernels;
  d["workloads"] = workload_rows(m, tuned, explicit_configs);
  d["tuned"] = s.tuned, d["total"] = s.total, d["by_source"] = s.by_source;
  d["kept_untuned"] = s.kept_untuned;
  py::list borrowed;
  for (const auto& b : s.borrowed) borrowed.append(py::make_tuple(b.workload, b.donor, b.source));
  d["borrowed"] = borrowed;
  py::list demotions;
  for (const auto& x : m.demotions)
    demotions.append(py::dict(py::arg("func") = x.func, py::arg("label") = x.label,
                              py::arg("size_before") = x.size_before,
                              py::arg("size_after") = x.size_after, py::arg("budget") = x.budget,
                              py::arg("loops") = x.loops));
  d["demotions"] = demotions;
  d["notes"] = notes;
  d["target"] = p.target.str();
  return d;
}

// Whether this machine can run the target's code, as kiln build says it.
std::string missing_features_note(const codegen::Target& t) {
  std::vector<std::string> missing =
      t.arch() == runtime::host_arch()
          ? runtime::missing_cpu_features(t.required_features())
          : std::vector<std::string>{"(another architecture: " + t.arch() + ")"};
  if (missing.empty()) return "";
  std::string names;
  for (const std::string& f : missing) names += " " + f;
  return "this machine cannot run the package; it lacks:" + names;
}

// precision= and its quantization options (python/kiln/_build.py checks
// their combinations; the CLI's --precision, --calibration, --calibrate,
// --keep-float, --reduce-range).
struct PrecisionArgs {
  std::string precision = "fp32";  // fp32, int8, bf16
  std::string calibration;         // int8: DATA.npz or a folder of .npz
  std::string calibrate = "max";   // int8: max, percentile, kl
  std::vector<std::string> keep_float;
  bool reduce_range = false;  // int8: weights in [-64, 64]
};

py::tuple build(const std::string& model_path, const std::string& input_shapes,
                const std::string& target, const tuner::BuildRecordOptions& records,
                const std::string& output_format, const std::map<std::string, std::string>& configs,
                const PrecisionArgs& precision) {
  if (records.require_tuned && records.tuning_log.empty() && !records.shipped_logs)
    throw std::invalid_argument("require_tuned needs a tuning_log or the shipped logs");
  if (precision.precision != "fp32" && precision.precision != "int8" &&
      precision.precision != "bf16")
    throw std::invalid_argument("unknown precision '" + precision.precision +
                                "' (valid: fp32, int8, bf16)");
  auto p = std::make_unique<Package>();
  p->format = parse_format(output_format);
  p->model_path = model_path;
  driver::BuildOptions options;
  if (!target.empty()) options.target = codegen::Target::parse(target);
  if (precision.precision == "bf16") options.precision = graph::Precision::kBf16;
  // Before anything is read: a target without avx512bf16 is one error.
  driver::check_precision(options.precision, options.target);
  quantize::QuantizeOptions q;
  if (precision.precision == "int8") {
    q.calibration = precision.calibration;
    q.method = quantize::parse_calibration_method(precision.calibrate);
    q.keep_float = precision.keep_float;
    q.reduce_range = precision.reduce_range;
    // The calibration build runs here, on this machine's target, with the
    // records the build would use (never required), as kiln build's.
    q.choose_configs = [records, t = q.target](const std::vector<std::vector<std::string>>& w) {
      tuner::BuildRecordOptions r = records;
      r.require_tuned = false;
      std::map<std::string, driver::ChosenConfig> chosen;
      for (const auto& [key, choice] : tuner::configs_for_build(r, t, w))
        chosen[key] = {choice.config_json, choice.gflops};
      return chosen;
    };
  }
  p->target = options.target;
  options.input_shapes = input_shapes;
  options.configs = configs;
  std::map<std::string, tuner::ConfigChoice> tuned;
  std::vector<std::string> notes;
  options.choose_configs = [&](const std::vector<std::vector<std::string>>& workloads) {
    tuned = tuner::configs_for_build(records, options.target, workloads, &notes);
    std::map<std::string, driver::ChosenConfig> chosen;
    for (const auto& [key, choice] : tuned) chosen[key] = {choice.config_json, choice.gflops};
    return chosen;
  };
  auto start = std::chrono::steady_clock::now();
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::recursive_mutex> one_at_a_time(compiler_mutex());
    support::sweep_stale_temps();
    if (precision.precision == "int8") {
      // kiln quantize's QDQ model (kept until the build is done) is what gets built.
      quantize::QuantizeResult qdq = quantize::quantize_to_temp(model_path, q);
      for (const std::string& w : qdq.warnings) notes.push_back("warning: " + w);
      try {
        p->module = driver::build(qdq.qdq_path, options);
      } catch (const std::exception& e) {
        throw std::runtime_error("the int8 (QDQ) model made from " + model_path + ": " + e.what());
      }
      notes.push_back("quantized: " + std::to_string(qdq.plan.nodes.size()) + " of " +
                      std::to_string(qdq.candidates) + " Conv/MatMul/Gemm nodes (" +
                      std::to_string(qdq.samples) + " calibration samples, " +
                      quantize::method_name(q.method) + ")");
    } else {
      p->module = driver::build(model_path, options);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (std::string n = missing_features_note(p->target); !n.empty()) notes.push_back(n);
  for (const auto& [key, cfg] : configs) {
    bool used = false;
    for (const auto& w : p->module.workloads) used = used || w.key == key;
    if (!used) notes.push_back("config for '" + key + "' matches no workload of this model");
  }
  py::dict report = build_report(model_path, *p, secs, tuned, configs, notes);
  return py::make_tuple(py::cast(std::move(p)), report);
}

void export_package(const Package& p, const std::string& path, const std::string& format) {
  support::refuse_output_over_input(path, {{"the model", p.model_path}});
  support::refuse_read_only_output(path);  // as kiln build: a read-only file is "keep this"
  driver::PackageFormat f = format.empty() ? p.format : parse_format(format);
  py::gil_scoped_release unlocked;
  std::lock_guard<std::recursive_mutex> one_at_a_time(compiler_mutex());
  support::sweep_stale_output_temps(path);
  driver::write_package(p.module, p.target, path, f);
}

}  // namespace

void bind_build(py::module_& m) {
  py::class_<tuner::BuildRecordOptions>(m, "BuildRecordOptions")
      .def(py::init<>())
      .def_readwrite("tuning_log", &tuner::BuildRecordOptions::tuning_log)
      .def_readwrite("shipped_logs", &tuner::BuildRecordOptions::shipped_logs)
      .def_readwrite("borrow", &tuner::BuildRecordOptions::borrow)
      .def_readwrite("require_tuned", &tuner::BuildRecordOptions::require_tuned);
  py::class_<Package>(m, "Package")
      .def("export", &export_package, py::arg("path"), py::arg("format") = "")
      .def_property_readonly("target", [](const Package& p) { return p.target.str(); })
      .def_property_readonly(
          "format",
          [](const Package& p) { return p.format == driver::PackageFormat::kTar ? "tar" : "so"; })
      .def_property_readonly("graph_json", [](const Package& p) { return p.module.graph_json; });
  py::class_<PrecisionArgs>(m, "PrecisionArgs")
      .def(py::init<>())
      .def_readwrite("precision", &PrecisionArgs::precision)
      .def_readwrite("calibration", &PrecisionArgs::calibration)
      .def_readwrite("calibrate", &PrecisionArgs::calibrate)
      .def_readwrite("keep_float", &PrecisionArgs::keep_float)
      .def_readwrite("reduce_range", &PrecisionArgs::reduce_range);
  m.def("build", &build, py::arg("model_path"), py::arg("input_shapes"), py::arg("target"),
        py::arg("records"), py::arg("output_format"), py::arg("configs"), py::arg("precision"));
  // The default-domain operators kiln's registry runs (tools/op_coverage.py).
  m.def("supported_op_types", [] { return frontend::supported_op_types(); });
  // The operators that also run on run-time shaped tensors, in the executor.
  m.def("host_op_types", [] {
    const auto& ops = frontend::host_operators();
    return std::vector<std::string>(ops.begin(), ops.end());
  });
}

}  // namespace kiln::python
