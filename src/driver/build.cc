#include "driver/build.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>
#include <variant>

#include "codegen/codegen.h"
#include "driver/debug.h"
#include "driver/host_steps.h"
#include "driver/lower_group.h"
#include "driver/package_writer.h"
#include "frontend/onnx_import.h"
#include "graph/ops/quantize.h"
#include "graph/passes/apply_templates.h"
#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fuse_ops.h"
#include "graph/passes/memory_plan.h"
#include "graph/passes/pad_channels.h"
#include "graph/passes/pipeline.h"
#include "graph/passes/propagate_layout.h"
#include "graph/passes/select_templates.h"
#include "schedule/code_size.h"
#include "support/version.h"

namespace kiln::driver {
namespace {

using graph::Graph;
using nlohmann::json;

// A model file to import, or a graph already imported.
using ModelSource = std::variant<std::string, Graph>;

Graph import_model(ModelSource src, const BuildOptions& o) {
  if (Graph* g = std::get_if<Graph>(&src)) return std::move(*g);
  return frontend::import_onnx(std::get<std::string>(src),
                               frontend::parse_input_shapes(o.input_shapes));
}

// The graph passes before template selection: the target-independent ones
// (simplify, fold constants and BatchNorm, DCE), then, for float32, channel
// counts no vector block divides padded for the target's lanes. The tuner's
// task extraction runs the same (template_workload_sets), so tuned workloads
// are the ones a build looks up. KILN_PAD_CHANNELS=0 leaves channels as they
// are (to compare the two).
void run_graph_passes(Graph& g, const Isa& isa, graph::Precision precision) {
  graph::passes::run_default_passes(g);
  static const bool pad = [] {
    const char* v = std::getenv("KILN_PAD_CHANNELS");
    return !(v && std::string(v) == "0");
  }();
  if (pad && precision == graph::Precision::kFp32) {
    int padded = graph::passes::pad_channels(g, isa.lanes());
    graph::passes::eliminate_dead_code(g);  // the unpadded weights
    graph::passes::trace_pass(g, "pad_channels",
                              std::to_string(padded) + " channel classes padded");
  }
}

// One node's implementations' workload keys, its untuned default first
// (ConfigChooser).
std::vector<std::string> node_implementations(const graph::TemplateSelection& s) {
  std::vector<std::string> keys = {s.implementations.at(s.untuned_default).key()};
  for (size_t i = 0; i < s.implementations.size(); ++i)
    if (i != s.untuned_default) keys.push_back(s.implementations[i].key());
  return keys;
}

// The implementations of every distinct node of the selection, in first-use
// order.
std::vector<std::vector<std::string>> implementation_sets(
    const std::vector<graph::TemplateSelection>& sel) {
  std::vector<std::vector<std::string>> sets;
  for (const auto& s : sel) {
    std::vector<std::string> keys = node_implementations(s);
    if (std::find(sets.begin(), sets.end(), keys) == sets.end()) sets.push_back(std::move(keys));
  }
  return sets;
}

// The chooser's configs (tuning records), then the explicit ones over them;
// then each node's implementation: the fastest record's, an explicit config
// winning over any record.
// The layout choice over the chosen configs (BuildOptions::layout_candidates):
// nodes it gives another config get it as their own (TemplateSelection::config_json).
LayoutReport choose_layouts(const Graph& g, std::vector<graph::TemplateSelection>& sel,
                            const std::map<std::string, std::string>& configs,
                            const BuildOptions& o) {
  LayoutReport report;
  std::vector<std::string> keys;
  for (const auto& s : sel)
    for (const ops::Workload& w : s.implementations)
      if (!o.configs.count(w.key())) keys.push_back(w.key());
  std::map<std::string, std::vector<graph::ConfigCandidate>> cands = o.layout_candidates(keys);
  // Only worth it where some workload's records offer more than one layout.
  bool choice = false;
  for (const auto& [key, c] : cands)
    for (const graph::ConfigCandidate& k : c)
      choice |= k.in_block != c.front().in_block || k.out_block != c.front().out_block;
  if (!choice) return report;
  std::set<std::tuple<std::vector<int64_t>, int64_t, int64_t>> measured, estimated;
  auto transform = [&](const std::vector<int64_t>& nchw, int64_t from, int64_t to) {
    bool est = false;
    double ms = o.transform_ms ? o.transform_ms(nchw, from, to, &est) : 0.0;
    (est ? estimated : measured).insert({nchw, from, to});
    return ms;
  };
  // A node with an explicit config keeps it: it is not in the problem.
  std::vector<graph::TemplateSelection> open;
  for (const auto& s : sel) {
    bool explicit_config = false;
    for (const ops::Workload& w : s.implementations)
      explicit_config |= o.configs.count(w.key()) > 0;
    if (!explicit_config) open.push_back(s);
  }
  graph::LayoutChoice c = graph::choose_layouts(g, open, cands, configs, transform);
  for (auto& s : sel) {
    auto it = c.configs.find(s.node);
    if (it == c.configs.end()) continue;
    s.workload = it->second.first;
    s.template_name = s.workload.template_name;
    s.config_json = it->second.second;
  }
  report.ran = true;
  report.convs = c.convs;
  report.changed = c.changed;
  report.baseline_ms = c.baseline_ms;
  report.predicted_ms = c.predicted_ms;
  report.transforms_measured = measured.size();
  report.transforms_estimated = estimated.size();
  report.exact = c.exact;
  return report;
}

std::map<std::string, std::string> choose_configs(const Graph& g,
                                                  std::vector<graph::TemplateSelection>& sel,
                                                  const BuildOptions& o, LayoutReport* layout) {
  constexpr double kExplicitConfig = 1e300;
  std::map<std::string, std::string> configs;
  std::map<std::string, double> gflops;
  if (o.choose_configs)
    for (const auto& [key, c] : o.choose_configs(implementation_sets(sel))) {
      configs[key] = c.config_json;
      gflops[key] = c.gflops;
    }
  for (const auto& [key, cfg] : o.configs) {
    configs[key] = cfg;
    gflops[key] = kExplicitConfig;
  }
  graph::choose_implementations(sel, gflops);
  if (o.layout_candidates) *layout = choose_layouts(g, sel, configs, o);
  return configs;
}

// Counts template uses per workload key, in first-use order.
std::vector<WorkloadUse> count_workloads(const std::vector<graph::TemplateUse>& uses) {
  std::vector<WorkloadUse> out;
  for (const auto& u : uses) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const WorkloadUse& w) { return w.key == u.workload; });
    if (it == out.end())
      out.push_back({u.workload, 1, u.configured});
    else
      ++it->count;
  }
  return out;
}

