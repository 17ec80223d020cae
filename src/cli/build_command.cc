// kiln build: ONNX model -> package (docs/package-format.md).
#include "cli/build_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "driver/build.h"
#include "frontend/op_support.h"
#include "quantize/quantize.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"
#include "support/same_file.h"
#include "support/stale_temps.h"
#include "support/temp_files.h"
#include "tuner/layout_records.h"
#include "tuner/tuned_configs.h"

namespace kiln::cli {

// quantize_command.cc: --calibration, --calibrate, --percentile, --keep-float.
bool parse_quantize_option(const std::vector<std::string>& args, size_t& i,
                           quantize::QuantizeOptions& q, bool& percentile_given);
void check_quantize_options(const quantize::QuantizeOptions& q, bool percentile_given);
std::string op_list(const quantize::QuantizeOptions& q);
driver::ConfigChooser calibration_configs(const std::string& tuning_log,
                                          const codegen::Target& target);

namespace {

const char* kBuildUsage =
    "usage: kiln build MODEL.onnx [-o OUT] [--target TARGET] [--input-shapes SHAPES]\n"
    "                  [--output-format tar|so] [--config FILE] [--tuning-log DB "
    "[--require-tuned]]\n"
    "                  [--no-shipped-logs] [--no-borrow] [--layout-dp] [--dump-kernels DIR]\n"
    "                  [--time-report] [--channel-splits]\n"
    "                  [--precision fp32|int8|bf16 [--calibration DATA] [--calibrate M]\n"
    "                   [--percentile P] [--keep-float NODE...] [--quantize-also OPS]\n"
    "                   [--no-fold-batchnorm] [--reduce-range]]\n"
    "  -o OUT             package to write (default: MODEL.tar, or MODEL.so with --output-format "
    "so)\n"
    "  --target TARGET    'llvm -mcpu=... -mattr=...' (default: this machine)\n"
    "  --input-shapes S   bind dynamic axes, e.g. \"input:[1,3,224,224],mask:[1,128]\"\n"
    "  --output-format F  tar (mod.so + mod.json + mod.params) or so (one self-contained library)\n"
    "  --config FILE      JSON lines {\"workload\": KEY, \"config\": {...}} applied by workload "
    "key\n"
    "  --tuning-log DB    use the best verified record per workload from kiln tune's database\n"
    "  --require-tuned    fail (writing nothing) when a workload has no record of its own\n"
    "                     (in DB or the shipped logs; a borrowed config does not count)\n"
    "  --no-shipped-logs  ignore the pre-tuned records kiln ships in logs/\n"
    "  --no-borrow        never use a config tuned for a nearby shape of the same template,\n"
    "                     nor one from another ISA class's shipped log\n"
    "  --layout-dp        where DB's records offer other channel blocks, choose every\n"
    "                     convolution's config jointly with the layout transforms between\n"
    "                     them (off by default: not yet faster end to end, see README);\n"
    "                     without it each workload's best record, the fallback's blocks first\n"
    "  --dump-kernels DIR write each kernel's LLVM IR (.ll) and assembly (.s) into DIR\n"
    "  --time-report      print the slowest kernels' compile times and estimated sizes\n"
    "  --channel-splits   every kernel shares its work between threads by channel blocks,\n"
    "                     as the tuner measures kernels alone (default: by rows where the\n"
    "                     kernel's producer wrote by rows; for A/B comparisons)\n"
    "  --precision P      fp32 (the default); int8: quantize with kiln quantize's code (needs\n"
    "                     --calibration DATA; --calibrate, --percentile, --keep-float,\n"
    "                     --quantize-also, --no-fold-batchnorm, --reduce-range as there)\n"
    "                     and build the QDQ model; bf16: Conv (groups 1) and Gemm/MatMul with\n"
    "                     constant weights in bfloat16 (float32 activations and accumulation;\n"
    "                     needs a target with avx512bf16 or amx-bf16; Gemm/MatMul on AMX\n"
    "                     tiles where it has amx-bf16), everything else float32\n"
    "Configs come from DB, else the shipped logs for this CPU model, then for its ISA class\n"
    "(logs/<class>.<cpu>.jsonl, logs/<class>.jsonl), else\n"
    "a nearby shape's record whose config is legal here, else the template's fallback; the\n"
    "report names each.\n";

// --precision int8 without --reduce-range on an x86 target without a dot
// instruction: say that 7-bit weights would double the int8 kernels' multiply
// rate there, and what they cost (README, "Quantization (int8)").
void print_reduce_range_note(const quantize::QuantizeOptions& q, const codegen::Target& target) {
  std::string arch = target.arch();
  bool x86 = arch == "x86_64" || arch == "i386" || arch == "x86";
  if (q.reduce_range || !x86 || target.isa().int8_dot_instruction) return;
  std::printf(
      "note: the target has no int8 dot instruction (no AVX-512 VNNI / AVX-VNNI): its int8 "
      "kernels multiply at half the rate they could. --reduce-range quantizes weights to 7 "
      "bits ([-64, 64], as ONNX Runtime's reduce_range), which lets them use vpmaddubsw "
      "exactly (measured 1.3-1.5x faster end to end on ResNet-18/50 and MobileNetV2) for half the "
      "weight resolution "
      "(README: Quantization).\n");
}

// A model quantized elsewhere (QDQ in) for an x86 target without a dot
// instruction: count its int8 conv / dense workloads whose weights did not fit
// [-64, 64] (their keys lack weight_range=[7]: graph/passes/strategy.cc), which
// take the exact vpmaddwd sequence, and say how to get the faster one.
void print_eight_bit_weights_note(const driver::BuiltModule& m, const codegen::Target& target) {
  std::string arch = target.arch();
  bool x86 = arch == "x86_64" || arch == "i386" || arch == "x86";
  if (!x86 || target.isa().int8_dot_instruction) return;
  size_t wide = 0, narrowable = 0;
  for (const auto& w : m.workloads) {
    bool narrowable_template =
        w.key.rfind("conv2d_NCHWc_int8.x86(", 0) == 0 || w.key.rfind("dense_int8.x86(", 0) == 0;
    if (!narrowable_template) continue;
    ++narrowable;
    if (w.key.find("weight_range=[7]") == std::string::npos) ++wide;
  }
  if (wide == 0) return;
  std::printf(
      "note: %zu of %zu int8 conv/dense workloads have weights outside [-64, 64]; the target has "
      "no int8 dot instruction (no AVX-512 VNNI / AVX-VNNI), so they take the exact vpmaddwd "
      "sequence at half the multiply rate. Weights quantized to 7 bits (ONNX Runtime's "
      "quantize_static(..., reduce_range=True), or `kiln quantize --reduce-range` / `kiln build "
      "--precision int8 --reduce-range` from the float model) run with vpmaddubsw, measured "
      "1.3-1.5x faster end to end (docs/quantization.md).\n",
      wide, narrowable);
}

struct BuildArgs {
  std::string model, output, target, input_shapes, format = "tar", config_file, tuning_log;
  std::string dump_kernels;
  bool require_tuned = false, no_shipped_logs = false, no_borrow = false, time_report = false,
       layout_dp = false, channel_splits = false;
  std::string precision = "fp32";
  quantize::QuantizeOptions quantize;  // --precision int8
  bool quantize_flags = false;         // any of parse_quantize_option's flags given
  bool percentile_given = false;
};

BuildArgs parse_args(const std::vector<std::string>& args) {
  BuildArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(s + " needs a value\n" + kBuildUsage);
      return args[++i];
    };
    if (parse_quantize_option(args, i, a.quantize, a.percentile_given)) {
      a.quantize_flags = true;
      continue;
    }
    if (s == "-o" || s == "--output") {
      a.output = value();
      // An empty -o used to mean "the default name" silently.
      if (a.output.empty()) throw std::invalid_argument(s + " needs a non-empty path");
    } else if (s == "--target")
      a.target = value();
    else if (s == "--input-shapes")
      a.input_shapes = value();
    else if (s == "--output-format")
      a.format = value();
    else if (s == "--config")
      a.config_file = value();
    else if (s == "--tuning-log")
      a.tuning_log = value();
    else if (s == "--time-report")
      a.time_report = true;
    else if (s == "--dump-kernels")
      a.dump_kernels = value();
    else if (s == "--require-tuned")
      a.require_tuned = true;
    else if (s == "--no-shipped-logs")
      a.no_shipped_logs = true;
    else if (s == "--no-borrow")
      a.no_borrow = true;
    else if (s == "--layout-dp")
      a.layout_dp = true;
    else if (s == "--channel-splits")
      a.channel_splits = true;
    else if (s == "--no-layout-dp")  // the default; accepted for scripts written when it was not
      a.layout_dp = false;
    else if (s == "--precision")
      a.precision = value();
    else if (!s.empty() && s[0] == '-')
      throw std::invalid_argument("unknown option " + s + "\n" + kBuildUsage);
    else if (a.model.empty())
      a.model = s;
    else
      throw std::invalid_argument("more than one model given\n" + std::string(kBuildUsage));
  }
  if (a.model.empty()) throw std::invalid_argument(std::string("no model given\n") + kBuildUsage);
  if (a.require_tuned && a.tuning_log.empty() && a.no_shipped_logs)
    throw std::invalid_argument("--require-tuned needs --tuning-log DB or the shipped logs");
  if (a.precision != "fp32" && a.precision != "int8" && a.precision != "bf16")
    throw std::invalid_argument("unknown --precision '" + a.precision +
                                "' (valid: fp32, int8, bf16)");
  if (a.precision == "int8" && a.quantize.calibration.empty())
    throw std::invalid_argument("--precision int8 needs --calibration DATA (kiln quantize --help)");
  if (a.precision != "int8" && a.quantize_flags)
    throw std::invalid_argument(
        "--calibration, --calibrate, --percentile, --keep-float, --quantize-also and "
        "--reduce-range need "
        "--precision int8");
  check_quantize_options(a.quantize, a.percentile_given);
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

// --time-report: the total and the slowest kernels' compile times, each with
// its estimated size (schedule/code_size.h).
void print_time_report(const driver::BuiltModule& m) {
  std::vector<driver::BuiltModule::CompileTime> t = m.compile_times;
  double total = 0;
  for (const auto& k : t) total += k.seconds;
  std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  std::printf("compile time: %.2f s over %zu kernels (summed over threads); slowest:\n", total,
              t.size());
  for (size_t i = 0; i < t.size() && i < 5; ++i)
    std::printf("  %8.3f s  %-10s %9lld est. ops  %s\n", t[i].seconds, t[i].func.c_str(),
                static_cast<long long>(t[i].code_size), t[i].label.c_str());
}

// One line per kernel whose unrolling the compile-time budget demoted: its
// code is not what its config asked for, so a build says so.
void print_demotions(const driver::BuiltModule& m) {
  for (const auto& d : m.demotions) {
    std::string loops;
    for (const std::string& l : d.loops) loops += (loops.empty() ? "" : ", ") + l;
    std::printf(
        "compile budget: %s (%s) estimated at %lld ops, over the budget of %lld: unrolled "
        "loop%s %s made serial (now %lld ops)\n",
        d.func.c_str(), d.label.c_str(), static_cast<long long>(d.size_before),
        static_cast<long long>(d.budget), d.loops.size() == 1 ? "" : "s", loops.c_str(),
        static_cast<long long>(d.size_after));
  }
}

// What the layout choice did: how many convolutions it gave other channel
// blocks, and the predicted time (kernels plus transforms) of its choice
// against each workload's best record alone.
void print_layout(const driver::LayoutReport& r) {
  std::printf(
      "layouts: %zu of %zu blocked convolutions changed blocks (%s); predicted %.3f ms "
      "(kernels + layout transforms) vs %.3f ms with each workload's best record alone\n",
      r.changed, r.convs, r.exact ? "exact DP over layout classes" : "greedy fallback",
      r.predicted_ms, r.baseline_ms);
  if (r.transforms_estimated)
    std::printf(
        "layouts: %zu of %zu layout transforms had no measured time (kiln tune times them); "
        "estimated from bytes moved at %.1f GB/s copy bandwidth\n",
        r.transforms_estimated, r.transforms_estimated + r.transforms_measured,
        tuner::copy_bandwidth_gbs());
}

// "tuned: N of M workloads (...)" and the borrowed ones, each with its donor.
void print_tuned(const driver::BuiltModule& m,
                 const std::map<std::string, tuner::ConfigChoice>& tuned) {
  std::vector<std::string> keys;
  for (const auto& w : m.workloads) keys.push_back(w.key);
  tuner::TunedSummary s = tuner::summarize_choices(keys, tuned);
  std::string from;
  for (const auto& [source, count] : s.by_source)
    from += (from.empty() ? "" : ", ") + std::to_string(count) + " from " + source;
  std::printf("tuned: %zu of %zu workloads%s%s%s\n", s.tuned, s.total, from.empty() ? "" : " (",
              from.c_str(), from.empty() ? "" : ")");
  if (s.kept_untuned)
    std::printf(
        "in-graph: %zu workload%s keep%s the untuned config: no tuned config ran clearly faster "
        "inside the model (kiln tune's in-graph step)\n",
        s.kept_untuned, s.kept_untuned == 1 ? "" : "s", s.kept_untuned == 1 ? "s" : "");
  if (s.borrowed.empty()) return;
  std::printf(
      "borrowed: %zu workload%s use%s the config tuned for a nearby shape or another "
      "ISA class (fitting this target's registers):\n",
      s.borrowed.size(), s.borrowed.size() == 1 ? "" : "s", s.borrowed.size() == 1 ? "s" : "");
  for (const auto& b : s.borrowed)
    std::printf("  %s\n    <- %s (%s)\n", b.workload.c_str(), b.donor.c_str(), b.source.c_str());
}

}  // namespace

