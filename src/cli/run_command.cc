#include "cli/run_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "runtime/benchmark.h"
#include "runtime/graph_executor.h"
#include "runtime/npz.h"
#include "support/output_file.h"
#include "support/same_file.h"
#include "support/stale_temps.h"

namespace kiln::cli {

const char* const kRunUsage =
    "usage: kiln run MODEL.tar --inputs INPUT.npz [--output OUT.npz] [--repeat N]\n"
    "                [--print-time] [--profile]\n"
    "  MODEL.tar       a package (tar of mod.so, mod.json, mod.params, or a self-contained .so)\n"
    "  --inputs        arrays named by the model's inputs\n"
    "  --output        where to write outputs as output_0, output_1, ... (else print shapes);\n"
    "                  - for stdout; a device or FIFO is written through, a symlink followed\n"
    "  --repeat N      runs for --print-time and --profile (default 1), after one warm-up\n"
    "  --print-time    mean, median, max, min and std of the run time in ms\n"
    "  --profile       per-kernel time table, slowest first\n";

namespace {

struct Options {
  std::string package, inputs, output;
  int repeat = 1;
  bool print_time = false, profile = false;
};

constexpr int kMaxRepeat = 1000000;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool has_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1), a = a.substr(0, eq), has_value = true;
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "--inputs") {
      o.inputs = take();
    } else if (a == "--output" || a == "-o") {
      o.output = take();
    } else if (a == "--repeat") {
      std::string n = take();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos ||
          (n.size() <= 9 && std::stoi(n) < 1))
        throw UsageError("--repeat needs a positive integer, not '" + n + "'");
      // A positive number, but more runs than anyone waits for.
      if (n.size() > 9 || std::stoi(n) > kMaxRepeat)
        throw UsageError("--repeat " + n + " is more than the " + std::to_string(kMaxRepeat) +
                         " runs kiln run allows");
      o.repeat = std::stoi(n);
    } else if (a == "--print-time" && !has_value) {
      o.print_time = true;
    } else if (a == "--profile" && !has_value) {
      o.profile = true;
    } else if (a.rfind("-", 0) == 0) {
      throw UsageError("unknown option '" + args[i] + "'");
    } else if (o.package.empty()) {
      o.package = a;
    } else {
      throw UsageError("more than one package given ('" + o.package + "' and '" + a + "')");
    }
  }
  if (o.package.empty()) throw UsageError("no package given");
  if (o.output == "-" && (o.print_time || o.profile))
    throw UsageError(
        "--output - writes the npz to stdout: --print-time and --profile would mix "
        "their tables into it");
  return o;
}

std::string list_inputs(const runtime::GraphExecutor& ex) {
  std::string s;
  for (const auto& in : ex.inputs()) s += (s.empty() ? "" : ", ") + in.str();
  return s.empty() ? "(none)" : s;
}

// A sequence input `x` comes as the arrays `x[0]`, `x[1]`, ... (an empty one
// as a single array `x[]`); returns the input's name and the element's
// position (-1 for `x[]`), or an empty name for an array of another kind.
std::pair<std::string, int64_t> sequence_key(const std::string& key) {
  const size_t open = key.rfind('[');
  if (open == std::string::npos || open == 0 || key.back() != ']') return {"", 0};
  const std::string digits = key.substr(open + 1, key.size() - open - 2);
  if (digits.empty()) return {key.substr(0, open), -1};
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    return {"", 0};
  return {key.substr(0, open), std::stoll(digits)};
}