// One kernel per fused group, named kiln_k<i>; generic schedules take the
// target's vector lanes.
std::vector<GroupKernel> lower_groups(const Graph& g, const std::vector<graph::FusedGroup>& groups,
                                      const std::vector<graph::ParallelSplit>& splits,
                                      const codegen::Target& target) {
  const int64_t lanes = target.float_lanes();  // asks LLVM: once, not per group
  std::vector<GroupKernel> kernels;
  for (size_t i = 0; i < groups.size(); ++i)
    kernels.push_back(lower_group(g, groups[i], "kiln_k" + std::to_string(i), lanes, splits.at(i)));
  return kernels;
}

// The executor's view: every value that crosses a kernel boundary, the
// graph's inputs and outputs, and the weights among them.
struct TensorTable {
  std::vector<std::string> names;
  std::map<std::string, size_t> index;
  std::vector<std::pair<std::string, std::string>> params;  // param name -> value

  void add(const std::string& value) {
    if (index.emplace(value, names.size()).second) names.push_back(value);
  }
};

// A view group: no kernel. A reshape (graph::storage_alias) has one input,
// in whose storage its output lives; a concat (graph::concat_view) has its
// inputs written in place inside its output's storage, at `offsets`.
// `position`: the number of kernels that run before it.
struct ViewAlias {
  size_t position = 0;
  std::string output;
  std::vector<std::string> inputs;
  std::vector<size_t> offsets;  // concat only
  bool concat = false;
};

