// kiln build of int8 attention on a target with AMX (issue 14, docs/amx.md):
// the QLinearMatMuls of two activations (Q K^T and P V) that
// batch_matmul_int8.x86 runs elsewhere
//  - built for -mcpu=sapphirerapids select batch_matmul_int8_amx.x86 (both
//    products of a small attention block, mod.json's kernels), and the
//    package's assembly has ldtilecfg, tdpbusd and tilerelease; with K not a
//    multiple of 4, for Zen 4, or with amx-int8 off, they stay on
//    batch_matmul_int8.x86;
//  - the attention block built with the tiles emulated (KILN_DEBUG_AMX_EMULATE
//    =1, this machine's features plus amx-tile/amx-int8) gives the same
//    output bytes as the default (VNNI) build of this machine;
//  - single QLinearMatMuls of two activations, emulated, every dtype pair,
//    batch dims of rank 0 to 2, a broadcast right operand, M and N no tile
//    divides, K with and without a 64-byte tail, every config of the
//    template's space, match the interpreter's integer QLinearMatMul byte
//    for byte (the zero-point corrections and the requantization fused after
//    the tiles on their int32 result).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <tuple>

#include "amx_harness.h"
#include "driver_harness.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "ops/op_template.h"
#include "runtime/cpu_features.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

std::vector<std::string> dims_of(const Shape& s) {
  std::vector<std::string> d;
  for (int64_t v : s) d.push_back(std::to_string(v));
  return d;
}

struct QParams {
  bool s8 = false;
  float scale = 0.f;
  int32_t zp = 0;
};

// Q(x) -> DQ; returns the dequantized value.
std::string qdq(OnnxBuilder& b, const std::string& name, const std::string& x, const QParams& q) {
  b.init_f32(name + ".scale", {}, {q.scale});
  if (q.s8)
    init_raw<int8_t>(b, name + ".zp", {}, onnx::TensorProto::INT8, {static_cast<int8_t>(q.zp)});
  else
    init_raw<uint8_t>(b, name + ".zp", {}, onnx::TensorProto::UINT8, {static_cast<uint8_t>(q.zp)});
  b.node("QuantizeLinear", name + ".q", {x, name + ".scale", name + ".zp"}, {name + ".u"});
  b.node("DequantizeLinear", name + ".dq", {name + ".u", name + ".scale", name + ".zp"},
         {name + ".f"});
  return name + ".f";
}

