// The layout choice inside a build (driver::BuildOptions::layout_candidates):
// a ResNet block built with candidates of several channel-block pairs per
// workload (direct and Winograd) must compute what the interpreter computes,
// whichever blocks and implementations the choice mixes; and the layout
// transforms themselves, built and timed (driver/measure_transforms.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "driver/build.h"
#include "driver/measure_transforms.h"
#include "graph/graph_builder.h"
#include "ops/op_template.h"
#include "runtime/graph_executor.h"
#include "support/temp_files.h"

namespace kiln::test {
namespace {

// x -> conv (bias) with a k x k window, stride s, pad k / 2.
std::string conv(GraphBuilder& b, const std::string& x, int64_t ic, int64_t oc, int64_t k,
                 int64_t stride, const std::string& name) {
  std::string w = b.random_constant(name + "_w", {oc, ic, k, k}, -0.2, 0.2);
  std::string bias = b.random_constant(name + "_b", {oc}, -0.3, 0.3);
  int64_t pad = k / 2;
  return b.node("Conv", {x, w, bias},
                {{"kernel_shape", std::vector<int64_t>{k, k}},
                 {"strides", std::vector<int64_t>{stride, stride}},
                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}}},
                name);
}

// The executor's outputs of a package on `inputs`, by graph output name.
std::map<std::string, graph::Initializer> run_package(
    const std::string& path, const graph::Graph& g,
    const std::map<std::string, graph::Initializer>& inputs) {
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(path);
  for (const auto& [name, v] : inputs)
    ex.set_input(name, v.data.data(), runtime::DType::parse(v.type.dtype), v.type.shape);
  ex.run();
  std::map<std::string, graph::Initializer> out;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    graph::Initializer& o = out[g.outputs[i]];
    o.type = *g.type_of(g.outputs[i]);
    o.data.resize(static_cast<size_t>(o.type.num_elements()) * 4);
    std::memcpy(o.data.data(), ex.output_data(i), o.data.size());
  }
  return out;
}

// Per workload: up to three configs with different block pairs (fitting the
// host's registers), with random times.
std::map<std::string, std::vector<graph::ConfigCandidate>> random_candidates(
    const std::vector<std::string>& keys, std::mt19937& rng) {
  std::map<std::string, std::vector<graph::ConfigCandidate>> out;
  std::mt19937_64 cfg_rng(rng());
  std::uniform_real_distribution<double> ms(0.05, 1.0);
  Isa isa = codegen::Target::host().isa();
  for (const std::string& key : keys) {
    ops::Workload w = ops::Workload::parse(key);
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    if (!t.channel_blocked()) continue;
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int i = 0; i < 300 && out[key].size() < 3; ++i) {
      schedule::Config c = t.space(w).random(cfg_rng);
      auto blocks = ops::layout_blocks(t, w, c);
      if (!t.fits(w, c, isa) || !seen.insert(blocks).second) continue;
      out[key].push_back({c.to_json(), ms(rng), blocks.first, blocks.second});
    }
  }
  return out;
}

TEST(LayoutBuild, MixedBlocksAndImplementationsComputeTheModel) {
  GraphBuilder b(3);
  std::string x = b.input("x", {1, 16, 12, 12});
  std::string c1 = conv(b, x, 16, 32, 3, 2, "conv1");
  std::string r1 = b.node("Relu", {c1}, {}, "relu1");
  std::string c2 = conv(b, r1, 32, 32, 3, 1, "conv2");
  std::string cd = conv(b, x, 16, 32, 1, 2, "down");
  std::string s = b.node("Add", {c2, cd}, {}, "add");
  b.output(b.node("Relu", {s}, {}, "relu2"));
  const graph::Graph& g = b.graph();
  std::map<std::string, graph::Initializer> inputs = b.inputs();
  std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);
  support::TempDir dir("layout-test");
  size_t changed = 0;
  for (unsigned seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    driver::BuildOptions o;
    size_t asked = 0;
    o.layout_candidates = [&](const std::vector<std::string>& keys) {
      asked = keys.size();
      return random_candidates(keys, rng);
    };
    size_t transforms = 0;
    o.transform_ms = [&](const std::vector<int64_t>& nchw, int64_t from, int64_t to,
                         bool* estimated) {
      EXPECT_EQ(nchw.size(), 4u);
      EXPECT_NE(from, to);
      *estimated = false;
      ++transforms;
      return 0.3 + 0.1 * static_cast<double>(seed);  // comparable to the kernels' times
    };
    o.output_path = (dir.path() / ("block" + std::to_string(seed) + ".tar")).string();
    driver::BuiltModule m = driver::build_module(g, o);
    EXPECT_EQ(asked, 4u);  // conv1, conv2 direct and Winograd, down
    ASSERT_TRUE(m.layout.ran);
    EXPECT_EQ(m.layout.convs, 3u);
    EXPECT_GT(transforms, 0u);
    EXPECT_LE(m.layout.predicted_ms, m.layout.baseline_ms + 1e-12);
    changed += m.layout.changed;
    expect_same_outputs(run_package(o.output_path, g, inputs), want, 1e-4);
  }
  EXPECT_GT(changed, 0u);  // the random times made some conv leave the per-workload best
}

// Without candidates of different blocks there is nothing to choose.
TEST(LayoutBuild, OneLayoutPerWorkloadChangesNothing) {
  GraphBuilder b(4);
  std::string x = b.input("x", {1, 16, 8, 8});
  b.output(conv(b, x, 16, 16, 1, 1, "conv1"));
  graph::Graph g = b.graph();
  driver::BuildOptions o;
  o.layout_candidates = [](const std::vector<std::string>& keys) {
    std::map<std::string, std::vector<graph::ConfigCandidate>> out;
    for (const std::string& k : keys) {
      ops::Workload w = ops::Workload::parse(k);
      const ops::OpTemplate& t = ops::get_template(w.template_name);
      schedule::Config c = t.fallback(w, codegen::Target::host().isa());
      auto [ib, ob] = ops::layout_blocks(t, w, c);
      out[k].push_back({c.to_json(), 0.1, ib, ob});
    }
    return out;
  };
  driver::BuiltModule m = driver::build_module(g, o);
  EXPECT_FALSE(m.layout.ran);
}

TEST(LayoutTransforms, MeasuredAndVerified) {
  std::vector<driver::TransformSpec> specs = {
      {{1, 32, 7, 9}, 0, 8}, {{1, 32, 7, 9}, 8, 16}, {{1, 32, 7, 9}, 16, 0}, {{1, 24, 5, 5}, 8, 4}};
  std::vector<std::vector<double>> t =
      driver::measure_transforms(specs, codegen::Target::host(), 3);
  ASSERT_EQ(t.size(), specs.size());
  for (const auto& v : t) {
    ASSERT_EQ(v.size(), 3u);
    for (double ms : v) EXPECT_GT(ms, 0.0);
  }
  // Blocks must divide the channels, and a transform must move something.
  EXPECT_THROW(driver::measure_transforms({{{1, 24, 5, 5}, 0, 16}}, codegen::Target::host(), 1),
               std::invalid_argument);
  EXPECT_THROW(driver::measure_transforms({{{1, 24, 5, 5}, 8, 8}}, codegen::Target::host(), 1),
               std::invalid_argument);
}

}  // namespace
}  // namespace kiln::test
