// kiln build of quantized convolutions on a target with AMX (issue 14,
// docs/amx.md): QDQ Conv models (folded into QLinearConv)
//  - built for -mcpu=sapphirerapids select conv2d_NCHWc_int8_amx.x86
//    (mod.json's kernels), record amx-tile and amx-int8 in
//    requires.cpu_features, and their assembly has ldtilecfg, tdpbusd and
//    tilerelease; depthwise convolutions stay on
//    depthwise_conv2d_NCHWc_int8.x86 (in the AMX convolutions' whole-channel
//    block), and Zen 4 or amx-int8 off keeps conv2d_NCHWc_int8.x86;
//  - built with the tiles emulated (KILN_DEBUG_AMX_EMULATE=1, the host's
//    features plus amx-tile/amx-int8) they run here and match the
//    interpreter's integer QLinearConv byte for byte: 1x1 stride 1 and 2, 3x3
//    stride 1 and 2, the 7x7 stride-2 stem with 3 channels, channel counts
//    and pixel counts no block divides, u8 and s8 activations with nonzero
//    zero points (the padding), per-channel and per-tensor weight scales,
//    bias or none, a fused Relu, every config of a workload's space;
//  - a small quantized ResNet (stem, max pool, a basic block, a downsampling
//    block with its 1x1 stride-2 shortcut, residual Adds, global average pool,
//    the classifier) gives byte-identical outputs built for the host as it is
//    (the VNNI / AVX2 templates) and with the AMX templates emulated; on a
//    CPU with AMX (skipped elsewhere) it also runs on the tiles themselves;
//  - so do two MobileNetV2-like inverted residual blocks, whose AMX build
//    has no layout transform around its depthwise convolutions.
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

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

struct QAct {
  bool s8 = false;
  float scale = 0.f;
  int32_t zp = 0;
};

void init_qparams(OnnxBuilder& b, const std::string& name, const QAct& q) {
  b.init_f32(name + ".scale", {}, {q.scale});
  if (q.s8)
    init_raw<int8_t>(b, name + ".zp", {}, onnx::TensorProto::INT8, {static_cast<int8_t>(q.zp)});
  else
    init_raw<uint8_t>(b, name + ".zp", {}, onnx::TensorProto::UINT8, {static_cast<uint8_t>(q.zp)});
}

// Q(x) -> DQ; returns the dequantized value.
std::string quantize(OnnxBuilder& b, const std::string& name, const std::string& x, const QAct& q) {
  init_qparams(b, name, q);
  b.node("QuantizeLinear", name + ".q", {x, name + ".scale", name + ".zp"}, {name + ".u"});
  b.node("DequantizeLinear", name + ".dq", {name + ".u", name + ".scale", name + ".zp"},
         {name + ".f"});
  return name + ".f";
}

struct QConv {
  int64_t cin, cout, k = 3, stride = 1, pad = 1;
  bool per_channel = true, bias = true, relu = false;
  int64_t group = 1;
};

