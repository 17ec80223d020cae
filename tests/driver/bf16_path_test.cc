// kiln build --precision bf16 end to end (docs/quantization.md, "bfloat16"):
// which nodes the bf16 templates take, the built package against the
// interpreter, and the refusal of a target without avx512bf16.
//
//  - Exactness of the path: a model whose Conv / MatMul weights and inputs
//    are bf16 values already (rounding them changes nothing) must match the
//    float interpreter to float32 accumulation error (1e-5, as the float
//    end-to-end tests): packing, pair layout, layout transforms, fused bias
//    and epilogues are all exercised, and any error in them shows.
//  - A small ResNet-like chain with arbitrary float weights: bf16 where it
//    may be (groups-1 Conv, Gemm), float32 elsewhere (the depthwise Conv, no
//    Winograd beside a bf16 conv); the result within bf16 precision of the
//    float model (each operand carries 2^-9 relative rounding; a few layers
//    of sums keep the relative error to max|y| near 1e-2: 3e-2 is allowed)
//    and measurably different from the float build (the bf16 kernels ran).
#include <gtest/gtest.h>

#include <cmath>

#include "driver/build.h"
#include "driver_harness.h"
#include "graph/passes/select_templates.h"
#include "ir/expr.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

float round_bf16(float x) { return ir::bf16_to_f32_value(ir::f32_to_bf16_value(x)); }

void round_all(std::vector<float>& v) {
  for (float& x : v) x = round_bf16(x);
}

size_t count_kernels(const nlohmann::json& mod, const std::string& tmpl) {
  size_t n = 0;
  for (const auto& k : mod.at("kernels"))
    n += k.at("workload").get<std::string>().rfind(tmpl + "(", 0) == 0;
  return n;
}

bool has_workload_with(const nlohmann::json& mod, const std::string& part) {
  for (const auto& k : mod.at("kernels"))
    if (k.at("workload").get<std::string>().find(part) != std::string::npos) return true;
  return false;
}

// Builds g with `precision`, runs the tar package on `inputs` and returns
// the outputs (and mod.json).
struct Built {
  std::vector<std::vector<float>> outputs;
  nlohmann::json mod;
};

Built build_and_run(const graph::Graph& g, const std::map<std::string, graph::Initializer>& inputs,
                    graph::Precision precision, const ScratchDir& dir, const std::string& name) {
  driver::BuildOptions options;
  options.precision = precision;
  driver::BuiltModule m = driver::build_module(g, options);
  Built r;
  r.mod = nlohmann::json::parse(m.graph_json);
  std::string pkg = dir.file(name + ".tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  for (const auto& [in_name, value] : inputs) ex.set_input(in_name, to_ndarray(value));
  ex.run();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const runtime::NDArray& o = ex.output(i);
    const float* p = o.data_as<float>();
    r.outputs.emplace_back(p, p + o.nbytes() / sizeof(float));
  }
  return r;
}

// max |a - b| / max |b|
double rel_to_max(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

bool avx512bf16_host() { return codegen::Target::host().has_feature("avx512bf16"); }

TEST(Bf16Path, Bf16ValuedModelMatchesTheInterpreter) {
  if (!avx512bf16_host()) GTEST_SKIP() << "this machine has no avx512bf16";
  std::mt19937 rng(21);
  OnnxBuilder b;
  b.input("x", {"1", "3", "9", "11"});
  b.input("a", {"5", "37"});
  output_any(b, "y1", 4);
  output_any(b, "y2", 2);
  // Conv 3 -> 20 (C = 3: an odd channel block; OC 20: blocks of 10), bias, Relu.
  std::vector<float> w1 = uniform(20 * 3 * 3 * 3, rng, -0.5f, 0.5f), b1 = uniform(20, rng);
  round_all(w1);
  b.init_f32("w1", {20, 3, 3, 3}, w1);
  b.init_f32("b1", {20}, b1);
  auto* c = b.node("Conv", "conv1", {"x", "w1", "b1"}, {"c1"});
  OnnxBuilder::attr_ints(c, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
  b.node("Relu", "relu1", {"c1"}, {"y1"});
  // MatMul [5, 37] x [37, 20] (odd K: a half pair) + Add.
  std::vector<float> wm = uniform(37 * 20, rng), bm = uniform(20, rng);
  round_all(wm);
  b.init_f32("wm", {37, 20}, wm);
  b.init_f32("bm", {20}, bm);
  b.node("MatMul", "mm", {"a", "wm"}, {"m"});
  b.node("Add", "mm_bias", {"m", "bm"}, {"y2"});

  ScratchDir dir;
  std::string path = dir.file("m.onnx");
  write_bytes(path, b.bytes());
  graph::Graph g = frontend::import_onnx(path, {});
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) {
    graph::Initializer v = random_input(in.type, {}, rng);
    std::vector<float> f = v.as<float>();
    round_all(f);
    std::memcpy(v.data.data(), f.data(), v.data.size());
    inputs[in.name] = v;
  }
  std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);
  Built r = build_and_run(g, inputs, graph::Precision::kBf16, dir, "bf16");
  EXPECT_EQ(count_kernels(r.mod, "conv2d_NCHWc_bf16.x86"), 1u) << r.mod.at("kernels").dump();
  EXPECT_EQ(count_kernels(r.mod, "dense_bf16.x86"), 1u) << r.mod.at("kernels").dump();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    std::vector<float> w = want.at(g.outputs[i]).as<float>();
    ASSERT_EQ(r.outputs[i].size(), w.size());
    EXPECT_LE(rel_to_max(r.outputs[i], w), 1e-5) << g.outputs[i];
  }
}

