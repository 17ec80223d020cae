// kiln build on a target with AMX (issue 14, docs/amx.md): a quantized
// Linear layer (QDQ -> MatMul -> Add bias -> Q, folded into QLinearMatMul)
//  - built for -mcpu=sapphirerapids selects dense_int8_amx.x86 (mod.json's
//    kernels), records amx-tile and amx-int8 in requires.cpu_features, and its
//    assembly has ldtilecfg, tdpbusd and tilerelease; with K not a multiple of
//    4, or for Zen 4, the node stays on dense_int8.x86;
//  - that package is refused on a CPU without AMX, naming amx-tile;
//  - the same build with the tiles emulated (KILN_DEBUG_AMX_EMULATE=1, the
//    host's features plus amx-tile/amx-int8) runs here end to end and matches
//    the interpreter's integer QLinearMatMul byte for byte: the weight packed
//    by 16 columns, the requantizing epilogue after the tiles, rank-3
//    activations, M and N no tile divides, K with and without a 64-byte tail,
//    every config of the template's space.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "amx_harness.h"
#include "driver_harness.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "ops/op_template.h"
#include "runtime/cpu_features.h"
#include "runtime/npz.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

struct Linear {
  Shape x;  // [..., K]
  int64_t N = 1;
  bool s8 = false;      // int8 activations (else uint8)
  bool per_col = true;  // per-column weight scales
};

// x -> Q/DQ -> MatMul(DQ(w int8 [K, N])) -> Add(DQ(int32 bias [N])) -> Q -> y.
OnnxBuilder linear_model(const Linear& l, std::mt19937& rng) {
  int64_t K = l.x.back(), N = l.N;
  OnnxBuilder b;
  std::vector<std::string> dims;
  for (int64_t d : l.x) dims.push_back(std::to_string(d));
  b.input("x", dims);
  auto qparams = [&](const std::string& name, float scale, int32_t zp) {
    b.init_f32(name + ".scale", {}, {scale});
    if (l.s8)
      init_raw<int8_t>(b, name + ".zp", {}, onnx::TensorProto::INT8, {static_cast<int8_t>(zp)});
    else
      init_raw<uint8_t>(b, name + ".zp", {}, onnx::TensorProto::UINT8, {static_cast<uint8_t>(zp)});
  };
  const float xs = 2.f / 255.f;
  qparams("qx", xs, l.s8 ? 3 : 121);
  b.node("QuantizeLinear", "qx.q", {"x", "qx.scale", "qx.zp"}, {"xu"});
  b.node("DequantizeLinear", "qx.dq", {"xu", "qx.scale", "qx.zp"}, {"xf"});
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> w(static_cast<size_t>(K * N));
  for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
  init_raw<int8_t>(b, "w", {K, N}, onnx::TensorProto::INT8, w);
  int64_t nscale = l.per_col ? N : 1;
  Shape sdims = l.per_col ? Shape{N} : Shape{};
  std::vector<float> ws = uniform(static_cast<size_t>(nscale), rng, 0.002f, 0.01f);
  b.init_f32("ws", sdims, ws);
  init_raw<int8_t>(b, "wzp", sdims, onnx::TensorProto::INT8,
                   std::vector<int8_t>(static_cast<size_t>(nscale), 0));
  OnnxBuilder::attr_int(b.node("DequantizeLinear", "wdq", {"w", "ws", "wzp"}, {"wf"}), "axis", 1);
  std::uniform_int_distribution<int32_t> bd(-3000, 3000);
  std::vector<int32_t> bias(static_cast<size_t>(N));
  for (int32_t& v : bias) v = bd(rng);
  std::vector<float> bs(static_cast<size_t>(N));
  for (int64_t c = 0; c < N; ++c) bs[static_cast<size_t>(c)] = xs * ws[l.per_col ? c : 0];
  init_raw<int32_t>(b, "b", {N}, onnx::TensorProto::INT32, bias);
  b.init_f32("bs", {N}, bs);
  init_raw<int32_t>(b, "bzp", {N}, onnx::TensorProto::INT32,
                    std::vector<int32_t>(static_cast<size_t>(N), 0));
  OnnxBuilder::attr_int(b.node("DequantizeLinear", "bdq", {"b", "bs", "bzp"}, {"bf"}), "axis", 0);
  b.node("MatMul", "matmul", {"xf", "wf"}, {"mm"});
  b.node("Add", "add", {"mm", "bf"}, {"biased"});
  // An output scale that spreads the products over tens of quanta.
  qparams("qy", 5400.f * std::sqrt(static_cast<float>(K)) * xs * 0.006f / 40.f, l.s8 ? -2 : 125);
  b.node("QuantizeLinear", "qy.q", {"biased", "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", static_cast<int>(l.x.size()),
             l.s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  return b;
}

TEST(AmxBuild, SapphireRapidsSelectsTheTileTemplate) {
  std::mt19937 rng(71);
  ScratchDir dir;
  OnnxBuilder b = linear_model({{37, 100}, 40}, rng);
  driver::BuildOptions o;
  o.target = sapphire_rapids();
  o.dump_kernels_dir = dir.file("kernels");
  driver::BuiltModule m = driver::build_module(import_built(b, dir), o);
  nlohmann::json mod = nlohmann::json::parse(m.graph_json);
  auto used = templates_of(mod);
  EXPECT_EQ(used["dense_int8_amx.x86"], 1u) << mod.at("kernels").dump();
  EXPECT_EQ(used["dense_int8.x86"], 0u) << mod.at("kernels").dump();
  std::set<std::string> req;
  for (const auto& f : mod.at("requires").at("cpu_features")) req.insert(f.get<std::string>());
  EXPECT_TRUE(req.count("amx-tile") && req.count("amx-int8")) << mod.at("requires").dump();
  // The tile kernel's assembly (--dump-kernels).
  std::string as;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("kernels")))
    if (e.path().extension() == ".s") as += read_bytes(e.path().string());
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
    EXPECT_NE(as.find(n), std::string::npos) << n;

  // The package is refused here with one error naming amx-tile (a CPU with
  // AMX loads it: the executor asks for the tile permission).
  std::string pkg = dir.file("amx.tar");
  driver::write_package(m, o.target, pkg, driver::PackageFormat::kTar);
  if (runtime::host_has_cpu_feature("amx-tile") && runtime::host_has_cpu_feature("amx-int8")) {
    EXPECT_NO_THROW(runtime::GraphExecutor::load(pkg));
  } else {
    try {
      runtime::GraphExecutor::load(pkg);
      ADD_FAILURE() << "a package using AMX tiles loaded on a CPU without them";
    } catch (const runtime::IncompatiblePackage& e) {
      EXPECT_NE(std::string(e.what()).find("amx-tile"), std::string::npos) << e.what();
    }
  }
}

