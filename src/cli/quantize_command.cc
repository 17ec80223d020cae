// kiln quantize: float ONNX model + calibration data -> QDQ ONNX model
// (src/quantize, README "Quantization (int8)").
#include "cli/quantize_command.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "quantize/quantize.h"
#include "support/output_file.h"
#include "support/same_file.h"
#include "support/stale_temps.h"
#include "tuner/tuned_configs.h"

namespace kiln::cli {
namespace {

const char* kQuantizeUsage =
    "usage: kiln quantize MODEL.onnx -o OUT.onnx --calibration DATA\n"
    "                     [--calibrate max|percentile|kl] [--percentile P] [--keep-float NODE...]\n"
    "                     [--quantize-also Add,MaxPool,AveragePool,GlobalAveragePool,MatMul] "
    "[--reduce-range] [--print-ranges]\n"
    "  -o OUT.onnx         the quantized model, in ONNX Runtime's QDQ format (written atomically)\n"
    "  --calibration DATA  DATA.npz with one array per model input holding N samples stacked\n"
    "                      along a new leading axis ([N, *input shape]), or a folder of .npz\n"
    "                      files, each one sample as for kiln run --inputs\n"
    "  --calibrate M       how a tensor's range is chosen from its statistics: max (min/max,\n"
    "                      the default), percentile (clip both tails at --percentile), kl\n"
    "                      (TensorRT's entropy calibration)\n"
    "  --percentile P      for --calibrate percentile (default 99.99)\n"
    "  --keep-float NODE.. leave these nodes (ONNX node names; OpType#INDEX for an unnamed\n"
    "                      one) in float32; the names run up to the next option\n"
    "  --no-fold-batchnorm keep BatchNormalization nodes after Convs (folded into the Conv's\n"
    "                      weight and bias before calibration by default)\n"
    "  --reduce-range      weights in 7 bits, [-64, 64] (ONNX Runtime's reduce_range): on x86\n"
    "                      without VNNI (AVX2) kiln's int8 kernels then multiply at twice the\n"
    "                      rate (pmaddubsw); half the weight resolution (README)\n"
    "  --print-ranges      print every quantized tensor's range, scale and zero point\n"
    "  --quantize-also OPS also quantize these op types' inputs and output (comma-separated:\n"
    "                      Add, MaxPool, AveragePool, GlobalAveragePool; MatMul: those of\n"
    "                      two activations, as attention's)\n"
    "Conv, MatMul and Gemm with float32 initializer weights are quantized: weights int8\n"
    "symmetric per output channel ([-127, 127], or [-64, 64] with --reduce-range), activations\n"
    "uint8 asymmetric, bias int32.\n";

}  // namespace

// Configs for the calibration build: the records a plain `kiln build` would
// use (the tuning log if given, the shipped logs, borrowing), never required.
driver::ConfigChooser calibration_configs(const std::string& tuning_log,
                                          const codegen::Target& target) {
  tuner::BuildRecordOptions records;
  records.tuning_log = tuning_log;
  return [records, target](const std::vector<std::vector<std::string>>& workloads) {
    std::map<std::string, driver::ChosenConfig> configs;
    for (const auto& [key, choice] : tuner::configs_for_build(records, target, workloads))
      configs[key] = {choice.config_json, choice.gflops};
    return configs;
  };
}

// "Conv/MatMul/Gemm", plus --quantize-also's op types (MatMul, of two
// activations, is already named).
std::string op_list(const quantize::QuantizeOptions& q) {
  std::string ops = "Conv/MatMul/Gemm";
  for (const std::string& op : q.optional_ops)
    if (op != "MatMul") ops += "/" + op;
  return ops;
}

// Shared with kiln build --precision int8 (build_command.cc): --calibrate,
// --percentile, --keep-float, --quantize-also, --reduce-range parsing. Returns true if args[i] was
// one of them (i then points at its last value); *percentile_given says --percentile was.
bool parse_quantize_option(const std::vector<std::string>& args, size_t& i,
                           quantize::QuantizeOptions& q, bool& percentile_given) {
  const std::string& s = args[i];
  auto value = [&]() -> std::string {
    if (i + 1 >= args.size()) throw std::invalid_argument(s + " needs a value");
    return args[++i];
  };
  if (s == "--calibration") {
    q.calibration = value();
  } else if (s == "--calibrate") {
    q.method = quantize::parse_calibration_method(value());
  } else if (s == "--percentile") {
    const std::string v = value();
    size_t used = 0;
    double p = 0;
    try {
      p = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || !(p > 50 && p <= 100))
      throw std::invalid_argument("--percentile must be a number in (50, 100], not '" + v + "'");
    q.percentile = p;
    percentile_given = true;
  } else if (s == "--reduce-range") {
    q.reduce_range = true;
  } else if (s == "--no-fold-batchnorm") {
    q.fold_batch_norm = false;
  } else if (s == "--quantize-also") {
    // Comma-separated op types; checked against the model's plan (plan.h).
    std::string v = value();
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      if (comma > start) q.optional_ops.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
    if (q.optional_ops.empty()) throw std::invalid_argument("--quantize-also needs op types");
  } else if (s == "--keep-float") {
    size_t before = q.keep_float.size();
    while (i + 1 < args.size() && !args[i + 1].empty() && args[i + 1][0] != '-')
      q.keep_float.push_back(args[++i]);
    if (q.keep_float.size() == before) throw std::invalid_argument("--keep-float needs node names");
  } else {
    return false;
  }
  return true;
}

// After parse_quantize_option: --percentile with another method would be ignored (issue 65
// #15: it was, silently).
void check_quantize_options(const quantize::QuantizeOptions& q, bool percentile_given) {
  if (percentile_given && q.method != quantize::CalibrationMethod::kPercentile)
    throw std::invalid_argument(std::string("--percentile is for --calibrate percentile; the "
                                            "calibration method is ") +
                                quantize::method_name(q.method) +
                                " (add --calibrate percentile, or drop --percentile)");
}

int run_quantize(const std::vector<std::string>& args) {
  std::string model, output;
  quantize::QuantizeOptions q;
  bool percentile_given = false, print_ranges = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    if (s == "--help" || s == "-h") {
      std::fputs(kQuantizeUsage, stdout);
      return 0;
    }
    if (s == "--print-ranges") {
      print_ranges = true;
      continue;
    }
    if (parse_quantize_option(args, i, q, percentile_given)) continue;
    if (s == "-o" || s == "--output") {
      if (i + 1 >= args.size() || args[i + 1].empty())
        throw std::invalid_argument(s + " needs a path\n" + kQuantizeUsage);
      output = args[++i];
    } else if (!s.empty() && s[0] == '-') {
      throw std::invalid_argument("unknown option " + s + "\n" + kQuantizeUsage);
    } else if (model.empty()) {
      model = s;
    } else {
      throw std::invalid_argument("more than one model given ('" + model + "', '" + s + "')\n" +
                                  kQuantizeUsage);
    }
  }
  if (model.empty()) throw std::invalid_argument(std::string("no model given\n") + kQuantizeUsage);
  if (output.empty())
    throw std::invalid_argument(std::string("no -o OUT.onnx given\n") + kQuantizeUsage);
  if (q.calibration.empty())
    throw std::invalid_argument(std::string("no --calibration DATA given\n") + kQuantizeUsage);
  check_quantize_options(q, percentile_given);
  support::refuse_output_over_input(
      output, {{"the model", model}, {"the calibration data", q.calibration}});
  support::refuse_read_only_output(output);
  // Before calibration: a folder, a socket, an unwritable folder is one error now.
  support::check_output_writable(output);
  support::sweep_stale_temps();
  support::sweep_stale_output_temps(output);
  q.choose_configs = calibration_configs("", q.target);
  auto start = std::chrono::steady_clock::now();
  quantize::QuantizeResult r = quantize::quantize_model(model, output, q);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& w : r.warnings)
    std::fprintf(stderr, "kiln quantize: warning: %s\n", w.c_str());
  std::printf(
      "kiln quantize: %s -> %s (%zu of %zu %s nodes quantized, %zu activation "
      "tensors; %zu calibration samples, %s; %.1f s)\n",
      model.c_str(), output.c_str(), r.plan.nodes.size(), r.candidates, op_list(q).c_str(),
      r.plan.activations.size(), r.samples, quantize::method_name(q.method), secs);
  if (q.reduce_range) std::printf("  weights in 7 bits ([-64, 64], --reduce-range)\n");
  if (r.batch_norms_folded > 0)
    std::printf("  folded %d BatchNormalization node%s into the Conv before it\n",
                r.batch_norms_folded, r.batch_norms_folded == 1 ? "" : "s");
  for (const auto& [label, why] : r.plan.kept_float)
    std::printf("  float32: %s (%s)\n", label.c_str(), why.c_str());
  if (print_ranges)
    for (const auto& [tensor, a] : r.plan.activations)
      std::printf("  %s: calibrated [%g, %g], scale %g, zero point %d\n", tensor.c_str(), a.min,
                  a.max, a.scale, a.zero_point);
  return 0;
}

}  // namespace kiln::cli