// Feeds every input from the npz, requiring exactly the model's input names
// (sequences as `name[0]`, `name[1]`, ...; an optional input left out is empty).
void set_inputs(runtime::GraphExecutor& ex, const Options& o) {
  if (o.inputs.empty()) {
    bool all_optional = true;
    for (const auto& in : ex.inputs()) all_optional &= in.optional;
    if (all_optional) return;
    throw std::runtime_error("--inputs INPUT.npz is required: the model's inputs are " +
                             list_inputs(ex));
  }
  std::vector<runtime::NamedArray> arrays = runtime::read_npz(o.inputs);
  std::set<std::string> given;
  std::map<std::string, std::map<int64_t, runtime::NDArray>> sequences;
  for (auto& a : arrays) {
    int i = ex.input_index(a.name);
    if (i < 0) {
      auto [name, at] = sequence_key(a.name);
      int s = name.empty() ? -1 : ex.input_index(name);
      if (s >= 0 && ex.inputs()[s].sequence) {
        auto& elements = sequences[name];
        if (at >= 0) elements[at] = std::move(a.array);
        continue;
      }
      throw std::runtime_error(o.inputs + ": array '" + a.name + "' is not an input of '" +
                               o.package + "'; its inputs are " + list_inputs(ex));
    }
    const runtime::TensorInfo& want = ex.inputs()[i];
    if (want.sequence)
      throw std::runtime_error(o.inputs + ": input '" + a.name +
                               "' is a sequence: give its elements as '" + a.name + "[0]', '" +
                               a.name + "[1]', ... (an empty sequence as '" + a.name + "[]')");
    if (a.array.dtype() != want.dtype || (!want.dynamic && a.array.shape() != want.shape))
      throw std::runtime_error(
          o.inputs + ": array '" + a.name + "' is " + a.array.dtype().str() + " " +
          runtime::shape_str(a.array.shape()) + " but the model's input is " + want.dtype.str() +
          " " + runtime::shape_str(want.shape) + "; its inputs are " + list_inputs(ex));
    ex.set_input(a.name, a.array);
    given.insert(a.name);
  }
  for (auto& [name, elements] : sequences) {
    std::vector<runtime::NDArray> list;
    for (auto& [at, array] : elements) {
      if (at != static_cast<int64_t>(list.size()))
        throw std::runtime_error(o.inputs + ": sequence input '" + name + "' has no element " +
                                 std::to_string(list.size()) + " ('" + name + "[" +
                                 std::to_string(list.size()) + "]')");
      list.push_back(std::move(array));
    }
    ex.set_input_sequence(name, list);
    given.insert(name);
  }
  for (const auto& in : ex.inputs()) {
    if (given.count(in.name)) continue;
    if (in.optional) {
      ex.set_input_none(in.name);
      continue;
    }
    throw std::runtime_error(o.inputs + ": no array for the input '" + in.name +
                             "'; the model's inputs are " + list_inputs(ex));
  }
}

void print_times(const runtime::TimeSummary& t) {
  size_t n = t.times_ms.size();
  std::printf("Execution time summary (%zu run%s after 1 warm-up):\n", n, n == 1 ? "" : "s");
  std::printf(" mean (ms)   median (ms)  max (ms)     min (ms)     std (ms)\n");
  std::printf(" %-11.4f %-12.4f %-12.4f %-12.4f %-12.4f\n", t.mean_ms, t.median_ms, t.max_ms,
              t.min_ms, t.std_ms);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "-" : s;
}