// DQ(w int8) [, DQ(b int32)] -> Conv [-> Relu] on the float `x` (scale xs).
std::string qdq_conv(OnnxBuilder& b, const std::string& name, const std::string& x, float xs,
                     const QConv& s, std::mt19937& rng) {
  Shape wshape = {s.cout, s.cin / s.group, s.k, s.k};
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> w(numel(wshape));
  for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
  init_raw<int8_t>(b, name + ".w", wshape, onnx::TensorProto::INT8, w);
  int64_t nscale = s.per_channel ? s.cout : 1;
  std::vector<float> ws = uniform(static_cast<size_t>(nscale), rng, 0.002f, 0.01f);
  Shape sdims = s.per_channel ? Shape{s.cout} : Shape{};
  b.init_f32(name + ".ws", sdims, ws);
  init_raw<int8_t>(b, name + ".wzp", sdims, onnx::TensorProto::INT8,
                   std::vector<int8_t>(static_cast<size_t>(nscale), 0));
  OnnxBuilder::attr_int(b.node("DequantizeLinear", name + ".wdq",
                               {name + ".w", name + ".ws", name + ".wzp"}, {name + ".wf"}),
                        "axis", 0);
  std::vector<std::string> ins = {x, name + ".wf"};
  if (s.bias) {
    std::uniform_int_distribution<int32_t> bd(-3000, 3000);
    std::vector<int32_t> bias(static_cast<size_t>(s.cout));
    for (int32_t& v : bias) v = bd(rng);
    std::vector<float> bs(static_cast<size_t>(s.cout));
    for (int64_t c = 0; c < s.cout; ++c)
      bs[static_cast<size_t>(c)] = xs * ws[static_cast<size_t>(s.per_channel ? c : 0)];
    init_raw<int32_t>(b, name + ".b", {s.cout}, onnx::TensorProto::INT32, bias);
    b.init_f32(name + ".bs", {s.cout}, bs);
    init_raw<int32_t>(b, name + ".bzp", {s.cout}, onnx::TensorProto::INT32,
                      std::vector<int32_t>(static_cast<size_t>(s.cout), 0));
    OnnxBuilder::attr_int(b.node("DequantizeLinear", name + ".bdq",
                                 {name + ".b", name + ".bs", name + ".bzp"}, {name + ".bf"}),
                          "axis", 0);
    ins.push_back(name + ".bf");
  }
  auto* n = b.node("Conv", name, ins, {name + ".y"});
  OnnxBuilder::attr_ints(n, "kernel_shape", {s.k, s.k});
  OnnxBuilder::attr_ints(n, "strides", {s.stride, s.stride});
  OnnxBuilder::attr_ints(n, "pads", {s.pad, s.pad, s.pad, s.pad});
  if (s.group != 1) OnnxBuilder::attr_int(n, "group", s.group);
  if (!s.relu) return name + ".y";
  b.node("Relu", name + ".relu", {name + ".y"}, {name + ".r"});
  return name + ".r";
}

// An output scale that spreads the conv's outputs over some tens of quanta.
float output_scale(float xs, int64_t fan_in) {
  return 5400.f * std::sqrt(static_cast<float>(fan_in)) * xs * 0.006f / 40.f;
}

// Nonzero zero points (the padding reads them), a Relu's range from 0.
QAct act(bool s8, float scale, std::mt19937& rng, bool relu = false) {
  QAct q{s8, scale, 0};
  if (relu)
    q.zp = s8 ? -128 : 0;
  else
    q.zp = s8 ? static_cast<int32_t>(rng() % 21) - 10 : 118 + static_cast<int32_t>(rng() % 21);
  return q;
}