// How each kernel shares its work between the threads: as its producers
// did (graph/passes/parallel_splits.h), or every kernel by channel blocks
// (BuildOptions::row_splits off).
std::vector<graph::ParallelSplit> choose_splits(const Graph& g,
                                                const std::vector<graph::FusedGroup>& groups,
                                                const std::vector<ViewAlias>& views,
                                                const BuildOptions& o) {
  if (!o.row_splits) return std::vector<graph::ParallelSplit>(groups.size());
  std::map<std::string, std::vector<std::string>> view_sources;
  for (const ViewAlias& v : views) view_sources[v.output] = v.inputs;
  return graph::choose_parallel_splits(g, groups, view_sources);
}

// The concats whose inputs can be written in place: each input produced by
// a kernel (not a graph input, weight or output, nor a reshape's or another
// concat's output) and read by no other such concat (DenseNet's features
// join several concats and stay copies).
std::set<size_t> in_place_concats(const Graph& g, const std::vector<graph::FusedGroup>& groups) {
  std::set<std::string> external(g.outputs.begin(), g.outputs.end()), from_views;
  for (const auto& in : g.inputs) external.insert(in.name);
  std::map<std::string, int> uses;
  std::map<size_t, graph::ConcatView> candidates;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (auto a = graph::storage_alias(g, groups[i])) from_views.insert(a->first);
    if (auto c = graph::concat_view(g, groups[i])) {
      from_views.insert(c->output);
      for (const std::string& in : c->inputs) ++uses[in];
      candidates.emplace(i, std::move(*c));
    }
  }
  std::set<size_t> accepted;
  for (const auto& [i, c] : candidates) {
    bool ok = true;
    for (const std::string& in : c.inputs)
      ok = ok && uses[in] == 1 && !external.count(in) && !g.initializers.count(in) &&
           !from_views.count(in);
    if (ok) accepted.insert(i);
  }
  return accepted;
}

// Splits off the view groups: each remaining group becomes a kernel.
std::vector<graph::FusedGroup> split_views(const Graph& g, std::vector<graph::FusedGroup> groups,
                                           std::vector<ViewAlias>& views) {
  const std::set<size_t> concats = in_place_concats(g, groups);
  std::vector<graph::FusedGroup> kernel_groups;
  for (size_t i = 0; i < groups.size(); ++i) {
    graph::FusedGroup& grp = groups[i];
    if (auto a = graph::storage_alias(g, grp)) {
      views.push_back({kernel_groups.size(), a->first, {a->second}, {0}, false});
    } else if (concats.count(i)) {
      graph::ConcatView c = *graph::concat_view(g, grp);
      views.push_back({kernel_groups.size(), c.output, c.inputs, c.offsets, true});
    } else {
      kernel_groups.push_back(std::move(grp));
    }
  }
  return kernel_groups;
}

TensorTable tabulate(const Graph& g, const std::vector<GroupKernel>& kernels,
                     const std::vector<ViewAlias>& views) {
  TensorTable table;
  for (const auto& in : g.inputs) table.add(in.name);
  for (const GroupKernel& k : kernels)
    for (const std::string& a : k.args) table.add(a);
  for (const ViewAlias& v : views) {
    for (const std::string& in : v.inputs) table.add(in);
    table.add(v.output);
  }
  for (const std::string& out : g.outputs) {
    if (!g.type_of(out)) throw std::runtime_error("graph output '" + out + "' has no type");
    table.add(out);
  }
  for (const auto& [name, init] : g.host.constants) table.add(host_constant_tensor(name));
  for (const std::string& name : table.names)
    if (g.initializers.count(name))
      table.params.emplace_back("p" + std::to_string(table.params.size()), name);
  return table;
}

const graph::TensorType& type_of(const Graph& g, const std::string& value) {
  const graph::TensorType* t = g.type_of(value);
  if (!t) throw std::runtime_error("value '" + value + "' has no inferred type");
  return *t;
}

