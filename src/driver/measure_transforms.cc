#include "driver/measure_transforms.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

#include "driver/build.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "runtime/graph_executor.h"
#include "support/temp_files.h"

namespace kiln::driver {
namespace {

// Transforms per package: enough to amortize a build, few enough that one
// package's buffers stay small (ResNet-50's largest activation is 3 MB).
constexpr size_t kBatch = 24;

std::vector<int64_t> physical(const std::vector<int64_t>& s, int64_t block) {
  if (block == 0) return s;
  return {s[0], s[1] / block, s[2], s[3], block};
}

std::string describe(const TransformSpec& s) {
  std::string shape;
  for (int64_t d : s.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  return "layout transform [" + shape + "] " + std::to_string(s.from) + " -> " +
         std::to_string(s.to);
}

void check(const TransformSpec& s) {
  if (s.shape.size() != 4 || s.from == s.to || s.from < 0 || s.to < 0 ||
      (s.from && s.shape[1] % s.from) || (s.to && s.shape[1] % s.to))
    throw std::invalid_argument(
        describe(s) + ": needs a 4-D shape, two different blocks that divide its channels");
}

graph::Node transform_node(size_t i, const TransformSpec& s) {
  graph::Node n;
  n.op_type = "kiln.LayoutTransform";
  n.domain = "kiln";
  n.name = "lt" + std::to_string(i);
  n.inputs = {"x" + std::to_string(i)};
  n.outputs = {"y" + std::to_string(i)};
  n.attrs["src_block"] = s.from;
  n.attrs["dst_block"] = s.to;
  return n;
}

// One batch: built, checked against the reference, timed.
void measure_batch(const std::vector<TransformSpec>& specs, size_t first, size_t count,
                   const codegen::Target& target, int repeats,
                   std::vector<std::vector<double>>& out) {
  graph::Graph g;
  for (size_t i = first; i < first + count; ++i) {
    const TransformSpec& s = specs[i];
    graph::Node n = transform_node(i, s);
    graph::TensorType in{"float32", physical(s.shape, s.from)};
    g.inputs.push_back({n.inputs[0], in});
    g.value_info[n.inputs[0]] = in;
    g.value_info[n.outputs[0]] = {"float32", physical(s.shape, s.to)};
    g.outputs.push_back(n.outputs[0]);
    g.nodes.push_back(std::move(n));
  }
  support::TempDir dir("transforms");
  BuildOptions bo;
  bo.target = target;
  bo.output_path = (dir.path() / "transforms.tar").string();
  build_module(g, bo);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(bo.output_path);
  if (ex.num_kernels() != count)
    throw std::runtime_error("layout transforms: expected " + std::to_string(count) +
                             " kernels, the package has " + std::to_string(ex.num_kernels()));

  // Random inputs; each output must be the reference's, bit for bit (a
  // transform only moves elements).
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<graph::Initializer> inputs(count);
  for (size_t k = 0; k < count; ++k) {
    const graph::ValueInfo& vi = g.inputs[k];
    size_t idx = ex.checked_input_index(vi.name);
    graph::Initializer& x = inputs[k];
    x.type = vi.type;
    x.data.resize(static_cast<size_t>(vi.type.num_elements()) * sizeof(float));
    float* f = reinterpret_cast<float*>(x.data.data());
    for (int64_t e = 0; e < vi.type.num_elements(); ++e) f[e] = dist(rng);
    std::memcpy(ex.input_data(idx), x.data.data(), x.data.size());
  }
  ex.run();
  for (size_t k = 0; k < count; ++k) {
    const graph::Node& n = g.nodes[k];
    std::vector<graph::Initializer> ref = graph::get_op(n.op_type).evaluate(n, {&inputs[k]});
    // Outputs are in graph order (g.outputs), one per transform.
    if (std::memcmp(ex.output_data(k), ref.at(0).data.data(), ref.at(0).data.size()) != 0)
      throw std::runtime_error(describe(specs[first + k]) +
                               ": the compiled kernel's output differs from the reference");
  }
  for (int r = 0; r < repeats; ++r) {
    std::vector<runtime::KernelProfile> prof = ex.run_profiled();
    for (size_t k = 0; k < count; ++k) {
      const runtime::KernelProfile& p = prof.at(k);
      out[first + k].push_back(p.calls ? p.total_ms / static_cast<double>(p.calls) : p.total_ms);
    }
  }
}

}  // namespace

std::vector<std::vector<double>> measure_transforms(const std::vector<TransformSpec>& specs,
                                                    const codegen::Target& target, int repeats) {
  for (const TransformSpec& s : specs) check(s);
  std::vector<std::vector<double>> out(specs.size());
  for (size_t first = 0; first < specs.size(); first += kBatch)
    measure_batch(specs, first, std::min(kBatch, specs.size() - first), target,
                  std::max(1, repeats), out);
  return out;
}

}  // namespace kiln::driver