// x -> Q/DQ -> conv [-> Relu] -> Q -> y.
OnnxBuilder single_conv(const QConv& s, bool s8, int64_t h, int64_t w, std::mt19937& rng) {
  OnnxBuilder b;
  b.input("x", {"1", std::to_string(s.cin), std::to_string(h), std::to_string(w)});
  QAct qx = act(s8, 2.f / 255.f, rng);
  std::string xf = quantize(b, "qx", "x", qx);
  std::string y = qdq_conv(b, "conv", xf, qx.scale, s, rng);
  QAct qy = act(s8, output_scale(qx.scale, s.cin * s.k * s.k / s.group), rng, s.relu);
  init_qparams(b, "qy", qy);
  b.node("QuantizeLinear", "qy.q", {y, "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", 4, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  return b;
}

// Builds g for `target` with `configs`, runs it on `inputs` (with
// `emulated`, the package's amx-* requirements dropped: its tiles are
// emulated) and returns mod.json and the outputs.
struct BuiltRun {
  nlohmann::json mod;
  std::vector<runtime::NDArray> outputs;
  int epilogues_per_task = 0;  // tile kernels whose epilogue runs per task (IR checked)
};
BuiltRun build_and_run(const graph::Graph& g, const codegen::Target& target,
                       const std::map<std::string, graph::Initializer>& inputs,
                       const std::map<std::string, std::string>& configs = {},
                       bool emulated = true) {
  ScratchDir dir;
  driver::BuildOptions o;
  o.target = target;
  o.configs = configs;
  driver::BuiltModule m = driver::build_module(g, o);
  BuiltRun r;
  r.epilogues_per_task = expect_epilogues_per_task(m);
  r.mod = nlohmann::json::parse(m.graph_json);
  // (A package that runs real tiles keeps them: the executor then asks
  // for the tile permission.)
  if (emulated) {
    nlohmann::json mod = r.mod;
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
  for (size_t i = 0; i < g.outputs.size(); ++i) r.outputs.push_back(ex.output(i));
  return r;
}

std::map<std::string, graph::Initializer> random_inputs(const graph::Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
  return inputs;
}

// The interpreter's result on the graph after fold_qdq (integer QLinearConv).
std::map<std::string, graph::Initializer> interpreted(
    const graph::Graph& g, const std::map<std::string, graph::Initializer>& inputs) {
  graph::Graph folded = g;
  graph::passes::simplify(folded);
  graph::passes::fold_qdq(folded);
  return graph::run_graph(folded, inputs);
}

void expect_varies(const graph::Initializer& y) {
  std::set<uint8_t> values(y.data.begin(), y.data.end());
  std::string all;
  for (uint8_t v : values) all += std::to_string(v) + " ";
  EXPECT_GT(values.size(), std::min<size_t>(8, y.data.size() / 4))
      << "reference barely varies: " << all;
}

TEST(AmxConvBuild, SapphireRapidsSelectsTheTileTemplate) {
  std::mt19937 rng(201);
  ScratchDir dir;
  QConv s{20, 36, 3, 2, 1};
  s.relu = true;
  graph::Graph g = import_built(single_conv(s, false, 15, 13, rng), dir);
  driver::BuildOptions o;
  o.target = sapphire_rapids();
  o.dump_kernels_dir = dir.file("kernels");
  driver::BuiltModule m = driver::build_module(g, o);
  nlohmann::json mod = nlohmann::json::parse(m.graph_json);
  auto used = templates_of(mod);
  EXPECT_EQ(used["conv2d_NCHWc_int8_amx.x86"], 1u) << mod.at("kernels").dump();
  EXPECT_EQ(used["conv2d_NCHWc_int8.x86"], 0u) << mod.at("kernels").dump();
  std::set<std::string> req;
  for (const auto& f : mod.at("requires").at("cpu_features")) req.insert(f.get<std::string>());
  EXPECT_TRUE(req.count("amx-tile") && req.count("amx-int8")) << mod.at("requires").dump();
  std::string as;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("kernels")))
    if (e.path().extension() == ".s") as += read_bytes(e.path().string());
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
    EXPECT_NE(as.find(n), std::string::npos) << n;
}

TEST(AmxConvBuild, OtherConvsAndTargetsKeepTheirTemplates) {
  std::mt19937 rng(202);
  struct Case {
    QConv s;
    codegen::Target target;
    const char* want;
  };
  QConv dense{16, 24, 3, 1, 1};
  QConv dw{24, 24, 3, 1, 1};
  dw.group = 24;
  for (const Case& c :
       {Case{dense, sapphire_rapids(), "conv2d_NCHWc_int8_amx.x86"},
        Case{dw, sapphire_rapids(), "depthwise_conv2d_NCHWc_int8.x86"},
        Case{dense, codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"),
             "conv2d_NCHWc_int8.x86"},
        Case{dense,
             codegen::Target::parse(
                 "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -mattr=-amx-int8"),
             "conv2d_NCHWc_int8.x86"}}) {
    SCOPED_TRACE(std::string(c.want) + " " + c.target.str());
    ScratchDir dir;
    std::vector<std::string> keys = driver::template_workloads(
        import_built(single_conv(c.s, false, 9, 9, rng), dir), c.target.isa());
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(ops::Workload::parse(keys[0]).template_name, c.want) << keys[0];
  }
}

TEST(AmxConvBuild, EmulatedTilesMatchTheInterpreter) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  codegen::Target target = host_with_amx();
  ASSERT_TRUE(target.isa().amx_int8);
  std::mt19937 rng(203);
  struct Case {
    QConv s;
    bool s8;
    int64_t h, w;
  };
  auto with = [](QConv s, bool per_channel, bool bias, bool relu) {
    s.per_channel = per_channel;
    s.bias = bias;
    s.relu = relu;
    return s;
  };
  const std::vector<Case> cases = {
      {with({20, 36, 1, 1, 0}, true, true, false), false, 9, 7},   // 1x1 s1 (direct)
      {with({16, 24, 1, 2, 0}, false, true, true), true, 13, 11},  // 1x1 s2
      {with({12, 40, 3, 1, 1}, true, false, true), false, 10, 9},  // 3x3 s1
      {with({40, 70, 3, 2, 1}, true, true, false), true, 15, 13},  // 3x3 s2
      {with({3, 64, 7, 2, 3}, true, true, true), false, 29, 27},   // the stem
      {with({5, 6, 3, 1, 1}, false, false, false), true, 6, 17},   // tiny channels
  };
  int tested = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": cin " + std::to_string(k.s.cin) + " cout " +
                 std::to_string(k.s.cout) + " k " + std::to_string(k.s.k) + " stride " +
                 std::to_string(k.s.stride) + (k.s8 ? " s8" : " u8"));
    ScratchDir dir;
    graph::Graph g = import_built(single_conv(k.s, k.s8, k.h, k.w, rng), dir);
    auto inputs = random_inputs(g, 300 + static_cast<unsigned>(c));
    auto want = interpreted(g, inputs);
    std::vector<std::string> keys = driver::template_workloads(g, target.isa());
    ASSERT_EQ(keys.size(), 1u);
    ops::Workload w = ops::Workload::parse(keys[0]);
    ASSERT_EQ(w.template_name, "conv2d_NCHWc_int8_amx.x86");
    schedule::ConfigSpace space = ops::get_template(w.template_name).space(w);
    // The fallback, then every config of the space.
    std::vector<std::map<std::string, std::string>> configs = {{}};
    for (int64_t i = 0; i < space.size(); ++i)
      configs.push_back({{keys[0], space.get(i).to_json()}});
    for (const auto& cfg : configs) {
      SCOPED_TRACE(cfg.empty() ? std::string("fallback") : cfg.begin()->second);
      BuiltRun r = build_and_run(g, target, inputs, cfg);
      ASSERT_EQ(templates_of(r.mod)["conv2d_NCHWc_int8_amx.x86"], 1u) << r.mod.at("kernels").dump();
      EXPECT_EQ(r.epilogues_per_task, 1);  // the requantization, in the tasks
      const graph::Initializer& y = want.at(g.outputs[0]);
      expect_close(y, r.outputs.at(0), g.outputs[0], 0.0);
      expect_varies(y);
      ++tested;
    }
  }
  EXPECT_GT(tested, static_cast<int>(cases.size()));
}

