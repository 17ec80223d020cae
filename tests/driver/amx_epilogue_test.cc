// Epilogues fused after the AMX templates run per parallel task (docs/amx.md,
// "Epilogues"; driver/lower_group.cc, OpTemplate::TaskEpilogue): each task's
// tiles write an accumulator of the task's rows, allocated inside the task
// loop, and the epilogue (requantization with per-channel scales and zero
// points, bias, Relu, a residual Add) finishes those rows right after the
// task's amx_gemm. For each template and the epilogues it fuses, on shapes
// whose last task is partial, every config of its space:
//  - the lowered IR: the accumulator is one task's rows (16 * panels_per_task
//    x N) allocated inside the parallel loop, no buffer of the whole [rows, N]
//    output exists, the output is stored only inside the task loop after the
//    tiles;
//  - built with the tiles emulated (KILN_DEBUG_AMX_EMULATE=1), the outputs
//    are byte-identical to the interpreter's integer operators (bf16: within
//    float32 summation order); on a CPU with AMX the int8 cases also run on
//    the tile instructions (skipped elsewhere).
// The batched template's epilogue (requantization and its row / column sum
// corrections) is checked the same way in amx_bmm_build_test.cc, and every
// AMX build test checks the IR of its kernels (expect_epilogues_per_task).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "amx_harness.h"
#include "driver_harness.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "ops/dense_int8_amx_template.h"
#include "ops/op_template.h"
#include "runtime/cpu_features.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

// Q -> DQ of `x` (uint8, scale s, zero point zp); returns the float value.
std::string qdq(OnnxBuilder& b, const std::string& name, const std::string& x, float s,
                uint8_t zp) {
  b.init_f32(name + ".scale", {}, {s});
  init_raw<uint8_t>(b, name + ".zp", {}, onnx::TensorProto::UINT8, {zp});
  b.node("QuantizeLinear", name + ".q", {x, name + ".scale", name + ".zp"}, {name + ".u"});
  b.node("DequantizeLinear", name + ".dq", {name + ".u", name + ".scale", name + ".zp"},
         {name + ".f"});
  return name + ".f";
}

// DQ of a random int8 weight of `shape` with per-channel scales along `axis`.
std::string weight(OnnxBuilder& b, const std::string& name, const Shape& shape, int64_t axis,
                   std::mt19937& rng) {
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> w(numel(shape));
  for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
  init_raw<int8_t>(b, name, shape, onnx::TensorProto::INT8, w);
  const int64_t n = shape[static_cast<size_t>(axis)];
  b.init_f32(name + ".s", {n}, uniform(static_cast<size_t>(n), rng, 0.002f, 0.01f));
  init_raw<int8_t>(b, name + ".zp", {n}, onnx::TensorProto::INT8,
                   std::vector<int8_t>(static_cast<size_t>(n), 0));
  OnnxBuilder::attr_int(
      b.node("DequantizeLinear", name + ".dq", {name, name + ".s", name + ".zp"}, {name + ".f"}),
      "axis", axis);
  return name + ".f";
}

// The anchor's float result `y` quantized (what makes it an integer
// template with a requantization), + the dequantized residual `sf` of its
// shape, Relu, quantized to the output "out" (nonzero zero points).
void residual_relu_output(OnnxBuilder& b, const std::string& y, const std::string& sf,
                          const Shape& shape, float scale) {
  std::string yf = qdq(b, "qy", y, scale, 117);
  b.node("Add", "residual", {yf, sf}, {"sum"});
  b.node("Relu", "relu", {"sum"}, {"r"});
  b.init_f32("qo.scale", {}, {0.6f * scale});
  init_raw<uint8_t>(b, "qo.zp", {}, onnx::TensorProto::UINT8, {uint8_t{3}});
  b.node("QuantizeLinear", "qo.q", {"r", "qo.scale", "qo.zp"}, {"out"});
  output_any(b, "out", static_cast<int>(shape.size()), onnx::TensorProto::UINT8);
}