void print_profile(runtime::GraphExecutor& ex, int repeat) {
  std::vector<runtime::KernelProfile> total;
  for (int r = 0; r < repeat; ++r) {
    auto run = ex.run_profiled();
    if (total.empty()) {
      total = std::move(run);
      continue;
    }
    for (size_t k = 0; k < run.size(); ++k) {
      total[k].calls += run[k].calls;
      total[k].total_ms += run[k].total_ms;
    }
  }
  double all = 0;
  for (const auto& k : total) all += k.total_ms;
  std::stable_sort(total.begin(), total.end(),
                   [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  size_t name_w = 6, ops_w = 8;
  for (const auto& k : total) {
    name_w = std::max(name_w, k.name.size());
    ops_w = std::max(ops_w, join(k.op_types).size());
  }
  std::printf("Per-kernel time (%d run%s after 1 warm-up), slowest first:\n", repeat,
              repeat == 1 ? "" : "s");
  std::printf(" %-*s  %-*s  %6s  %11s  %10s  %6s  %8s\n", static_cast<int>(name_w), "kernel",
              static_cast<int>(ops_w), "op types", "calls", "total (ms)", "mean (ms)", "%",
              "GFLOP/s");
  for (const auto& k : total) {
    double mean = k.calls ? k.total_ms / static_cast<double>(k.calls) : 0;
    double gflops = mean > 0 ? static_cast<double>(k.flops) / (mean * 1e6) : 0;
    std::printf(" %-*s  %-*s  %6lld  %11.4f  %10.4f  %6.2f  %8.2f\n", static_cast<int>(name_w),
                k.name.c_str(), static_cast<int>(ops_w), join(k.op_types).c_str(),
                static_cast<long long>(k.calls), k.total_ms, mean,
                all > 0 ? 100 * k.total_ms / all : 0.0, gflops);
  }
  std::printf(" total %.4f ms per run over %zu kernels\n", all / repeat, total.size());
}

void write_outputs(const runtime::GraphExecutor& ex, const std::string& path) {
  // A sequence output k is `output_k[0]`, `output_k[1]`, ... (`output_k[]`
  // with no elements when empty); an empty optional output has no array.
  std::vector<runtime::NamedArray> outputs;
  for (size_t i = 0; i < ex.outputs().size(); ++i) {
    const std::string key = "output_" + std::to_string(i);
    if (ex.output_is_none(i)) continue;
    if (!ex.outputs()[i].sequence) {
      outputs.push_back({key, ex.output(i)});
      continue;
    }
    std::vector<runtime::NDArray> elements = ex.output_sequence(i);
    if (elements.empty())
      outputs.push_back({key + "[]", runtime::NDArray::empty({0}, ex.outputs()[i].dtype)});
    for (size_t j = 0; j < elements.size(); ++j)
      outputs.push_back({key + "[" + std::to_string(j) + "]", std::move(elements[j])});
  }
  // Whole or not at all, a device, FIFO or stdout written through, a symlink's
  // target replaced (support/output_file.h).
  std::vector<runtime::NamedArrayRef> refs;
  for (const auto& a : outputs) refs.push_back({a.name, &a.array});
  std::string bytes = runtime::write_npz_memory(refs, runtime::NpzCompression::Deflated);
  std::fflush(stdout);
  support::write_output_file(path, bytes, /*allow_stdout=*/true);
}

void print_outputs(const runtime::GraphExecutor& ex) {
  for (size_t i = 0; i < ex.outputs().size(); ++i) {
    const auto& info = ex.outputs()[i];
    if (ex.output_is_none(i)) {
      std::printf("output_%zu (%s): an empty optional\n", i, info.name.c_str());
    } else if (info.sequence) {
      std::printf("output_%zu (%s): a sequence of %zu %s tensors\n", i, info.name.c_str(),
                  ex.output_sequence(i).size(), info.dtype.str().c_str());
    } else {
      std::printf("output_%zu (%s): %s %s\n", i, info.name.c_str(), info.dtype.str().c_str(),
                  runtime::shape_str(info.shape).c_str());
    }
  }
}

}  // namespace

int run_run(const std::vector<std::string>& args) {
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(kRunUsage, stdout);
      return 0;
    }
  Options o;
  try {
    o = parse_options(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln run: %s\n%s", e.what(), kRunUsage);
    return 2;
  }
  support::refuse_output_over_input(o.output,
                                    {{"the package", o.package}, {"the inputs", o.inputs}});
  support::refuse_read_only_output(o.output);
  if (!o.output.empty()) support::check_output_writable(o.output, /*allow_stdout=*/true);
  support::sweep_stale_temps();  // kiln-package-PID-* folders of killed runs, and the like
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(o.package);
  set_inputs(ex, o);
  ex.run();  // the warm-up, and the outputs
  if (o.print_time) print_times(runtime::benchmark(ex, o.repeat, /*warmup=*/0));
  if (o.profile) print_profile(ex, o.repeat);
  if (!o.output.empty())
    write_outputs(ex, o.output);
  else
    print_outputs(ex);
  return 0;
}

}  // namespace kiln::cli