// x -> Conv 7x7/2 (3 -> 16) + BN + Relu -> depthwise 3x3 (16) -> Conv 1x1
// (16 -> 32) -> Conv 3x3 (32 -> 32) + residual (Conv 1x1 16 -> 32) -> Relu
// -> GlobalAveragePool -> Flatten -> Gemm (transB, 32 -> 10).
void resnetish(OnnxBuilder& b, std::mt19937& rng) {
  b.input("x", {"1", "3", "24", "24"});
  output_any(b, "y", 2);
  conv(b, "stem", "x", "s", {3, 16, 7, 7, 2, 3}, rng);
  batch_norm(b, "bn", "s", "sb", 16, rng);
  b.node("Relu", "r0", {"sb"}, {"r"});
  conv(b, "dw", "r", "d", {16, 16, 3, 3, 1, 1, 16}, rng);
  conv(b, "pw", "d", "p", {16, 32, 1, 1, 1, 0}, rng);
  conv(b, "c3", "p", "q", {32, 32, 3, 3, 1, 1}, rng);
  conv(b, "down", "d", "e", {16, 32, 1, 1, 1, 0}, rng);
  b.node("Add", "res", {"q", "e"}, {"t"});
  b.node("Relu", "r1", {"t"}, {"u"});
  b.node("GlobalAveragePool", "gap", {"u"}, {"v"});
  b.node("Flatten", "flat", {"v"}, {"f"});
  init_random(b, "fc.w", {10, 32}, rng);
  init_random(b, "fc.b", {10}, rng);
  auto* gm = b.node("Gemm", "fc", {"f", "fc.w", "fc.b"}, {"y"});
  OnnxBuilder::attr_int(gm, "transB", 1);
}

TEST(Bf16Path, ResNetLikeChainWithinBf16Precision) {
  if (!avx512bf16_host()) GTEST_SKIP() << "this machine has no avx512bf16";
  std::mt19937 rng(22);
  OnnxBuilder b;
  resnetish(b, rng);
  ScratchDir dir;
  std::string path = dir.file("m.onnx");
  write_bytes(path, b.bytes());
  graph::Graph g = frontend::import_onnx(path, {});
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {}, rng);
  std::vector<float> want = graph::run_graph(g, inputs).at("y").as<float>();

  Built f = build_and_run(g, inputs, graph::Precision::kFp32, dir, "fp32");
  Built h = build_and_run(g, inputs, graph::Precision::kBf16, dir, "bf16");
  // Which templates: 4 groups-1 convs and the Gemm in bf16, the depthwise in float32,
  // no float conv or Winograd left beside them; the float build has no bf16.
  EXPECT_EQ(count_kernels(h.mod, "conv2d_NCHWc_bf16.x86"), 4u) << h.mod.at("kernels").dump();
  EXPECT_EQ(count_kernels(h.mod, "dense_bf16.x86"), 1u);
  EXPECT_EQ(count_kernels(h.mod, "depthwise_conv2d_NCHWc.x86"), 1u);
  EXPECT_EQ(count_kernels(h.mod, "conv2d_NCHWc.x86"), 0u);
  EXPECT_EQ(count_kernels(h.mod, "conv2d_winograd_NCHWc.x86"), 0u);
  EXPECT_FALSE(has_workload_with(f.mod, "bfloat16"));

  EXPECT_LE(rel_to_max(f.outputs[0], want), 1e-5);
  double e = rel_to_max(h.outputs[0], want);
  EXPECT_LE(e, 3e-2) << "bf16 build too far from the float model";
  EXPECT_GT(e, 1e-5) << "the bf16 build equals the float one: were bf16 kernels run?";
}

// The workloads kiln tune gets for --precision bf16 are the bf16 templates',
// their keys carry the dtype; fp32 keeps the float ones.
TEST(Bf16Path, TuneTasksCarryTheDtype) {
  std::mt19937 rng(23);
  OnnxBuilder b;
  resnetish(b, rng);
  ScratchDir dir;
  std::string path = dir.file("m.onnx");
  write_bytes(path, b.bytes());
  graph::Graph g = frontend::import_onnx(path, {});
  Isa isa = codegen::Target::host().isa();
  std::vector<std::string> bf = driver::template_workloads(g, isa, graph::Precision::kBf16);
  std::vector<std::string> fp = driver::template_workloads(g, isa, graph::Precision::kFp32);
  size_t bf16_keys = 0;
  for (const std::string& k : bf) bf16_keys += k.find("bfloat16") != std::string::npos;
  EXPECT_EQ(bf16_keys, 5u);  // 4 convs + the Gemm
  EXPECT_EQ(bf.size(), 6u);  // + the depthwise conv
  for (const std::string& k : fp) EXPECT_EQ(k.find("bfloat16"), std::string::npos) << k;
  EXPECT_GT(fp.size(), bf.size());  // the float 3x3 conv has a Winograd implementation too
}