// x [1, C, H, W] -> QDQ -> Conv (k x k, stride 1, pad k / 2, per-channel
// weight scales, no bias), beside a 1x1 shortcut convolution of x (the
// residual, in the convolutions' own layout), both quantized -> Add ->
// Relu -> Q: a ResNet block's end.
OnnxBuilder conv_residual(int64_t C, int64_t OC, int64_t k, int64_t H, int64_t W,
                          std::mt19937& rng) {
  OnnxBuilder b;
  b.input("x", {"1", std::to_string(C), std::to_string(H), std::to_string(W)});
  std::string xf = qdq(b, "qx", "x", 2.f / 255.f, 121);
  auto* n = b.node("Conv", "conv", {xf, weight(b, "w", {OC, C, k, k}, 0, rng)}, {"y"});
  OnnxBuilder::attr_ints(n, "kernel_shape", {k, k});
  OnnxBuilder::attr_ints(n, "pads", {k / 2, k / 2, k / 2, k / 2});
  b.node("Conv", "shortcut", {xf, weight(b, "ws", {OC, C, 1, 1}, 0, rng)}, {"s"});
  std::string sf = qdq(b, "qs", "s", 0.01f * std::sqrt(float(C)), 131);
  residual_relu_output(b, "y", sf, {1, OC, H, W}, 0.01f * std::sqrt(float(C * k * k)));
  return b;
}

// x [M, K] -> QDQ -> MatMul (per-column weight scales) -> + skip -> Relu -> Q.
OnnxBuilder dense_residual(int64_t M, int64_t K, int64_t N, std::mt19937& rng) {
  OnnxBuilder b;
  b.input("x", {std::to_string(M), std::to_string(K)});
  std::string xf = qdq(b, "qx", "x", 2.f / 255.f, 121);
  std::string wf = weight(b, "w", {K, N}, 1, rng);
  b.node("MatMul", "matmul", {xf, wf}, {"y"});
  b.input("skip", {std::to_string(M), std::to_string(N)});
  std::string sf = qdq(b, "qs", "skip", 2.f / 255.f, 131);
  residual_relu_output(b, "y", sf, {M, N}, 0.01f * std::sqrt(float(K)));
  return b;
}

struct Built {
  std::vector<TileKernelShape> tiles;  // the IR of each tile kernel
  int per_task = 0;  // tile kernels with a per-task epilogue (expect_epilogues_per_task)
  runtime::NDArray out;
  std::map<std::string, size_t> used;
  std::set<std::string> tile_ops;  // mod.json's op_types of the tile kernels
};

