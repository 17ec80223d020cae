// The build driver: an ONNX model (or a graph) -> kernels, the executor's
// graph description, weights, native code and a package. build() in build.cc
// lists every step in order; `kiln build`, the tests and task extraction for
// `kiln tune` call into it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/target.h"
#include "graph/graph.h"
#include "graph/passes/choose_layouts.h"
#include "graph/passes/strategy.h"
#include "ir/function.h"

namespace kiln::driver {

enum class PackageFormat {
  kTar,            // model.tar: mod.so + mod.json + mod.params
  kSharedLibrary,  // one .so embedding mod.json and mod.params
};

// A config found for a workload, with the GFLOP/s its record measured (0:
// not known). GFLOP/s decide between the implementations of one node.
struct ChosenConfig {
  std::string config_json;
  double gflops = 0;
};
// Chooses configs for a model's template workloads, called once per build
// as soon as templates are selected with the implementations of every
// distinct node (each a list of workload keys: usually one, two for a 3x3
// stride-1 Conv, Winograd and direct; the node's untuned default first;
// graph/passes/select_templates.h), in first-use order; returns workload key -> config for those it
// has a config for (the rest run their template's fallback). It may throw to stop the build before
// anything is lowered (kiln build --require-tuned).
using ConfigChooser = std::function<std::map<std::string, ChosenConfig>(
    const std::vector<std::vector<std::string>>& implementations)>;

struct BuildOptions {
  codegen::Target target = codegen::Target::host();
  std::string input_shapes;      // "name:[1,3,224,224],..." for a model file's dynamic axes
  ConfigChooser choose_configs;  // tuning records; may be empty
  // Explicit configs by workload key (kiln build --config FILE), as
  // Config::to_json text; they win over choose_configs'. Checked against the
  // template's space when used.
  std::map<std::string, std::string> configs;
  // The graph-level layout choice (graph/passes/choose_layouts.h): when set,
  // the build asks for the candidates (per channel-block pair) of its blocked
  // convolutions' workloads and, where some workload has candidates with
  // different blocks, picks every convolution's config jointly with the
  // layout transforms between them (transform_ms: the time of one; sets
  // *estimated when it is not a measured time). Explicit configs win.
  std::function<std::map<std::string, std::vector<graph::ConfigCandidate>>(
      const std::vector<std::string>& workloads)>
      layout_candidates;
  std::function<double(const std::vector<int64_t>& nchw, int64_t from, int64_t to, bool* estimated)>
      transform_ms;
  // When set, build() checks this path before compiling and writes the
  // package there at the end (atomically: a failed build leaves no file).
  std::string output_path;
  PackageFormat format = PackageFormat::kTar;
  // Writes each kernel's LLVM IR (.ll) and assembly (.s) into this folder
  // (kiln build --dump-kernels, KILN_DUMP_KERNELS). Empty: none.
  std::string dump_kernels_dir;
  // kiln build --precision bf16: Conv (groups 1) and Gemm / MatMul with a
  // constant weight run the bf16 templates (float32 activations, bf16
  // weights, float32 accumulation); everything else stays float32. The
  // target must pass check_precision (build() checks it first).
  graph::Precision precision = graph::Precision::kFp32;
  // Kernels share their NCHW[x]c work between the threads by rows where
  // their producers wrote by rows (graph/passes/parallel_splits.h); false:
  // every kernel by channel blocks, as the tuner measures a kernel alone
  // (kiln build --channel-splits).
  bool row_splits = true;
};

// Throws std::runtime_error naming the missing feature when `target` cannot
// run the kernels of `precision`: bf16 needs avx512bf16 (vdpbf16ps) or AMX's
// bf16 tiles (amx-tile and amx-bf16: the dense nodes on dense_bf16_amx.x86).
// Elsewhere dot2_bf16's generic lowering would be slower than float32.
void check_precision(graph::Precision precision, const codegen::Target& target);

// What kiln build reports about one template workload of the model.
struct WorkloadUse {
  std::string key;
  int count = 0;            // kernels using it
  bool configured = false;  // a config was given (else the template's fallback)
};

// What the layout choice did (BuildOptions::layout_candidates).
struct LayoutReport {
  bool ran = false;         // some workload had candidates with different blocks
  size_t convs = 0;         // blocked convolutions in the problem
  size_t changed = 0;       // of them, built with other blocks than the per-workload best
  double baseline_ms = 0;   // predicted: kernels + transforms of the per-workload best configs
  double predicted_ms = 0;  // the same for the chosen ones
  size_t transforms_measured = 0, transforms_estimated = 0;  // distinct transforms costed
  bool exact = true;  // false: the solver's greedy fallback ran
};

struct BuiltModule {
  std::vector<ir::LoweredFunc> funcs;
  std::vector<std::string> objects;  // native object code, one per kernel (codegen)
  // Per kernel, in kernel order: function, mod.json label, compile seconds
  // (LLVM's optimization and code generation; kiln build --time-report).
  struct CompileTime {
    std::string func, label;
    double seconds = 0;
    int64_t code_size = 0;  // estimated operations (schedule/code_size.h)
  };
  std::vector<CompileTime> compile_times;
  // Kernels whose unrolling the compile-time budget demoted (some unrolled
  // loops made serial), in kernel order.
  struct Demotion {
    std::string func, label;
    int64_t size_before = 0, size_after = 0, budget = 0;
    std::vector<std::string> loops;  // loop variables made serial
  };
  std::vector<Demotion> demotions;
  std::string graph_json;  // mod.json (docs/package-format.md)
  std::vector<std::pair<std::string, graph::Initializer>> params;  // mod.params, by name
  std::vector<WorkloadUse> workloads;
  size_t generic_kernels = 0;  // kernels without a template (injective, reductions)
  LayoutReport layout;
};

// The whole build of the ONNX model at `model_path`: import, graph passes,
// template selection, configs, template rewrite with weight packing, layout,
// fusion, one kernel per fused group, memory plan, codegen and, when
// options.output_path is set, the package. Throws std::runtime_error naming
// the file, node or value at fault.
BuiltModule build(const std::string& model_path, const BuildOptions& options);

// The same build from an imported graph (tests build graphs by hand).
BuiltModule build_module(graph::Graph g, const BuildOptions& options);

// The workload key of every implementation of every template node a build of
// `g` would compile, in kernel order (duplicates kept; a 3x3 stride-1 Conv
// gives its direct and its Winograd workload): the same graph passes and
// template selection as build() for a target with `isa` (the strategy rows
// may depend on it), without lowering anything. kiln tune's tasks.
std::vector<std::string> template_workloads(graph::Graph g, const Isa& isa = Isa{},
                                            graph::Precision precision = graph::Precision::kFp32);

// The same nodes grouped: per template node in kernel order, the workload keys
// of its implementations, the one an untuned build runs first (a model's
// latency counts the fastest of them once).
std::vector<std::vector<std::string>> template_workload_sets(
    graph::Graph g, const Isa& isa = Isa{}, graph::Precision precision = graph::Precision::kFp32);

}  // namespace kiln::driver