// The same through the command line: kiln build --target sapphirerapids
// reports the tile template; kiln run on this CPU (without AMX) exits
// non-zero with one error naming amx-tile and writes no output.
TEST(AmxBuild, KilnRunRefusesTheTilePackageHere) {
  if (runtime::host_has_cpu_feature("amx-tile") && runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "this CPU has AMX: the package runs here";
  std::mt19937 rng(75);
  ScratchDir dir, tmp, capture;
  std::string model = dir.file("m.onnx"), pkg = dir.file("m.tar");
  write_bytes(model, linear_model({{37, 100}, 40}, rng).bytes());
  CommandResult r = run_kiln("build " + quote(model) + " -o " + quote(pkg) +
                                 " --target 'llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids'",
                             tmp, capture);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("dense_int8_amx.x86"), std::string::npos) << r.out << r.err;
  graph::Initializer x = random_input({"float32", {37, 100}}, {-1.0, 1.0}, rng);
  std::vector<runtime::NamedArray> arrays;
  arrays.push_back({"x", to_ndarray(x)});
  runtime::write_npz(dir.file("in.npz"), arrays);
  std::string out = dir.file("out.npz");
  r = run_kiln(
      "run " + quote(pkg) + " --inputs " + quote(dir.file("in.npz")) + " --output " + quote(out),
      tmp, capture);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("amx-tile"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(AmxBuild, OtherNodesAndTargetsStayOnDenseInt8) {
  std::mt19937 rng(72);
  struct Case {
    Linear l;
    codegen::Target target;
    const char* why;
  };
  for (const Case& c : {Case{{{20, 30}, 16}, sapphire_rapids(), "K % 4 != 0"},
                        Case{{{20, 32}, 16},
                             codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"),
                             "Zen 4 has no AMX"},
                        Case{{{20, 32}, 16},
                             codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu "
                                                    "-mcpu=sapphirerapids -mattr=-amx-int8"),
                             "amx-int8 off"}}) {
    SCOPED_TRACE(c.why);
    ScratchDir dir;
    std::vector<std::string> keys =
        driver::template_workloads(import_built(linear_model(c.l, rng), dir), c.target.isa());
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(ops::Workload::parse(keys[0]).template_name, "dense_int8.x86") << keys[0];
  }
  ScratchDir dir;
  std::vector<std::string> keys = driver::template_workloads(
      import_built(linear_model({{20, 32}, 16}, rng), dir), sapphire_rapids().isa());
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0], "dense_int8_amx.x86(data=[20,32],weight=[32,16],dtype=uint8)");
}