int run_build(const std::vector<std::string>& args) {
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(kBuildUsage, stdout);
      return 0;
    }
  BuildArgs a = parse_args(args);
  support::refuse_output_over_input(a.output, {{"the model", a.model},
                                               {"the --config file", a.config_file},
                                               {"the tuning log", a.tuning_log},
                                               {"the calibration data", a.quantize.calibration}});
  // Nor over the files sqlite keeps beside the log (-wal, -shm), existing or not.
  support::refuse_output_over_database(a.output, "the tuning log", a.tuning_log);
  support::refuse_read_only_output(a.output);
  // What killed builds left: kiln-*-PID-* in TMPDIR, OUT.tmpPID beside the output.
  support::sweep_stale_temps();
  support::sweep_stale_output_temps(a.output);
  auto start = std::chrono::steady_clock::now();
  driver::BuildOptions options;
  if (!a.target.empty()) options.target = codegen::Target::parse(a.target);
  options.input_shapes = a.input_shapes;
  if (a.precision == "bf16") options.precision = graph::Precision::kBf16;
  // Before anything is read or written: a target without avx512bf16 is one error.
  driver::check_precision(options.precision, options.target);
  options.configs = read_configs(a.config_file);  // --config wins over records
  options.output_path = a.output;
  options.format =
      a.format == "so" ? driver::PackageFormat::kSharedLibrary : driver::PackageFormat::kTar;
  options.dump_kernels_dir = a.dump_kernels;
  options.row_splits = !a.channel_splits;
  // KILN_DUMP_KERNELS=DIR, or =1 for OUT.kernels/ next to the package.
  if (const char* env = std::getenv("KILN_DUMP_KERNELS");
      options.dump_kernels_dir.empty() && env && *env && std::string(env) != "0")
    options.dump_kernels_dir = std::string(env) == "1" ? a.output + ".kernels" : env;
  std::map<std::string, tuner::ConfigChoice> tuned;
  tuner::BuildRecordOptions records;
  records.tuning_log = a.tuning_log;
  records.shipped_logs = !a.no_shipped_logs;
  records.borrow = !a.no_borrow;
  records.require_tuned = a.require_tuned;
  options.choose_configs = [&](const std::vector<std::vector<std::string>>& workloads) {
    std::vector<std::string> notes;
    tuned = tuner::configs_for_build(records, options.target, workloads, &notes);
    for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
    std::map<std::string, driver::ChosenConfig> configs;
    for (const auto& [key, choice] : tuned) configs[key] = {choice.config_json, choice.gflops};
    return configs;
  };
  // --precision int8: the QDQ model kiln quantize would write, in a private
  // temporary folder, is what gets built.
  // The layout choice (graph/passes/choose_layouts.h) from DB's records:
  // candidates per channel-block pair and the stored transform times.
  std::map<std::string, double> transform_times;
  if (!a.tuning_log.empty() && a.layout_dp) {
    options.layout_candidates = [&](const std::vector<std::string>& keys) {
      tuner::RecordDB db = tuner::RecordDB::open(a.tuning_log, tuner::RecordDB::Mode::kMustExist);
      int threads = kiln_get_num_threads();
      transform_times = tuner::load_transform_times(db, options.target, threads);
      std::map<std::string, std::vector<graph::ConfigCandidate>> out;
      for (const auto& [key, cands] : tuner::layout_candidates(db, options.target, threads, keys))
        for (const tuner::BlockCandidate& c : cands)
          out[key].push_back({c.config_json, c.ms, c.in_block, c.out_block});
      return out;
    };
    options.transform_ms = [&](const std::vector<int64_t>& nchw, int64_t from, int64_t to,
                               bool* estimated) {
      auto it = transform_times.find(tuner::transform_workload_key(nchw, from, to));
      *estimated = it == transform_times.end();
      return *estimated ? tuner::estimate_transform_ms(nchw) : it->second;
    };
  }
  quantize::QuantizeResult qdq;  // --precision int8: its QDQ model (kept until the build is done)
  std::string model_to_build = a.model;
  if (a.precision == "int8") {
    // Calibration runs the float model here, so it is built for this machine
    // (QuantizeOptions::target's default) whatever --target the package has.
    a.quantize.choose_configs = calibration_configs(a.tuning_log, a.quantize.target);
    qdq = quantize::quantize_to_temp(a.model, a.quantize);
    for (const std::string& w : qdq.warnings)
      std::fprintf(stderr, "kiln build: warning: %s\n", w.c_str());
    std::printf("quantized: %zu of %zu %s nodes (%zu calibration samples, %s)\n",
                qdq.plan.nodes.size(), qdq.candidates, op_list(a.quantize).c_str(), qdq.samples,
                quantize::method_name(a.quantize.method));
    for (const char* op : {"QuantizeLinear", "DequantizeLinear"})
      if (!frontend::is_supported_op("", op))
        throw std::runtime_error(
            std::string("--precision int8: kiln cannot import QDQ models yet (no ") + op +
            " import; issue 14's QDQ import is not merged). Write the quantized model with "
            "`kiln quantize " +
            a.model + " -o MODEL.qdq.onnx --calibration " + a.quantize.calibration +
            "` meanwhile; nothing was written to " + a.output);
    model_to_build = qdq.qdq_path;
    print_reduce_range_note(a.quantize, options.target);
  }
  driver::BuiltModule m;
  try {
    m = driver::build(model_to_build, options);
  } catch (const std::exception& e) {
    if (qdq.qdq_path.empty()) throw;
    // Messages name the temporary QDQ file; say which model it came from.
    throw std::runtime_error("the int8 (QDQ) model made from " + a.model + ": " + e.what());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t templated = 0, configured = 0;
  for (const auto& w : m.workloads) {
    templated += static_cast<size_t>(w.count);
    if (w.configured) ++configured;
  }
  std::printf("kiln build: %s -> %s (%zu kernels: %zu templated, %zu generic; %.1f s)\n",
              a.model.c_str(), a.output.c_str(), m.funcs.size(), templated, m.generic_kernels,
              secs);
  if (a.time_report) print_time_report(m);
  print_demotions(m);
  if (!a.tuning_log.empty() || !tuned.empty()) print_tuned(m, tuned);
  if (m.layout.ran) print_layout(m.layout);
  // --precision int8 said this before the build (print_reduce_range_note).
  if (a.precision != "int8") print_eight_bit_weights_note(m, options.target);
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
  for (const auto& entry : options.configs) {
    const std::string& key = entry.first;  // not a binding: the lambda captures it (clang 14)
    bool used = std::any_of(m.workloads.begin(), m.workloads.end(),
                            [&](const driver::WorkloadUse& w) { return w.key == key; });
    if (!used && unused++ == 0) first_unused = key;
  }
  std::vector<std::string> missing =
      options.target.arch() == runtime::host_arch()
          ? runtime::missing_cpu_features(options.target.required_features())
          : std::vector<std::string>{"(another architecture: " + options.target.arch() + ")"};
  if (!missing.empty()) {
    std::string names;
    for (const std::string& m : missing) names += " " + m;
    std::printf("note: this machine cannot run the package; it lacks:%s\n", names.c_str());
  }
  if (unused)
    std::printf("note: %zu config(s) in %s match no workload of this model (first: %s)\n", unused,
                a.config_file.c_str(), first_unused.c_str());
  return 0;
}

}  // namespace kiln::cli