// The quantized output "y" of rank `rank`.
void quantize_output(OnnxBuilder& b, const std::string& x, const QParams& q, int rank) {
  b.init_f32("qy.scale", {}, {q.scale});
  if (q.s8)
    init_raw<int8_t>(b, "qy.zp", {}, onnx::TensorProto::INT8, {static_cast<int8_t>(q.zp)});
  else
    init_raw<uint8_t>(b, "qy.zp", {}, onnx::TensorProto::UINT8, {static_cast<uint8_t>(q.zp)});
  b.node("QuantizeLinear", "qy.q", {x, "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", rank, q.s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
}

// Attention's core on given q [.., S, D], kt [.., D, S], v [.., S, D]:
// y = Q(DQ(Q(softmax(Q(q) Q(kt)))) Q(v)), every tensor uint8 (what
// quantizers write for attention; the softmax's output with zero point 0).
OnnxBuilder attention(const Shape& batch, int64_t S, int64_t D) {
  OnnxBuilder b;
  Shape qs = batch, ks = batch, vs = batch;
  qs.insert(qs.end(), {S, D});
  ks.insert(ks.end(), {D, S});
  vs.insert(vs.end(), {S, D});
  b.input("q", dims_of(qs));
  b.input("kt", dims_of(ks));
  b.input("v", dims_of(vs));
  std::string qf = qdq(b, "qq", "q", {false, 2.f / 255.f, 127});
  std::string kf = qdq(b, "qk", "kt", {false, 2.f / 255.f, 121});
  std::string vf = qdq(b, "qv", "v", {false, 2.f / 255.f, 131});
  b.node("MatMul", "scores", {qf, kf}, {"s"});
  std::string sf = qdq(b, "qs", "s", {false, 0.05f * std::sqrt(float(D)) / 8.f, 125});
  OnnxBuilder::attr_int(b.node("Softmax", "softmax", {sf}, {"p"}), "axis", -1);
  std::string pf = qdq(b, "qp", "p", {false, 1.f / 255.f, 0});
  b.node("MatMul", "context", {pf, vf}, {"c"});
  quantize_output(b, "c", {false, 0.5f / std::sqrt(float(S)), 128},
                  static_cast<int>(batch.size()) + 2);
  return b;
}

// One QLinearMatMul of two activations a [batch.., M, K], b [bbatch.., K, N].
OnnxBuilder qmatmul(const Shape& batch, bool broadcast, int64_t M, int64_t K, int64_t N,
                    const QParams& qa, const QParams& qb, const QParams& qy) {
  OnnxBuilder b;
  Shape as = batch, bs = broadcast ? Shape{} : batch;
  as.insert(as.end(), {M, K});
  bs.insert(bs.end(), {K, N});
  b.input("a", dims_of(as));
  b.input("b", dims_of(bs));
  std::string af = qdq(b, "qa", "a", qa);
  std::string bf = qdq(b, "qb", "b", qb);
  b.node("MatMul", "matmul", {af, bf}, {"mm"});
  quantize_output(b, "mm", qy, static_cast<int>(as.size()));
  return b;
}

// Builds g for `target` with `configs`, runs it here on `inputs` (the
// package's amx-* requirements dropped: its tiles are emulated) and returns
// its first output and the templates it used (and in *per_task how many tile
// kernels run their epilogue per task, their IR checked).
runtime::NDArray build_and_run(const graph::Graph& g, const codegen::Target& target,
                               const std::map<std::string, std::string>& configs,
                               const std::map<std::string, graph::Initializer>& inputs,
                               std::map<std::string, size_t>* used, int* per_task = nullptr) {
  ScratchDir dir;
  driver::BuildOptions o;
  o.target = target;
  o.configs = configs;
  driver::BuiltModule m = driver::build_module(g, o);
  int epilogues = expect_epilogues_per_task(m);
  if (per_task) *per_task = epilogues;
  nlohmann::json mod = nlohmann::json::parse(m.graph_json);
  *used = templates_of(mod);
  // Every fused epilogue runs in the tile kernel's tasks.
  EXPECT_EQ(epilogues, static_cast<int>(templates_with_epilogue(mod)));
  auto& f = mod["requires"]["cpu_features"];
  f.erase(std::remove_if(
              f.begin(), f.end(),
              [](const nlohmann::json& x) { return x.get<std::string>().rfind("amx-", 0) == 0; }),
          f.end());
  m.graph_json = mod.dump();
  std::string pkg = dir.file("p.tar");
  driver::write_package(m, o.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  for (const auto& [name, value] : inputs) ex.set_input(name, to_ndarray(value));
  ex.run();
  return ex.output(0);
}

TEST(AmxBmmBuild, SapphireRapidsSelectsTheTileTemplateForAttention) {
  ScratchDir dir;
  driver::BuildOptions o;
  o.target = sapphire_rapids();
  o.dump_kernels_dir = dir.file("kernels");
  driver::BuiltModule m = driver::build_module(import_built(attention({1, 3}, 36, 20), dir), o);
  nlohmann::json mod = nlohmann::json::parse(m.graph_json);
  auto used = templates_of(mod);
  EXPECT_EQ(used["batch_matmul_int8_amx.x86"], 2u) << mod.at("kernels").dump();
  EXPECT_EQ(used["batch_matmul_int8.x86"], 0u) << mod.at("kernels").dump();
  std::set<std::string> req;
  for (const auto& f : mod.at("requires").at("cpu_features")) req.insert(f.get<std::string>());
  EXPECT_TRUE(req.count("amx-tile") && req.count("amx-int8")) << mod.at("requires").dump();
  std::string as;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("kernels")))
    if (e.path().extension() == ".s") as += read_bytes(e.path().string());
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
    EXPECT_NE(as.find(n), std::string::npos) << n;
}

TEST(AmxBmmBuild, OtherShapesAndTargetsStayOnBatchMatmulInt8) {
  struct Case {
    int64_t S, D;
    codegen::Target target;
    size_t want_amx;
    const char* why;
  };
  for (const Case& c :
       {Case{36, 18, sapphire_rapids(), 1, "Q K^T's K = 18: only P V (K = 36) on tiles"},
        Case{35, 20, sapphire_rapids(), 1, "P V's K = 35: only Q K^T (K = 20) on tiles"},
        Case{36, 20, codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"), 0,
             "Zen 4 has no AMX"},
        Case{36, 20,
             codegen::Target::parse(
                 "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -mattr=-amx-int8"),
             0, "amx-int8 off"}}) {
    SCOPED_TRACE(c.why);
    ScratchDir dir;
    std::vector<std::string> keys =
        driver::template_workloads(import_built(attention({2}, c.S, c.D), dir), c.target.isa());
    ASSERT_EQ(keys.size(), 2u);
    size_t amx = 0;
    for (const std::string& k : keys) {
      std::string name = ops::Workload::parse(k).template_name;
      EXPECT_TRUE(name == "batch_matmul_int8_amx.x86" || name == "batch_matmul_int8.x86") << k;
      amx += name == "batch_matmul_int8_amx.x86";
    }
    EXPECT_EQ(amx, c.want_amx);
  }
  ScratchDir dir;
  std::vector<std::string> keys = driver::template_workloads(
      import_built(attention({2, 3}, 36, 20), dir), sapphire_rapids().isa());
  ASSERT_EQ(keys.size(), 2u);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys[0], "batch_matmul_int8_amx.x86(a=[6,36,20],b=[6,20,36],dtype=uint8)");
  EXPECT_EQ(keys[1], "batch_matmul_int8_amx.x86(a=[6,36,36],b=[6,36,20],dtype=uint8)");
}