TEST(AmxBuild, EmulatedTilesEndToEndBitExact) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  // This machine's target with AMX's features: the strategy takes the tile
  // template, codegen emulates the tiles (and no other kernel can use them).
  codegen::Target target = codegen::Target::host();
  target.features.push_back("+amx-tile");
  target.features.push_back("+amx-int8");
  ASSERT_TRUE(target.isa().amx_int8);
  std::mt19937 rng(73);
  std::mt19937_64 pick(74);
  const std::vector<Linear> cases = {
      {{37, 100}, 40, false, true},   {{16, 64}, 16, true, false},
      {{1, 4}, 1, false, true},       {{2, 9, 68}, 33, true, true},
      {{300, 132}, 17, false, false}, {{2, 3, 5, 200}, 70, true, true},
      {{530, 40}, 24, false, true},
  };
  int tested_configs = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Linear& l = cases[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": x " + graph::shape_str(l.x) + " N " +
                 std::to_string(l.N) + (l.s8 ? " s8" : " u8"));
    ScratchDir dir;
    OnnxBuilder b = linear_model(l, rng);
    graph::Graph g = import_built(b, dir);
    graph::Graph folded = g;
    graph::passes::simplify(folded);
    graph::passes::fold_qdq(folded);
    std::mt19937 in_rng(static_cast<unsigned>(100 + c));
    std::map<std::string, graph::Initializer> inputs;
    for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, in_rng);
    std::map<std::string, graph::Initializer> want = graph::run_graph(folded, inputs);

    std::vector<std::string> keys = driver::template_workloads(g, target.isa());
    ASSERT_EQ(keys.size(), 1u);
    ops::Workload w = ops::Workload::parse(keys[0]);
    ASSERT_EQ(w.template_name, "dense_int8_amx.x86");
    schedule::ConfigSpace space = ops::get_template(w.template_name).space(w);
    // The fallback, then every config of the space (at most 6 of them).
    std::vector<std::map<std::string, std::string>> configs = {{}};
    for (int64_t i = 0; i < space.size(); ++i)
      configs.push_back({{keys[0], space.get(i).to_json()}});
    for (const auto& cfg : configs) {
      SCOPED_TRACE(cfg.empty() ? std::string("fallback") : cfg.begin()->second);
      driver::BuildOptions o;
      o.target = target;
      o.configs = cfg;
      driver::BuiltModule m = driver::build_module(g, o);
      nlohmann::json mod = nlohmann::json::parse(m.graph_json);
      ASSERT_EQ(templates_of(mod)["dense_int8_amx.x86"], 1u) << mod.at("kernels").dump();
      // The bias and requantization run in the tile kernel's tasks.
      EXPECT_EQ(expect_epilogues_per_task(m), 1);
      // The package says it needs AMX; its tiles are emulated, so this
      // machine may run it: drop the two features it lacks.
      auto& f = mod["requires"]["cpu_features"];
      f.erase(std::remove_if(f.begin(), f.end(),
                             [](const nlohmann::json& x) {
                               return x.get<std::string>().rfind("amx-", 0) == 0;
                             }),
              f.end());
      m.graph_json = mod.dump();
      std::string pkg = dir.file("p.tar");
      driver::write_package(m, o.target, pkg, driver::PackageFormat::kTar);
      runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
      for (const auto& [name, value] : inputs) ex.set_input(name, to_ndarray(value));
      ex.run();
      const graph::Initializer& y = want.at(g.outputs[0]);
      expect_close(y, ex.output(0), g.outputs[0], 0.0);
      std::set<uint8_t> values(y.data.begin(), y.data.end());
      EXPECT_GT(values.size(), std::min<size_t>(8, y.data.size() / 4)) << "reference barely varies";
      ++tested_configs;
    }
  }
  EXPECT_GT(tested_configs, static_cast<int>(cases.size()));
}

// ---- bf16 (--precision bf16) ------------------------------------------------

// Values a bf16 holds exactly: the reference's float products are then the
// kernel's bf16 products, and only the order of the float sums differs.
std::vector<float> bf16_values(size_t n, std::mt19937& rng) {
  std::vector<float> v = uniform(n, rng);
  for (float& x : v) x = ir::bf16_to_f32_value(ir::f32_to_bf16_value(x));
  return v;
}