// Storage for every tensor: graph inputs, outputs and weights own theirs;
// intermediates share storage once their readers have run.
// A view is a step that reads its input and produces its output as an alias
// of it, in its place in the execution order.
graph::passes::MemoryPlan plan_storage(const Graph& g, const std::vector<GroupKernel>& kernels,
                                       const std::vector<ViewAlias>& views,
                                       const TensorTable& table) {
  graph::passes::MemoryPlanRequest req;
  size_t next_view = 0;
  auto add_views_before = [&](size_t k) {
    for (; next_view < views.size() && views[next_view].position <= k; ++next_view) {
      const ViewAlias& v = views[next_view];
      req.steps.push_back({v.inputs, {v.output}});
      if (v.concat)
        req.concats.push_back({v.output, v.inputs, v.offsets});
      else
        req.aliases.push_back({v.output, v.inputs.at(0), 0});
    }
  };
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    add_views_before(ki);
    const GroupKernel& k = kernels[ki];
    graph::passes::PlanStep step;
    for (const std::string& a : k.args) {
      bool produced = std::find(k.outputs.begin(), k.outputs.end(), a) != k.outputs.end();
      (produced ? step.outputs : step.inputs).push_back(a);
    }
    req.steps.push_back(std::move(step));
  }
  add_views_before(kernels.size());
  for (const std::string& name : table.names) {
    const graph::TensorType& t = type_of(g, name);
    req.sizes[name] = static_cast<size_t>(t.num_elements()) * graph::dtype_size(t.dtype);
    if (g.initializers.count(name)) req.external.insert(name);
  }
  for (const auto& in : g.inputs) req.external.insert(in.name);
  for (const auto& out : g.outputs) req.external.insert(out);
  return graph::passes::plan_memory(req);
}

// Every tensor index a "tensor" field names anywhere in `j` (the host
// region's steps, nested subgraph steps included, and the outputs).
void tensor_refs(const json& j, std::set<int64_t>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "tensor" && it.value().is_number_integer())
        out->insert(it.value().get<int64_t>());
      else
        tensor_refs(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const json& e : j) tensor_refs(e, out);
  }
}

// Marks the inputs whose data nothing in the package reads "unread": no
// kernel argument, host step input or output names their tensor or one
// sharing its storage (a view). Only their dtype mattered (CastLike's like).
void mark_unread_inputs(json& j) {
  std::set<int64_t> read;
  for (const json& k : j["kernels"])
    for (const json& a : k["args"]) read.insert(a.get<int64_t>());
  tensor_refs(j["outputs"], &read);
  if (j.contains("host")) tensor_refs(j["host"], &read);
  std::set<int64_t> storages;
  for (int64_t t : read)
    storages.insert(j["tensors"][static_cast<size_t>(t)]["storage"].get<int64_t>());
  for (json& in : j["inputs"]) {
    const int64_t t = in["tensor"].get<int64_t>();
    if (!storages.count(j["tensors"][static_cast<size_t>(t)]["storage"].get<int64_t>()))
      in["unread"] = true;
  }
}