// A small quantized ResNet in ORT's QDQ format (x [1, 3, 40, 36]): the stem
// (7x7 stride 2, Relu), max pool 3x3 stride 2, a basic block (two 3x3
// convolutions, residual Add, Relu), a downsampling block (3x3 stride 2 and a
// 1x1 stride-2 shortcut, 24 -> 40 channels), global average pool, Flatten and
// a Gemm classifier of 10 classes.
OnnxBuilder small_resnet(std::mt19937& rng) {
  // output_scale() assumes inputs spread over the whole 8-bit range; a Relu's
  // output (zero point 0) is spread over a fraction of it, and without this
  // factor the activations shrink to a few quanta within two blocks.
  constexpr float kRelu = 0.3f;
  OnnxBuilder b;
  b.input("x", {"1", "3", "40", "36"});
  output_any(b, "y", 2, onnx::TensorProto::UINT8);
  QAct qx = act(false, 2.f / 255.f, rng);
  std::string xf = quantize(b, "qx", "x", qx);
  QConv stem{3, 24, 7, 2, 3};
  stem.relu = true;
  QAct q0 = act(false, output_scale(qx.scale, 3 * 49), rng, true);
  std::string s = quantize(b, "q0", qdq_conv(b, "stem", xf, qx.scale, stem, rng), q0);
  auto* pool = b.node("MaxPool", "pool", {s}, {"p"});
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  std::string p = quantize(b, "qp", "p", q0);
  // A basic block, 24 channels.
  QConv c{24, 24, 3, 1, 1};
  c.relu = true;
  QAct q1 = act(false, kRelu * output_scale(q0.scale, 24 * 9), rng, true);
  std::string a1 = quantize(b, "q1", qdq_conv(b, "b1c1", p, q0.scale, c, rng), q1);
  c.relu = false;
  QAct q2 = act(false, kRelu * output_scale(q1.scale, 24 * 9), rng);
  std::string a2 = quantize(b, "q2", qdq_conv(b, "b1c2", a1, q1.scale, c, rng), q2);
  b.node("Add", "b1add", {a2, p}, {"b1s"});
  b.node("Relu", "b1relu", {"b1s"}, {"b1r"});
  QAct q3 = act(false, q2.scale, rng, true);
  std::string r1 = quantize(b, "q3", "b1r", q3);
  // A downsampling block, 24 -> 40 channels.
  QConv d1{24, 40, 3, 2, 1};
  d1.relu = true;
  QAct q4 = act(false, kRelu * output_scale(q3.scale, 24 * 9), rng, true);
  std::string a3 = quantize(b, "q4", qdq_conv(b, "b2c1", r1, q3.scale, d1, rng), q4);
  QAct q5 = act(false, kRelu * output_scale(q4.scale, 40 * 9), rng);
  std::string a4 = quantize(b, "q5", qdq_conv(b, "b2c2", a3, q4.scale, {40, 40, 3, 1, 1}, rng), q5);
  QAct q6 = act(false, kRelu * output_scale(q3.scale, 24), rng);
  std::string sc =
      quantize(b, "q6", qdq_conv(b, "b2down", r1, q3.scale, {24, 40, 1, 2, 0}, rng), q6);
  b.node("Add", "b2add", {a4, sc}, {"b2s"});
  b.node("Relu", "b2relu", {"b2s"}, {"b2r"});
  QAct q7 = act(false, q5.scale, rng, true);
  std::string r2 = quantize(b, "q7", "b2r", q7);
  // The last block's activation is an output too: 40 x 5 x 5 values.
  b.node("Identity", "feat", {"q7.u"}, {"feat"});
  output_any(b, "feat", 4, onnx::TensorProto::UINT8);
  b.node("GlobalAveragePool", "gap", {r2}, {"g"});
  std::string gq = quantize(b, "q8", "g", q7);
  b.node("Flatten", "flatten", {gq}, {"flat"});
  // The classifier: DQ(w int8 [10, 40]) -> Gemm transB -> Q.
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> fw(400);
  for (int8_t& v : fw) v = static_cast<int8_t>(wd(rng));
  init_raw<int8_t>(b, "fc.w", {10, 40}, onnx::TensorProto::INT8, fw);
  b.init_f32("fc.ws", {}, {0.004f});
  init_raw<int8_t>(b, "fc.wzp", {}, onnx::TensorProto::INT8, {0});
  b.node("DequantizeLinear", "fc.wdq", {"fc.w", "fc.ws", "fc.wzp"}, {"fc.wf"});
  OnnxBuilder::attr_int(b.node("Gemm", "fc", {"flat", "fc.wf"}, {"logits"}), "transB", 1);
  QAct qy = act(false, kRelu * output_scale(q7.scale, 40), rng);
  init_qparams(b, "qy", qy);
  b.node("QuantizeLinear", "qy.q", {"logits", "qy.scale", "qy.zp"}, {"y"});
  return b;
}

