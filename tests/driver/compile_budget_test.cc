// The compile budget in a build: a MatMul configured (--config) with a
// register tile whose unrolled size is far over the budget is built with its
// outermost unrolled loops made serial, the build says so (BuiltModule::
// demotions; one line of kiln build's output), --time-report lists the
// slowest kernels with their estimated sizes, and the package still computes
// the graph's result.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "driver_harness.h"
#include "ops/dense.h"
#include "ops/op_template.h"
#include "schedule/code_size.h"

namespace kiln::test {
namespace {

std::vector<std::string> dims(const std::vector<int64_t>& s) {
  std::vector<std::string> d;
  for (int64_t v : s) d.push_back(std::to_string(v));
  return d;
}

// x[50, 64] x W[64, 80]: dense_pack.x86 with 16-row tiles over 50 rows and
// 64-column tiles over 80 columns (both guarded), unrolled over k by 32: 16 x
// 64 accumulators updated 32 times, as AVX2 code (kAvx2Target: 8 registers a
// row), over the default budget.
const char* const kAvx2Target = "llvm -mcpu=haswell";
OnnxBuilder matmul_model() {
  std::mt19937 rng(5);
  OnnxBuilder b;
  b.input("x", dims({50, 64}));
  b.output("y", dims({50, 80}));
  init_random(b, "W", {64, 80}, rng);
  b.node("MatMul", "mm", {"x", "W"}, {"y"});
  return b;
}

std::string over_budget_config(const ops::Workload& w) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  return ops::detail::KnobValues()
      .split("tile_y", 50, {1, 16})
      .split("tile_x", 80, {1, 64})
      .split("tile_k", 64, {32})
      .knob("tile_order", 0)
      .in(t.space(w))
      .to_json();
}

TEST(CompileBudgetBuild, OverBudgetKernelIsDemotedReportedAndCorrect) {
  ScratchDir dir;
  std::string onnx_path = dir.file("mm.onnx");
  write_bytes(onnx_path, matmul_model().bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, {});
  std::vector<std::string> keys = driver::template_workloads(g);
  ASSERT_EQ(keys.size(), 1u);
  ops::Workload w = ops::Workload::parse(keys[0]);
  ASSERT_EQ(w.template_name, "dense_pack.x86") << keys[0];
  std::string cfg = over_budget_config(w);

  std::mt19937 rng(3);
  std::map<std::string, graph::Initializer> inputs;
  inputs["x"] = random_input(g.inputs.at(0).type, InputRange{}, rng);
  std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);

  driver::BuildOptions options;
  options.target = codegen::Target::parse(kAvx2Target);
  options.configs[keys[0]] = cfg;
  driver::BuiltModule m = driver::build_module(g, options);
  ASSERT_EQ(m.demotions.size(), 1u);
  const auto& d = m.demotions[0];
  EXPECT_GT(d.size_before, schedule::kDefaultCodeBudget);
  EXPECT_LE(d.size_after, schedule::kDefaultCodeBudget);
  EXPECT_EQ(d.budget, schedule::kDefaultCodeBudget);
  EXPECT_FALSE(d.loops.empty());
  for (const auto& t : m.compile_times) {
    EXPECT_GT(t.code_size, 0) << t.func;
    EXPECT_LT(t.seconds, 20) << t.func;
  }

  std::string pkg = dir.file("mm.tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  ex.set_input("x", to_ndarray(inputs["x"]));
  ex.run();
  expect_close(want.at("y"), ex.output(0), "y", 1e-5);

  // kiln build says it, once, and --time-report shows estimated sizes.
  ScratchDir tmp, capture;
  std::string cfg_file = dir.file("cfg.jsonl");
  write_bytes(
      cfg_file,
      nlohmann::json{{"workload", keys[0]}, {"config", nlohmann::json::parse(cfg)}}.dump() + "\n");
  CommandResult r =
      run_kiln("build " + quote(onnx_path) + " -o " + quote(dir.file("cli.tar")) + " --config " +
                   quote(cfg_file) + " --time-report --target " + quote(kAvx2Target),
               tmp, capture);
  ASSERT_EQ(r.status, 0) << r.err;
  size_t at = r.out.find("compile budget: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("compile budget: ", at + 1), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("made serial", at), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("est. ops"), std::string::npos) << r.out;

  // Without the config (the fallback) nothing is demoted.
  EXPECT_TRUE(driver::build_module(g, {}).demotions.empty());
}

// A chain of 5,000 elementwise nodes, each reading a constant of its own
// (issue 65, item 6): fused into one kernel, 1,000 such Adds took 39 s to
// build and 2,000 more than 110 s (every inlined stage was substituted into
// every stage; the kernel's 2,001 buffers each a noalias scope on every
// access in LLVM). The fusion splits the chain into kernels of bounded size,
// each estimated within the budget, and the package computes the chain.
TEST(CompileBudgetBuild, AChainOfFiveThousandElementwiseNodesBuildsAndComputes) {
  const int n = 5000;
  std::mt19937 rng(65);
  OnnxBuilder b;
  b.input("x", {"1", "64"});
  std::string y = "x";
  for (int i = 0; i < n; ++i) {
    const std::string c = "c" + std::to_string(i), out = "y" + std::to_string(i);
    // Add a small constant, or scale by one near 1: the values stay in range.
    std::vector<float> v = uniform(64, rng);
    for (float& f : v) f = i % 2 ? 1.f + f / 1000.f : f / 100.f;
    b.init_f32(c, {64}, v);
    b.node(i % 2 ? "Mul" : "Add", "n" + std::to_string(i), {y, c}, {out});
    y = out;
  }
  b.output(y, {"1", "64"});
  ScratchDir dir;
  std::string onnx_path = dir.file("chain.onnx");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, {});
  ASSERT_EQ(g.nodes.size(), static_cast<size_t>(n));

  std::mt19937 in_rng(3);
  std::map<std::string, graph::Initializer> inputs;
  inputs["x"] = random_input(g.inputs.at(0).type, InputRange{}, in_rng);
  std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);

  auto start = std::chrono::steady_clock::now();
  driver::BuildOptions options;
  driver::BuiltModule m = driver::build_module(g, options);
  std::cout << "built " << n << " nodes in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s, " << m.compile_times.size() << " kernels\n";
  EXPECT_GE(m.compile_times.size(), static_cast<size_t>(n / 128));
  for (const auto& t : m.compile_times)
    EXPECT_LE(t.code_size, schedule::kDefaultCodeBudget) << t.func;

  std::string pkg = dir.file("chain.tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  ex.set_input("x", to_ndarray(inputs["x"]));
  ex.run();
  expect_close(want.at(y), ex.output(0), y, 1e-4);
}

}  // namespace
}  // namespace kiln::test