// mod.json (docs/package-format.md).
json describe(const Graph& g, const std::vector<graph::FusedGroup>& groups,
              const std::vector<GroupKernel>& kernels, const TensorTable& table,
              const graph::passes::MemoryPlan& plan, const codegen::Target& target) {
  json j;
  j["format_version"] = 1;
  j["kiln_version"] = kiln_version();
  j["target"] = target.str();
  // What the runtime checks before any kernel runs (runtime/cpu_features.h).
  j["requires"] = {{"arch", target.arch()}, {"cpu_features", target.required_features()}};
  j["storages"] = json::array();
  for (const auto& s : plan.storages)
    j["storages"].push_back({{"bytes", std::max<size_t>(s.size, 1)}});
  j["tensors"] = json::array();
  for (const std::string& name : table.names) {
    const graph::TensorType& t = type_of(g, name);
    const graph::passes::StorageSlot& slot = plan.values.at(name);
    j["tensors"].push_back({{"name", name},
                            {"dtype", t.dtype},
                            {"shape", t.shape},
                            {"storage", slot.storage},
                            {"offset", slot.offset}});
  }
  j["inputs"] = json::array();
  for (const auto& in : g.inputs)
    j["inputs"].push_back({{"name", in.name}, {"tensor", table.index.at(in.name)}});
  j["outputs"] = json::array();
  for (const auto& out : g.outputs)
    j["outputs"].push_back({{"name", out}, {"tensor", table.index.at(out)}});
  if (!g.host.empty()) {
    // The run-time shaped part, after the kernels; the package's outputs in
    // the model's order, some of them its values.
    HostDescription h = describe_host(g, [&](const std::string& v) { return table.index.at(v); });
    j["host"] = std::move(h.host);
    j["outputs"] = std::move(h.outputs);
  }
  j["params"] = json::array();
  for (const auto& [pname, value] : table.params)
    j["params"].push_back({{"name", pname}, {"tensor", table.index.at(value)}});
  j["kernels"] = json::array();
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<size_t> args;
    for (const std::string& a : kernels[i].args) args.push_back(table.index.at(a));
    // The graph's nodes fused into it, for run-time errors that name them
    // (an index out of range).
    json nodes = json::array();
    for (size_t ni : groups[i].nodes)
      nodes.push_back({{"name", g.nodes[ni].name}, {"op_type", g.nodes[ni].op_type}});
    j["kernels"].push_back({{"name", graph::group_label(g, groups[i]) + "_" + std::to_string(i)},
                            {"func", kernels[i].func.name},
                            {"args", args},
                            {"op_types", kernels[i].op_types},
                            {"nodes", nodes},
                            {"workload", kernels[i].workload},
                            {"flops", kernels[i].flops}});
  }
  mark_unread_inputs(j);
  return j;
}

// Everything a package holds, from the lowered kernels and the plan.
BuiltModule assemble(const Graph& g, const std::vector<graph::FusedGroup>& groups,
                     std::vector<GroupKernel> kernels, const TensorTable& table,
                     const graph::passes::MemoryPlan& plan, const codegen::Target& target) {
  BuiltModule m;
  m.graph_json = describe(g, groups, kernels, table, plan, target).dump(1);
  for (const auto& [pname, value] : table.params)
    m.params.emplace_back(pname, g.initializers.at(value));
  for (size_t i = 0; i < kernels.size(); ++i) {
    GroupKernel& k = kernels[i];
    if (k.workload.empty()) ++m.generic_kernels;
    std::string label = graph::group_label(g, groups[i]) + "_" + std::to_string(i);
    m.compile_times.push_back({k.func.name, label, 0, k.code_size});
    if (!k.demoted.empty())
      m.demotions.push_back({k.func.name, label, k.code_size_before, k.code_size,
                             schedule::kDefaultCodeBudget, k.demoted});
    m.funcs.push_back(std::move(k.func));
  }
  return m;
}

// Native code for every kernel (compiled in parallel, one object each),
// with each kernel's compile time.
void generate_code(BuiltModule& m, const codegen::Target& target) {
  std::vector<codegen::CompiledKernel> compiled = codegen::compile_kernels(m.funcs, target);
  for (size_t i = 0; i < compiled.size(); ++i) {
    m.compile_times.at(i).seconds = compiled[i].seconds;  // func, label, size: assemble()
    m.objects.push_back(std::move(compiled[i].object));
  }
}

// bf16 is a float model's precision: a quantized (QDQ) model builds as int8 from its own
// scales whatever --precision says, so bf16 there is refused, not silently ignored (issue 65
// #15).
void check_not_quantized(const Graph& g, graph::Precision precision, const std::string& file) {
  if (precision == graph::Precision::kFp32) return;
  for (const graph::Node& n : g.nodes)
    if (n.domain.empty() && graph::is_quantized_op(n.op_type))
      throw std::runtime_error(file + "--precision bf16 does not apply to a quantized model " +
                               "(node '" + n.name + "' is " + n.op_type +
                               "): QDQ models build as int8, from their own scales; build it " +
                               "without --precision bf16");
}