// g built for `target` with `cfg`, run on `inputs`: under EmulateTiles the
// package's amx-* requirements are dropped (its tiles are emulated), else it
// runs the tile instructions (a CPU with AMX).
Built build_and_run(const graph::Graph& g, const codegen::Target& target,
                    const std::map<std::string, std::string>& cfg,
                    const std::map<std::string, graph::Initializer>& inputs,
                    graph::Precision precision = graph::Precision::kFp32) {
  ScratchDir dir;
  driver::BuildOptions o;
  o.target = target;
  o.configs = cfg;
  o.precision = precision;
  driver::BuiltModule m = driver::build_module(g, o);
  Built r;
  r.per_task = expect_epilogues_per_task(m);
  for (const ir::LoweredFunc& f : m.funcs) {
    TileKernelShape s = tile_kernel_shape(f);
    if (s.gemms > 0) r.tiles.push_back(s);
  }
  nlohmann::json mod = nlohmann::json::parse(m.graph_json);
  r.used = templates_of(mod);
  for (const auto& k : mod.at("kernels"))
    if (!templates_of(nlohmann::json{{"kernels", {k}}}).empty())
      for (const auto& t : k.at("op_types")) r.tile_ops.insert(t.get<std::string>());
  const char* emulate = std::getenv("KILN_DEBUG_AMX_EMULATE");
  if (emulate && std::string(emulate) == "1") {
    auto& f = mod["requires"]["cpu_features"];
    f.erase(std::remove_if(
                f.begin(), f.end(),
                [](const nlohmann::json& x) { return x.get<std::string>().rfind("amx-", 0) == 0; }),
            f.end());
    m.graph_json = mod.dump();
  }
  std::string pkg = dir.file("p.tar");
  driver::write_package(m, o.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  for (const auto& [name, value] : inputs) ex.set_input(name, to_ndarray(value));
  ex.run();
  r.out = ex.output(0);
  return r;
}

// The interpreter's integer operators on the folded graph.
graph::Initializer interpreted(const graph::Graph& g,
                               const std::map<std::string, graph::Initializer>& inputs) {
  graph::Graph folded = g;
  graph::passes::simplify(folded);
  graph::passes::fold_qdq(folded);
  return graph::run_graph(folded, inputs).at(g.outputs[0]);
}

std::map<std::string, graph::Initializer> random_inputs(const graph::Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
  return inputs;
}

// Every config of the template workloads of g (all of them `template_name`,
// of one space: the same config for each), then the checks: the per-task IR
// of each tile kernel (the accumulator 16 * panels_per_task rows of `cols`,
// or all `rows` when they are fewer; smaller than the `rows` x `cols` output
// when there is more than one task),
// the fused epilogue holding `fused` (op types), and the output against
// `want` within `tolerance`. Returns the configs whose last task was partial.
int check_every_config(const graph::Graph& g, const codegen::Target& target,
                       const std::string& template_name, int64_t rows, int64_t cols,
                       const std::vector<std::string>& fused,
                       const std::map<std::string, graph::Initializer>& inputs,
                       const graph::Initializer& want, double tolerance,
                       graph::Precision precision = graph::Precision::kFp32) {
  std::vector<std::string> keys = driver::template_workloads(g, target.isa(), precision);
  EXPECT_GE(keys.size(), 1u);
  if (keys.empty()) return 0;
  for (const std::string& key : keys)
    EXPECT_EQ(ops::Workload::parse(key).template_name, template_name) << key;
  ops::Workload w = ops::Workload::parse(keys[0]);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::ConfigSpace space = t.space(w);
  int partial = 0;
  for (int64_t i = 0; i < space.size(); ++i) {
    schedule::Config cfg = space.get(i);
    SCOPED_TRACE(cfg.to_json());
    std::map<std::string, std::string> configs;
    for (const std::string& key : keys) configs[key] = cfg.to_json();
    Built r = build_and_run(g, target, configs, inputs, precision);
    EXPECT_EQ(r.used[template_name], keys.size());
    EXPECT_EQ(r.per_task, static_cast<int>(keys.size()));
    for (const std::string& op : fused) EXPECT_EQ(r.tile_ops.count(op), 1u) << op;
    const int64_t task_rows = 16 * cfg.knob("panels_per_task");
    EXPECT_EQ(r.tiles.size(), keys.size());
    for (const TileKernelShape& k : r.tiles) {
      // A task's rows (all of them when they are fewer).
      EXPECT_EQ(k.acc_elems, std::min(task_rows, rows) * cols);
      EXPECT_EQ(k.largest_alloc_elems, k.acc_elems);
      EXPECT_EQ(k.output_elems, rows * cols);
      if (task_rows < rows) EXPECT_LT(k.largest_alloc_elems, rows * cols);
    }
    partial += rows % task_rows != 0;
    expect_close(want, r.out, g.outputs[0], tolerance);
  }
  return partial;
}

void expect_varies(const graph::Initializer& y) {
  std::set<uint8_t> values(y.data.begin(), y.data.end());
  EXPECT_GT(values.size(), std::min<size_t>(8, y.data.size() / 4)) << "reference barely varies";
}

// The convolution cases on `target`: 81 and 63 output pixels, every
// panels_per_task leaving a partial last task; a 3x3 (im2col) and a 1x1
// (the data in place); output channels no 16-column block divides (36, 20;
// a count not a multiple of 4 would put the residual Add in a kernel of its
// own, after the Slice of the padding).
void check_convs(const codegen::Target& target) {
  std::mt19937 rng(401);
  struct Case {
    int64_t C, OC, k, H, W;
  };
  for (const Case& c : {Case{12, 36, 3, 9, 9}, Case{24, 20, 1, 9, 7}}) {
    SCOPED_TRACE("conv " + std::to_string(c.C) + " -> " + std::to_string(c.OC) + " k " +
                 std::to_string(c.k));
    ScratchDir dir;
    graph::Graph g = import_built(conv_residual(c.C, c.OC, c.k, c.H, c.W, rng), dir);
    auto inputs = random_inputs(g, 402);
    graph::Initializer want = interpreted(g, inputs);
    expect_varies(want);
    const int64_t OCb = (c.OC + 3) / 4 * 4;
    int partial = check_every_config(g, target, "conv2d_NCHWc_int8_amx.x86", c.H * c.W, OCb,
                                     {"kiln.Requantize", "Add", "Relu"}, inputs, want, 0.0);
    EXPECT_GE(partial, 3);
  }
}

// The dense case on `target`: 530 rows, tasks of 16 to 512 rows, each with a
// partial last one.
void check_dense(const codegen::Target& target) {
  std::mt19937 rng(403);
  ScratchDir dir;
  graph::Graph g = import_built(dense_residual(530, 40, 24, rng), dir);
  auto inputs = random_inputs(g, 404);
  graph::Initializer want = interpreted(g, inputs);
  expect_varies(want);
  EXPECT_EQ(check_every_config(g, target, "dense_int8_amx.x86", 530, 24,
                               {"kiln.Requantize", "Add", "Relu"}, inputs, want, 0.0),
            6);
}

TEST(AmxEpilogue, ConvRequantizeResidualReluPerTask) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  check_convs(host_with_amx());
}