TEST(AmxConvBuild, SmallResNetEmulatedEqualsTheVnniBuild) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  std::mt19937 rng(204);
  ScratchDir dir;
  graph::Graph g = import_built(small_resnet(rng), dir);
  auto inputs = random_inputs(g, 205);
  auto want = interpreted(g, inputs);
  BuiltRun plain = build_and_run(g, host_without_amx(), inputs);
  auto used = templates_of(plain.mod);
  EXPECT_EQ(used["conv2d_NCHWc_int8.x86"], 6u) << plain.mod.at("kernels").dump();
  EXPECT_EQ(used["conv2d_NCHWc_int8_amx.x86"], 0u);
  EmulateTiles emulate;
  BuiltRun amx = build_and_run(g, host_with_amx(), inputs);
  used = templates_of(amx.mod);
  EXPECT_EQ(used["conv2d_NCHWc_int8_amx.x86"], 6u) << amx.mod.at("kernels").dump();
  EXPECT_EQ(used["conv2d_NCHWc_int8.x86"], 0u);
  // Every convolution requantizes (and adds the residual) in its tasks.
  EXPECT_EQ(amx.epilogues_per_task, 6);
  ASSERT_EQ(plain.outputs.size(), 2u);
  ASSERT_EQ(amx.outputs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(g.outputs[i]);
    const runtime::NDArray &y0 = plain.outputs[i], &y1 = amx.outputs[i];
    ASSERT_EQ(y0.shape(), y1.shape());
    ASSERT_EQ(y0.nbytes(), y1.nbytes());
    EXPECT_EQ(std::memcmp(y0.data(), y1.data(), static_cast<size_t>(y0.nbytes())), 0);
    // Both are the interpreter's result, which varies.
    expect_close(want.at(g.outputs[i]), y1, g.outputs[i], 0.0);
    expect_varies(want.at(g.outputs[i]));
  }
  // Consecutive AMX convolutions share the whole-channel layout: no layout
  // transform between them (only at the input and before the classifier).
  size_t transforms = 0;
  for (const auto& k : amx.mod.at("kernels"))
    for (const auto& t : k.at("op_types"))
      transforms += t.get<std::string>() == "kiln.LayoutTransform";
  EXPECT_LE(transforms, 3u) << amx.mod.at("kernels").dump();
}