// The whole build, in order. Each step is one call; KILN_DEBUG_GRAPH prints
// the graph after the graph steps and KILN_DEBUG_LOWER the loop IR of every
// kernel after each lowering pass (driver/debug.h lists the switches).
BuiltModule run_build(ModelSource model, const BuildOptions& o) {
  check_precision(o.precision, o.target);
  if (!o.output_path.empty()) check_output_path(o.output_path);  // before the slow part
  const std::string* path = std::get_if<std::string>(&model);
  const std::string file = path ? *path + ": " : "";
  Graph g = import_model(std::move(model), o);
  debug_graph("import", g);
  check_not_quantized(g, o.precision, file);
  run_graph_passes(g, o.target.isa(), o.precision);
  debug_graph("graph passes", g);
  std::vector<graph::TemplateSelection> selected =
      graph::select_templates(g, o.target.isa(), o.precision);
  LayoutReport layout;
  std::map<std::string, std::string> configs = choose_configs(g, selected, o, &layout);
  std::vector<graph::TemplateUse> uses =
      graph::apply_templates(g, selected, configs, o.target.isa());
  debug_graph("templates", g);
  graph::propagate_layout(g);
  debug_graph("layout", g);
  std::vector<graph::FusedGroup> groups = graph::fuse_ops(g);
  debug_graph("fusion", g, groups);
  std::vector<ViewAlias> views;  // Reshape/Flatten/..., concats: no kernel
  groups = split_views(g, std::move(groups), views);
  std::vector<graph::ParallelSplit> splits = choose_splits(g, groups, views, o);
  std::vector<GroupKernel> kernels = lower_groups(g, groups, splits, o.target);
  add_host_constants(g);  // after the passes, which would repack them
  TensorTable table = tabulate(g, kernels, views);
  graph::passes::MemoryPlan plan = plan_storage(g, kernels, views, table);
  BuiltModule m = assemble(g, groups, std::move(kernels), table, plan, o.target);
  m.workloads = count_workloads(uses);
  m.layout = layout;
  generate_code(m, o.target);
  if (!o.dump_kernels_dir.empty()) dump_kernels(m.funcs, o.target, o.dump_kernels_dir);
  if (!o.output_path.empty()) write_package(m, o.target, o.output_path, o.format);
  return m;
}

}  // namespace

void check_precision(graph::Precision precision, const codegen::Target& target) {
  // AMX's bf16 tiles run the dense nodes (dense_bf16_amx.x86). A bf16 Conv
  // on a target with amx-bf16 but not avx512bf16 (no shipping CPU: Sapphire
  // Rapids has both) takes dot2_bf16's generic lowering (docs/amx.md).
  if (precision != graph::Precision::kBf16 || target.has_feature("avx512bf16") ||
      target.isa().amx_bf16)
    return;
  std::string cpu = target.cpu.empty() ? target.triple : "-mcpu=" + target.cpu;
  throw std::runtime_error(
      "--precision bf16 needs avx512bf16 or AMX (amx-tile and amx-bf16), "
      "which the target (" +
      cpu + ") lacks; build with --precision fp32");
}

BuiltModule build(const std::string& model_path, const BuildOptions& options) {
  return run_build(model_path, options);
}

BuiltModule build_module(Graph g, const BuildOptions& options) {
  return run_build(std::move(g), options);
}

std::vector<std::vector<std::string>> template_workload_sets(Graph g, const Isa& isa,
                                                             graph::Precision precision) {
  run_graph_passes(g, isa, precision);
  std::vector<std::vector<std::string>> sets;
  for (const graph::TemplateSelection& s : graph::select_templates(g, isa, precision))
    sets.push_back(node_implementations(s));
  return sets;
}

std::vector<std::string> template_workloads(Graph g, const Isa& isa, graph::Precision precision) {
  run_graph_passes(g, isa, precision);
  std::vector<std::string> keys;
  for (const graph::TemplateSelection& s : graph::select_templates(g, isa, precision))
    for (const ops::Workload& w : s.implementations) keys.push_back(w.key());
  return keys;
}

}  // namespace kiln::driver