TEST(Bf16Path, RefusedWithoutAvx512bf16) {
  codegen::Target hsw = codegen::Target::parse("llvm -mcpu=haswell");
  try {
    driver::check_precision(graph::Precision::kBf16, hsw);
    ADD_FAILURE() << "haswell accepted for bf16";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs avx512bf16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("haswell"), std::string::npos) << e.what();
  }
  // An AMX target without avx512bf16: its dense nodes run on tdpbf16ps
  // (dense_bf16_amx.x86), accepted; without amx-tile too, refused.
  codegen::Target amx = codegen::Target::parse("llvm -mcpu=sapphirerapids -mattr=-avx512bf16");
  ASSERT_TRUE(amx.has_feature("amx-bf16"));
  EXPECT_NO_THROW(driver::check_precision(graph::Precision::kBf16, amx));
  codegen::Target no_tiles =
      codegen::Target::parse("llvm -mcpu=sapphirerapids -mattr=-avx512bf16,-amx-tile");
  EXPECT_THROW(driver::check_precision(graph::Precision::kBf16, no_tiles), std::runtime_error);
  EXPECT_NO_THROW(driver::check_precision(graph::Precision::kFp32, hsw));
  EXPECT_NO_THROW(driver::check_precision(graph::Precision::kBf16,
                                          codegen::Target::parse("llvm -mcpu=sapphirerapids")));
}

// kiln build --precision bf16 --target haswell: one error naming the missing
// feature, exit status non-zero, nothing written (no package, no temporary).
TEST(Bf16Path, CliRefusesHaswellWritingNothing) {
  std::mt19937 rng(24);
  OnnxBuilder b;
  resnetish(b, rng);
  ScratchDir dir, tmp, capture;
  std::string model = dir.file("m.onnx");
  write_bytes(model, b.bytes());
  std::string out = dir.file("m.tar");
  CommandResult r = run_kiln("build " + quote(model) + " -o " + quote(out) +
                                 " --precision bf16 --target 'llvm -mcpu=haswell'",
                             tmp, capture);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("needs avx512bf16"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.onnx"});
  EXPECT_TRUE(tmp.entries().empty());
  // kiln tune --precision bf16 refuses the same target the same way.
  r = run_kiln("tune " + quote(model) + " --tuning-log " + quote(dir.file("t.db")) +
                   " --precision bf16 --target 'llvm -mcpu=haswell'",
               tmp, capture);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("needs avx512bf16"), std::string::npos) << r.err;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.onnx"});
}

// kiln tune --precision bf16 tunes the bf16 workloads (verified by the
// measure worker against their bf16 reference) and kiln build --precision
// bf16 --require-tuned finds a record for every one; the fp32 build of the
// same model finds none of them (the records' keys carry the dtype).
TEST(Bf16Path, TuneThenBuildWithTheRecords) {
  if (!avx512bf16_host()) GTEST_SKIP() << "this machine has no avx512bf16";
  OnnxBuilder b;
  b.input("x", {"1", "8", "6", "7"});
  output_any(b, "y", 2);
  std::mt19937 rng(25);
  conv(b, "c", "x", "c1", {8, 16, 3, 3, 1, 1}, rng);
  b.node("Relu", "r", {"c1"}, {"r1"});
  b.node("GlobalAveragePool", "gap", {"r1"}, {"g"});
  b.node("Flatten", "flat", {"g"}, {"f"});
  init_random(b, "fc.w", {16, 5}, rng);
  b.node("MatMul", "fc", {"f", "fc.w"}, {"y"});
  ScratchDir dir, tmp, capture;
  std::string model = dir.file("m.onnx"), db = dir.file("t.db");
  write_bytes(model, b.bytes());
  CommandResult r = run_kiln("tune " + quote(model) + " --tuning-log " + quote(db) +
                                 " --precision bf16 --trials 2 --in-graph 0",
                             tmp, capture);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("conv2d_NCHWc_bf16.x86"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dense_bf16.x86"), std::string::npos) << r.out;
  r = run_kiln("build " + quote(model) + " -o " + quote(dir.file("bf16.tar")) +
                   " --precision bf16 --require-tuned --no-shipped-logs --tuning-log " + quote(db),
               tmp, capture);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("configs: 2 of 2 workloads configured"), std::string::npos) << r.out;
  r = run_kiln("build " + quote(model) + " -o " + quote(dir.file("fp32.tar")) +
                   " --require-tuned --no-shipped-logs --tuning-log " + quote(db),
               tmp, capture);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir.file("fp32.tar")));
}

}  // namespace
}  // namespace kiln::test