// Two MobileNetV2-like inverted residual blocks in ORT's QDQ format (x [1,
// 24, 14, 13]), after a 3x3 convolution 24 -> 24: 1x1 24 -> 144 (Relu),
// depthwise 3x3 stride 1 (Relu), 1x1 144 -> 24, the residual Add; then 1x1
// 24 -> 72 (72: a channel count 16 does not divide), depthwise 3x3 stride
// 2, 1x1 72 -> 40.
OnnxBuilder mobilenet_blocks(std::mt19937& rng) {
  constexpr float kRelu = 0.3f;  // as in small_resnet
  OnnxBuilder b;
  b.input("x", {"1", "24", "14", "13"});
  QAct qi = act(false, 2.f / 255.f, rng);
  std::string xi = quantize(b, "qi", "x", qi);
  // A 3x3 convolution first, so that the residual Add's skip input is a
  // convolution's output (in MobileNetV2, the previous block's projection).
  QAct qx = act(false, output_scale(qi.scale, 24 * 9), rng);
  std::string xf = quantize(b, "qx", qdq_conv(b, "stem", xi, qi.scale, {24, 24, 3, 1, 1}, rng), qx);
  // Block 1: expand, depthwise, project, residual Add.
  QConv e1{24, 144, 1, 1, 0};
  e1.relu = true;
  QAct q1 = act(false, kRelu * output_scale(qx.scale, 24), rng, true);
  std::string a1 = quantize(b, "q1", qdq_conv(b, "b1expand", xf, qx.scale, e1, rng), q1);
  QConv d1{144, 144, 3, 1, 1};
  d1.group = 144;
  d1.relu = true;
  QAct q2 = act(false, kRelu * output_scale(q1.scale, 9), rng, true);
  std::string a2 = quantize(b, "q2", qdq_conv(b, "b1dw", a1, q1.scale, d1, rng), q2);
  QAct q3 = act(false, kRelu * output_scale(q2.scale, 144), rng);
  std::string a3 =
      quantize(b, "q3", qdq_conv(b, "b1project", a2, q2.scale, {144, 24, 1, 1, 0}, rng), q3);
  b.node("Add", "b1add", {a3, xf}, {"b1s"});
  QAct q4 = act(false, q3.scale, rng);
  std::string r1 = quantize(b, "q4", "b1s", q4);
  // Block 2: 72 channels, a stride-2 depthwise, 40 out.
  QConv e2{24, 72, 1, 1, 0};
  e2.relu = true;
  QAct q5 = act(false, kRelu * output_scale(q4.scale, 24), rng, true);
  std::string a5 = quantize(b, "q5", qdq_conv(b, "b2expand", r1, q4.scale, e2, rng), q5);
  QConv d2{72, 72, 3, 2, 1};
  d2.group = 72;
  d2.relu = true;
  QAct q6 = act(false, kRelu * output_scale(q5.scale, 9), rng, true);
  std::string a6 = quantize(b, "q6", qdq_conv(b, "b2dw", a5, q5.scale, d2, rng), q6);
  QAct qy = act(false, kRelu * output_scale(q6.scale, 72), rng);
  std::string y = qdq_conv(b, "b2project", a6, q6.scale, {72, 40, 1, 1, 0}, rng);
  init_qparams(b, "qy", qy);
  b.node("QuantizeLinear", "qy.q", {y, "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", 4, onnx::TensorProto::UINT8);
  return b;
}

size_t layout_transforms(const nlohmann::json& mod) {
  size_t n = 0;
  for (const auto& k : mod.at("kernels"))
    for (const auto& t : k.at("op_types")) n += t.get<std::string>() == "kiln.LayoutTransform";
  return n;
}

// On an AMX target the depthwise convolutions take the AMX convolutions'
// whole-channel block (whole_channels=[1]): the build has no layout
// transform but at the graph's edges, as the VNNI build, and its output
// (tiles emulated) is the VNNI build's and the interpreter's, byte for byte.
TEST(AmxConvBuild, MobileNetBlocksEmulatedEqualTheVnniBuild) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  // The comparison is with the VNNI build, which every AMX CPU has; without
  // it the plain build runs a 3x3 on int8 Winograd, and an AVX2 target with
  // AMX added is no CPU that exists.
  if (!codegen::Target::host().has_feature("avx512vnni"))
    GTEST_SKIP() << "needs avx512vnni on this host (the VNNI build to compare with)";
  std::mt19937 rng(207);
  ScratchDir dir;
  graph::Graph g = import_built(mobilenet_blocks(rng), dir);
  auto inputs = random_inputs(g, 208);
  auto want = interpreted(g, inputs);
  for (const codegen::Target& t : {host_with_amx(), sapphire_rapids()}) {
    int whole = 0;
    for (const std::string& key : driver::template_workloads(g, t.isa())) {
      ops::Workload w = ops::Workload::parse(key);
      if (w.template_name != "depthwise_conv2d_NCHWc_int8.x86") continue;
      EXPECT_EQ(w.get("whole_channels"), std::vector<int64_t>{1}) << key;
      ++whole;
    }
    EXPECT_EQ(whole, 2);
  }
  for (const std::string& key : driver::template_workloads(g, host_without_amx().isa()))
    EXPECT_EQ(key.find("whole_channels"), std::string::npos) << key;

  BuiltRun plain = build_and_run(g, host_without_amx(), inputs);
  auto used = templates_of(plain.mod);
  EXPECT_EQ(used["conv2d_NCHWc_int8.x86"], 5u) << plain.mod.at("kernels").dump();
  EXPECT_EQ(used["depthwise_conv2d_NCHWc_int8.x86"], 2u);
  EmulateTiles emulate;
  BuiltRun amx = build_and_run(g, host_with_amx(), inputs);
  used = templates_of(amx.mod);
  EXPECT_EQ(used["conv2d_NCHWc_int8_amx.x86"], 5u) << amx.mod.at("kernels").dump();
  EXPECT_EQ(used["depthwise_conv2d_NCHWc_int8.x86"], 2u);
  EXPECT_EQ(used["conv2d_NCHWc_int8.x86"], 0u);
  // Only the input's and the output's transforms, in both builds.
  EXPECT_EQ(layout_transforms(plain.mod), 2u) << plain.mod.at("kernels").dump();
  EXPECT_EQ(layout_transforms(amx.mod), 2u) << amx.mod.at("kernels").dump();
  EXPECT_EQ(amx.mod.at("kernels").size(), plain.mod.at("kernels").size());
  // The depthwise convolutions keep their requantizing epilogue, the first
  // projection its residual Add.
  for (const auto& k : amx.mod.at("kernels")) {
    std::vector<std::string> ops;
    for (const auto& t : k.at("op_types")) ops.push_back(t.get<std::string>());
    if (std::count(ops.begin(), ops.end(), "depthwise_conv2d_NCHWc_int8.x86")) {
      EXPECT_GT(ops.size(), 1u) << k.dump();
    }
  }
  ASSERT_EQ(plain.outputs.size(), 1u);
  ASSERT_EQ(amx.outputs.size(), 1u);
  const runtime::NDArray &y0 = plain.outputs[0], &y1 = amx.outputs[0];
  ASSERT_EQ(y0.shape(), y1.shape());
  ASSERT_EQ(y0.nbytes(), y1.nbytes());
  EXPECT_EQ(std::memcmp(y0.data(), y1.data(), static_cast<size_t>(y0.nbytes())), 0);
  expect_close(want.at(g.outputs[0]), y1, g.outputs[0], 0.0);
  expect_varies(want.at(g.outputs[0]));
}

// The same model on the tile instructions themselves (no emulation): only
// on a CPU with AMX.
TEST(AmxConvBuild, SmallResNetOnTheTilesOfThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-tile") || !runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  std::mt19937 rng(204);
  ScratchDir dir;
  graph::Graph g = import_built(small_resnet(rng), dir);
  auto inputs = random_inputs(g, 206);
  auto want = interpreted(g, inputs);
  BuiltRun amx = build_and_run(g, codegen::Target::host(), inputs, {}, /*emulated=*/false);
  EXPECT_EQ(templates_of(amx.mod)["conv2d_NCHWc_int8_amx.x86"], 6u) << amx.mod.at("kernels").dump();
  for (size_t i = 0; i < g.outputs.size(); ++i)
    expect_close(want.at(g.outputs[i]), amx.outputs.at(i), g.outputs[i], 0.0);
}

}  // namespace
}  // namespace kiln::test