// The attention block, emulated tiles against this machine's default build
// (batch_matmul_int8.x86 on vpdpbusd or AVX2): the same bytes.
TEST(AmxBmmBuild, EmulatedAttentionEqualsTheVnniBuild) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  std::mt19937 rng(91);
  for (const auto& [batch, S, D] :
       std::vector<std::tuple<Shape, int64_t, int64_t>>{{{1, 3}, 36, 20}, {{2}, 40, 64}}) {
    SCOPED_TRACE("batch " + graph::shape_str(batch) + " S " + std::to_string(S) + " D " +
                 std::to_string(D));
    ScratchDir dir;
    graph::Graph g = import_built(attention(batch, S, D), dir);
    std::map<std::string, graph::Initializer> inputs;
    for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
    std::map<std::string, size_t> used_amx, used_vnni;
    runtime::NDArray amx = build_and_run(g, host_with_amx(), {}, inputs, &used_amx);
    runtime::NDArray vnni = build_and_run(g, codegen::Target::host(), {}, inputs, &used_vnni);
    EXPECT_EQ(used_amx["batch_matmul_int8_amx.x86"], 2u);
    EXPECT_EQ(used_vnni["batch_matmul_int8.x86"], 2u);
    EXPECT_EQ(used_vnni["batch_matmul_int8_amx.x86"], 0u);
    ASSERT_EQ(amx.nbytes(), vnni.nbytes());
    EXPECT_EQ(std::memcmp(amx.data(), vnni.data(), amx.nbytes()), 0);
    const auto* y = static_cast<const uint8_t*>(vnni.data());
    std::set<uint8_t> values(y, y + vnni.nbytes());
    EXPECT_GT(values.size(), 8u) << "the output barely varies";
  }
}

// Single QLinearMatMuls, emulated, every config: byte for byte the
// interpreter's integer QLinearMatMul.
TEST(AmxBmmBuild, EmulatedTilesEndToEndBitExact) {
  if (runtime::host_arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  EmulateTiles emulate;
  codegen::Target target = host_with_amx();
  ASSERT_TRUE(target.isa().amx_int8);
  struct Case {
    Shape batch;
    bool broadcast;
    int64_t M, K, N;
    bool a_s8, b_s8;
    int32_t zp_a, zp_b;
  };
  const std::vector<Case> cases = {
      {{2, 3}, false, 17, 20, 33, false, false, 0, 131},  // u8 x u8, a softmax's zp 0
      {{4}, true, 40, 68, 9, false, true, 118, -3},       // broadcast b, a K tail
      {{}, false, 37, 132, 40, true, false, 5, 128},      // no batch dims, d = 0
      {{3}, false, 1, 4, 1, true, true, -128, 127},       // range ends
      {{2}, false, 130, 64, 16, false, false, 121, 119},  // tasks of several panels
  };
  int tested = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    SCOPED_TRACE("case " + std::to_string(c));
    QParams qa{k.a_s8, 2.f / 255.f, k.zp_a}, qb{k.b_s8, 2.f / 255.f, k.zp_b};
    QParams qy{c % 2 == 1, 0.03f * std::sqrt(static_cast<float>(k.K)) / 8.f, c % 2 ? 3 : 125};
    ScratchDir dir;
    graph::Graph g = import_built(qmatmul(k.batch, k.broadcast, k.M, k.K, k.N, qa, qb, qy), dir);
    graph::Graph folded = g;
    graph::passes::simplify(folded);
    graph::passes::fold_qdq(folded);
    std::mt19937 rng(static_cast<unsigned>(300 + c));
    std::map<std::string, graph::Initializer> inputs;
    for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
    const graph::Initializer want = graph::run_graph(folded, inputs).at(g.outputs[0]);
    std::set<uint8_t> values(want.data.begin(), want.data.end());
    EXPECT_GT(values.size(), std::min<size_t>(8, want.data.size() / 4))
        << "reference barely varies";

    std::vector<std::string> keys = driver::template_workloads(g, target.isa());
    ASSERT_EQ(keys.size(), 1u);
    ops::Workload w = ops::Workload::parse(keys[0]);
    ASSERT_EQ(w.template_name, "batch_matmul_int8_amx.x86");
    schedule::ConfigSpace space = ops::get_template(w.template_name).space(w);
    std::vector<std::map<std::string, std::string>> configs = {{}};  // the fallback
    for (int64_t i = 0; i < space.size(); ++i)
      configs.push_back({{keys[0], space.get(i).to_json()}});
    for (const auto& cfg : configs) {
      SCOPED_TRACE(cfg.empty() ? std::string("fallback") : cfg.begin()->second);
      std::map<std::string, size_t> used;
      int per_task = 0;
      runtime::NDArray y = build_and_run(g, target, cfg, inputs, &used, &per_task);
      ASSERT_EQ(used["batch_matmul_int8_amx.x86"], 1u);
      // The requantization and the row and column sum corrections run in
      // the tile kernel's tasks where fuse_ops fuses them (not in case 0,
      // u8 x u8 with a's zero point 0: there the correction's Add and the
      // requantization are a kernel of their own).
      EXPECT_EQ(per_task, c == 0 ? 0 : 1);
      expect_close(want, y, g.outputs[0], 0.0);
      ++tested;
    }
  }
  EXPECT_GT(tested, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace kiln::test