TEST(AmxEpilogue, DenseRequantizeResidualReluPerTask) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  check_dense(host_with_amx());
}

// The same on the tile instructions themselves: only on a CPU with AMX.
TEST(AmxEpilogue, OnTheTilesOfThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-tile") || !runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  check_convs(codegen::Target::host());
  check_dense(codegen::Target::host());
}

// x [M, K] -> MatMul(W) -> + bias -> Relu, float32 in and out, bf16 tiles.
OnnxBuilder float_linear(int64_t M, int64_t K, int64_t N, std::mt19937& rng) {
  OnnxBuilder b;
  b.input("x", {std::to_string(M), std::to_string(K)});
  // Values a bf16 holds exactly: only the float32 sums' order differs.
  std::vector<float> w = uniform(static_cast<size_t>(K * N), rng);
  for (float& v : w) v = ir::bf16_to_f32_value(ir::f32_to_bf16_value(v));
  b.init_f32("w", {K, N}, w);
  b.init_f32("bias", {N}, uniform(static_cast<size_t>(N), rng));
  b.node("MatMul", "matmul", {"x", "w"}, {"mm"});
  b.node("Add", "add", {"mm", "bias"}, {"biased"});
  b.node("Relu", "relu", {"biased"}, {"y"});
  output_any(b, "y", 2, onnx::TensorProto::FLOAT);
  return b;
}

TEST(AmxEpilogue, Bf16BiasReluPerTask) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  codegen::Target target = codegen::Target::host();
  target.features.push_back("+amx-tile");
  target.features.push_back("+amx-bf16");
  std::mt19937 rng(405);
  ScratchDir dir;
  // 300 rows (19 panels, the last partial): tasks of 1 to 16 panels; N = 40
  // (a partial 16-column block), K odd.
  graph::Graph g = import_built(float_linear(300, 45, 40, rng), dir);
  graph::Initializer in = random_input(g.inputs.at(0).type, {-1.0, 1.0}, rng);
  std::vector<float> xv = in.as<float>();
  for (float& v : xv) v = ir::bf16_to_f32_value(ir::f32_to_bf16_value(v));
  std::memcpy(in.data.data(), xv.data(), in.data.size());
  std::map<std::string, graph::Initializer> inputs = {{"x", in}};
  graph::Initializer want = graph::run_graph(g, inputs).at("y");
  EXPECT_EQ(check_every_config(g, target, "dense_bf16_amx.x86", 300, 40, {"Add", "Relu"}, inputs,
                               want, 1e-4, graph::Precision::kBf16),
            5);
}

// The kernel alone (no epilogue) keeps writing its output from the tiles:
// no accumulator of its own, nothing stored by an epilogue.
TEST(AmxEpilogue, AnchorAloneWritesItsOutputDirectly) {
  ops::Workload w = ops::dense_int8_amx_workload(100, 24, 40);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  ir::LoweredFunc f =
      ops::lower_template_kernel(t, w, t.fallback(w, Isa{}), schedule::LowerOptions{});
  TileKernelShape s = tile_kernel_shape(f);
  EXPECT_EQ(s.gemms, 2);  // full tasks and the partial last one
  EXPECT_EQ(s.gemms_into_task_acc, 0);
  EXPECT_EQ(s.acc_elems, 0);
  EXPECT_EQ(s.largest_alloc_elems, 0);
  EXPECT_EQ(s.parallel_loops, 1);
}

}  // namespace
}  // namespace kiln::test