// x [..., K] -> MatMul(W [K, N]) -> Add(bias [N]) -> Relu -> y.
OnnxBuilder float_linear(const Shape& x, int64_t N, std::mt19937& rng) {
  int64_t K = x.back();
  OnnxBuilder b;
  std::vector<std::string> dims;
  for (int64_t d : x) dims.push_back(std::to_string(d));
  b.input("x", dims);
  b.init_f32("w", {K, N}, bf16_values(static_cast<size_t>(K * N), rng));
  b.init_f32("bias", {N}, uniform(static_cast<size_t>(N), rng));
  b.node("MatMul", "matmul", {"x", "w"}, {"mm"});
  b.node("Add", "add", {"mm", "bias"}, {"biased"});
  b.node("Relu", "relu", {"biased"}, {"y"});
  output_any(b, "y", static_cast<int>(x.size()), onnx::TensorProto::FLOAT);
  return b;
}

TEST(AmxBuild, Bf16PrefersTilesWhereTheTargetHasThem) {
  std::mt19937 rng(81);
  struct Case {
    const char* target;
    const char* want;
  };
  for (const Case& c :
       {Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids", "dense_bf16_amx.x86"},
        Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -mattr=-avx512bf16",
             "dense_bf16_amx.x86"},
        Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -mattr=-amx-bf16",
             "dense_bf16.x86"},
        Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "dense_bf16.x86"}}) {
    SCOPED_TRACE(c.target);
    ScratchDir dir;
    codegen::Target t = codegen::Target::parse(c.target);
    EXPECT_NO_THROW(driver::check_precision(graph::Precision::kBf16, t));
    std::vector<std::string> keys = driver::template_workloads(
        import_built(float_linear({20, 33}, 17, rng), dir), t.isa(), graph::Precision::kBf16);
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(ops::Workload::parse(keys[0]).template_name, c.want) << keys[0];
  }
  // The package for Sapphire Rapids: tdpbf16ps in its assembly.
  ScratchDir dir;
  driver::BuildOptions o;
  o.target = sapphire_rapids();
  o.precision = graph::Precision::kBf16;
  o.dump_kernels_dir = dir.file("kernels");
  driver::BuiltModule m =
      driver::build_module(import_built(float_linear({37, 100}, 40, rng), dir), o);
  EXPECT_EQ(templates_of(nlohmann::json::parse(m.graph_json))["dense_bf16_amx.x86"], 1u);
  std::string as;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("kernels")))
    if (e.path().extension() == ".s") as += read_bytes(e.path().string());
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"})
    EXPECT_NE(as.find(n), std::string::npos) << n;
}

TEST(AmxBuild, Bf16EmulatedTilesEndToEnd) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  codegen::Target target = codegen::Target::host();
  target.features.push_back("+amx-tile");
  target.features.push_back("+amx-bf16");
  ASSERT_TRUE(target.isa().amx_bf16);
  std::mt19937 rng(82);
  // K odd (a zero pair element), under and over 32 pairs (a 64-byte tail),
  // M and N no tile divides, a rank-3 activation, tasks of several panels.
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{37, 100}, 40}, {{1, 7}, 3}, {{2, 9, 64}, 33}, {{300, 45}, 16}, {{530, 32}, 70}};
  for (const auto& [x, N] : cases) {
    SCOPED_TRACE("x " + graph::shape_str(x) + " N " + std::to_string(N));
    ScratchDir dir;
    graph::Graph g = import_built(float_linear(x, N, rng), dir);
    graph::Initializer in = random_input(g.inputs.at(0).type, {-1.0, 1.0}, rng);
    std::vector<float> xv = in.as<float>();
    for (float& v : xv) v = ir::bf16_to_f32_value(ir::f32_to_bf16_value(v));
    std::memcpy(in.data.data(), xv.data(), in.data.size());
    std::map<std::string, graph::Initializer> inputs = {{"x", in}};
    std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);
    driver::BuildOptions o;
    o.target = target;
    o.precision = graph::Precision::kBf16;
    driver::BuiltModule m = driver::build_module(g, o);
    nlohmann::json mod = nlohmann::json::parse(m.graph_json);
    ASSERT_EQ(templates_of(mod)["dense_bf16_amx.x86"], 1u) << mod.at("kernels").dump();
    EXPECT_EQ(expect_epilogues_per_task(m), 1);  // bias and Relu in the tasks
    auto& f = mod["requires"]["cpu_features"];
    f.erase(std::remove_if(
                f.begin(), f.end(),
                [](const nlohmann::json& v) { return v.get<std::string>().rfind("amx-", 0) == 0; }),
            f.end());
    m.graph_json = mod.dump();
    std::string pkg = dir.file("p.tar");
    driver::write_package(m, o.target, pkg, driver::PackageFormat::kTar);
    runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
    ex.set_input("x", to_ndarray(in));
    ex.run();
    // Exact bf16 products: only the float32 sums' order differs.
    expect_close(want.at("y"), ex.output(0), "y", 1e-4);
  }
}

}  // namespace
}  // namespace kiln::test
