// The integer path of a quantized transformer encoder's matrix products
// (issue 14, docs/quantization.md): Linear layers with a bias (Gemm with C,
// MatMul -> Add of a constant vector) and activations of rank 3 and 4 on
// dense_int8.x86, and activation x activation MatMuls (attention's Q K^T and
// P V) on batch_matmul_int8.x86. Each model is built end to end and compared
// byte for byte with the interpreter's integer result (graph::run_graph on
// the graph after fold_qdq: QLinearMatMul with int32 accumulators, ONNX
// Runtime's requantization). Shapes are drawn at random per case, with sizes
// that no tile divides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "driver_harness.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "ops/op_template.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

unsigned seed(unsigned base) {
  const char* env = std::getenv("KILN_DRIVER_TEST_SEED");
  return base + (env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 0u);
}

std::vector<std::string> dims_of(const Shape& s) {
  std::vector<std::string> d;
  for (int64_t v : s) d.push_back(std::to_string(v));
  return d;
}

// uint8 with a mid-range zero point, or int8 near zero.
struct QAct {
  bool s8 = false;
  float scale = 0.f;
  int32_t zp = 0;
};

QAct act(bool s8, float scale, std::mt19937& rng) {
  QAct q{s8, scale, 0};
  q.zp = s8 ? static_cast<int32_t>(rng() % 21) - 10 : 118 + static_cast<int32_t>(rng() % 21);
  return q;
}

void init_qparams(OnnxBuilder& b, const std::string& name, const QAct& q) {
  b.init_f32(name + ".scale", {}, {q.scale});
  if (q.s8)
    init_raw<int8_t>(b, name + ".zp", {}, onnx::TensorProto::INT8, {static_cast<int8_t>(q.zp)});
  else
    init_raw<uint8_t>(b, name + ".zp", {}, onnx::TensorProto::UINT8, {static_cast<uint8_t>(q.zp)});
}

// Q(x) -> DQ: returns the dequantized value.
std::string quantize(OnnxBuilder& b, const std::string& name, const std::string& x, const QAct& q) {
  init_qparams(b, name, q);
  b.node("QuantizeLinear", name + ".q", {x, name + ".scale", name + ".zp"}, {name + ".u"});
  b.node("DequantizeLinear", name + ".dq", {name + ".u", name + ".scale", name + ".zp"},
         {name + ".f"});
  return name + ".f";
}

// Q(x) as the graph output "y".
void quantize_output(OnnxBuilder& b, const std::string& x, const QAct& q, int rank) {
  init_qparams(b, "qy", q);
  b.node("QuantizeLinear", "qy.q", {x, "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", rank, q.s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
}

// An output scale that spreads a K-term product's outputs over tens of quanta.
float output_scale(float xs, int64_t k) {
  return 5400.f * std::sqrt(static_cast<float>(k)) * xs * 0.006f / 40.f;
}

// DQ(w int8 [K, N], or [N, K] when trans_b) with per-column or per-tensor
// scales; returns the float weight and its scales.
std::string qdq_weight(OnnxBuilder& b, int64_t K, int64_t N, bool trans_b, bool per_col,
                       std::mt19937& rng, std::vector<float>* scales) {
  Shape wshape = trans_b ? Shape{N, K} : Shape{K, N};
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> w(numel(wshape));
  for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
  init_raw<int8_t>(b, "w", wshape, onnx::TensorProto::INT8, w);
  int64_t nscale = per_col ? N : 1;
  Shape sdims = per_col ? Shape{N} : Shape{};
  *scales = uniform(static_cast<size_t>(nscale), rng, 0.002f, 0.01f);
  b.init_f32("ws", sdims, *scales);
  init_raw<int8_t>(b, "wzp", sdims, onnx::TensorProto::INT8,
                   std::vector<int8_t>(static_cast<size_t>(nscale), 0));
  auto* dq = b.node("DequantizeLinear", "wdq", {"w", "ws", "wzp"}, {"wf"});
  OnnxBuilder::attr_int(dq, "axis", trans_b ? 0 : 1);
  return "wf";
}

// How a Linear layer's bias is written.
enum class Bias { kNone, kDqInt32, kFloat };

// The bias of N values: DQ(int32) at scale xs * ws[n] (ORT's quantizer) or
// a float constant (an exporter's), of shape `shape`.
std::string make_bias(OnnxBuilder& b, Bias kind, const Shape& shape, float xs,
                      const std::vector<float>& ws, std::mt19937& rng) {
  int64_t N = shape.back();
  if (kind == Bias::kFloat) {
    // Values of the order of the products, so the bias matters in the output.
    b.init_f32("bias", shape, uniform(static_cast<size_t>(N), rng, -0.5f, 0.5f));
    return "bias";
  }
  std::uniform_int_distribution<int32_t> bd(-3000, 3000);
  std::vector<int32_t> bias(static_cast<size_t>(N));
  for (int32_t& v : bias) v = bd(rng);
  std::vector<float> bs(static_cast<size_t>(N));
  for (int64_t c = 0; c < N; ++c) bs[static_cast<size_t>(c)] = xs * ws[ws.size() == 1 ? 0 : c];
  init_raw<int32_t>(b, "b", shape, onnx::TensorProto::INT32, bias);
  b.init_f32("bs", {N}, bs);
  init_raw<int32_t>(b, "bzp", {N}, onnx::TensorProto::INT32,
                    std::vector<int32_t>(static_cast<size_t>(N), 0));
  auto* dq = b.node("DequantizeLinear", "bdq", {"b", "bs", "bzp"}, {"bf"});
  OnnxBuilder::attr_int(dq, "axis", static_cast<int64_t>(shape.size()) - 1);
  return "bf";
}

struct Built {
  std::map<std::string, size_t> folded;     // op_type counts of the reference graph
  size_t qlinear_with_bias = 0;             // QLinearMatMul nodes with kiln's 9th input
  std::map<std::string, size_t> templates;  // kernels per template, in mod.json
  nlohmann::json mod;
};

// Imports the model, evaluates the folded graph (integer arithmetic) as the
// reference, builds and runs it and compares every output byte for byte.
Built check_bit_exact(const OnnxBuilder& b, const std::string& name, unsigned rng_seed,
                      const std::map<std::string, std::string>& configs = {}) {
  Built r;
  ScratchDir dir;
  std::string onnx_path = dir.file(name + ".onnx");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, {});
  graph::Graph folded = g;
  graph::passes::simplify(folded);
  graph::passes::fold_qdq(folded);
  for (const auto& n : folded.nodes) {
    ++r.folded[n.op_type];
    r.qlinear_with_bias += n.op_type == "QLinearMatMul" && n.inputs.size() == 9;
  }

  std::mt19937 rng(rng_seed);
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
  std::map<std::string, graph::Initializer> want = graph::run_graph(folded, inputs);

  driver::BuildOptions options;
  options.configs = configs;
  driver::BuiltModule m = driver::build_module(g, options);
  r.mod = nlohmann::json::parse(m.graph_json);
  for (const auto& k : r.mod.at("kernels"))
    for (const auto& t : k.at("op_types")) {
      std::string s = t.get<std::string>();
      if (s.find(".x86") != std::string::npos) ++r.templates[s];
    }
  std::string pkg = dir.file(name + ".tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  for (const auto& [in_name, value] : inputs) ex.set_input(in_name, to_ndarray(value));
  ex.run();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    SCOPED_TRACE(name + " output '" + g.outputs[i] + "'");
    const graph::Initializer& w = want.at(g.outputs[i]);
    expect_close(w, ex.output(i), g.outputs[i], 0.0);
    // A (nearly) constant reference would let a wrong kernel pass: more than
    // 8 distinct bytes, or a quarter of the elements for small outputs.
    std::set<uint8_t> values(w.data.begin(), w.data.end());
    size_t need = std::max<size_t>(1, std::min<size_t>(8, w.data.size() / 4));
    EXPECT_GT(values.size(), need) << "reference output '" << g.outputs[i] << "' barely varies";
  }
  return r;
}

// A Linear layer with a bias in each form the exporters and quantizers write
// it: Gemm (transB 0 and 1) with C as DQ(int32) or a float constant, and
// MatMul -> Add(constant [N] or [1, 1, N]) on activations of rank 2 to 4;
// u8 and s8 activations, per-column and per-tensor weight scales. All fold
// into QLinearMatMul with kiln's int32 bias and run on dense_int8.x86.
TEST(Int8Encoder, LinearWithBiasBitExact) {
  std::mt19937 rng(seed(240));
  for (int c = 0; c < 8; ++c) {
    bool s8 = c % 2 == 1, gemm = c < 4, per_col = c % 3 != 2;
    bool trans_b = gemm && c % 2 == 0;
    Bias bias = c % 4 < 2 ? Bias::kDqInt32 : Bias::kFloat;
    int64_t K = 5 + static_cast<int64_t>(rng() % 70), N = 3 + static_cast<int64_t>(rng() % 40);
    Shape xs = gemm ? Shape{1 + static_cast<int64_t>(rng() % 9), K}
                    : (c % 2 ? Shape{2, 1 + static_cast<int64_t>(rng() % 13), K}
                             : Shape{2, 3, 1 + static_cast<int64_t>(rng() % 7), K});
    Shape bshape = gemm || c == 6 ? Shape{N} : Shape{1, 1, N};
    std::string what = "case " + std::to_string(c) + ": " + (s8 ? "s8" : "u8") +
                       (gemm ? (trans_b ? " Gemm transB" : " Gemm") : " MatMul+Add") + " x " +
                       graph::shape_str(xs) + " N " + std::to_string(N) +
                       (per_col ? " per-column" : " per-tensor") +
                       (bias == Bias::kFloat ? " float bias" : " DQ(int32) bias");
    SCOPED_TRACE(what);
    OnnxBuilder b;
    b.input("x", dims_of(xs));
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    std::vector<float> ws;
    std::string wf = qdq_weight(b, K, N, trans_b, per_col, rng, &ws);
    std::string bf = make_bias(b, bias, bshape, qx.scale, ws, rng);
    std::string y;
    if (gemm) {
      auto* n = b.node("Gemm", "gemm", {xf, wf, bf}, {"mm"});
      OnnxBuilder::attr_int(n, "transB", trans_b ? 1 : 0);
      y = "mm";
    } else {
      b.node("MatMul", "matmul", {xf, wf}, {"mm"});
      // Both operand orders of the Add occur (PyTorch writes the bias first).
      b.node("Add", "add",
             c % 3 == 0 ? std::vector<std::string>{bf, "mm"} : std::vector<std::string>{"mm", bf},
             {"biased"});
      y = "biased";
    }
    QAct qy = act(s8, output_scale(qx.scale, K), rng);
    int rank = static_cast<int>(std::max(xs.size(), bshape.size()));
    quantize_output(b, y, qy, rank);
    Built r = check_bit_exact(b, "linear" + std::to_string(c), seed(27) + static_cast<unsigned>(c));
    EXPECT_EQ(r.folded["QLinearMatMul"], 1u);
    EXPECT_EQ(r.qlinear_with_bias, 1u);
    EXPECT_EQ(r.folded["Add"] + r.folded["Gemm"] + r.folded["MatMul"], 0u);
    EXPECT_EQ(r.templates["dense_int8.x86"], 1u) << r.mod.at("kernels").dump();
  }
}

// A bias the fold must not take: an Add of a non-constant, and an Add whose
// constant is not a per-column vector ([M, N]); both stay DQ -> MatMul ->
// Add -> Q (the float path).
TEST(Int8Encoder, AddThatIsNoBiasStaysFloat) {
  std::mt19937 rng(seed(241));
  int64_t M = 6, K = 19, N = 11;
  for (int c = 0; c < 2; ++c) {
    SCOPED_TRACE(c == 0 ? "Add of an activation" : "Add of an [M, N] constant");
    OnnxBuilder b;
    b.input("x", {std::to_string(M), std::to_string(K)});
    QAct qx = act(false, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    std::vector<float> ws;
    std::string wf = qdq_weight(b, K, N, false, true, rng, &ws);
    b.node("MatMul", "matmul", {xf, wf}, {"mm"});
    if (c == 0) {
      b.input("r", {std::to_string(M), std::to_string(N)});
      b.node("Add", "add", {"mm", "r"}, {"biased"});
    } else {
      b.init_f32("c", {M, N}, uniform(static_cast<size_t>(M * N), rng, -0.5f, 0.5f));
      b.node("Add", "add", {"mm", "c"}, {"biased"});
    }
    QAct qy = act(false, output_scale(qx.scale, K), rng);
    quantize_output(b, "biased", qy, 2);
    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    graph::Graph g = frontend::import_onnx(path, {});
    graph::passes::simplify(g);
    EXPECT_EQ(graph::passes::fold_qdq(g), 0);
    std::map<std::string, size_t> ops;
    for (const auto& n : g.nodes) ++ops[n.op_type];
    EXPECT_EQ(ops["QLinearMatMul"], 0u);
    EXPECT_EQ(ops["MatMul"], 1u);
    EXPECT_EQ(ops["Add"], 1u);
  }
}

// QLinearMatMul of an activation of rank 3 and 4 ([B, S, K] x [K, N], as a
// transformer's projections): the rows are flattened into dense_int8's M
// without a copy. Random shapes, u8 and s8, tuned configs as well as the
// fallback.
TEST(Int8Encoder, RankNActivationBitExact) {
  std::mt19937 rng(seed(242));
  std::mt19937_64 pick(seed(243));
  for (int c = 0; c < 6; ++c) {
    bool s8 = c % 2 == 1, per_col = c % 3 != 1;
    int64_t K = 3 + static_cast<int64_t>(rng() % 80), N = 1 + static_cast<int64_t>(rng() % 50);
    Shape xs =
        c < 3
            ? Shape{1 + static_cast<int64_t>(rng() % 3), 1 + static_cast<int64_t>(rng() % 20), K}
            : Shape{2, 1 + static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 9), K};
    SCOPED_TRACE("case " + std::to_string(c) + ": " + (s8 ? "s8" : "u8") + " x " +
                 graph::shape_str(xs) + " N " + std::to_string(N));
    OnnxBuilder b;
    b.input("x", dims_of(xs));
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    std::vector<float> ws;
    std::string wf = qdq_weight(b, K, N, false, per_col, rng, &ws);
    b.node("MatMul", "matmul", {xf, wf}, {"mm"});
    QAct qy = act(s8, output_scale(qx.scale, K), rng);
    quantize_output(b, "mm", qy, static_cast<int>(xs.size()));

    std::map<std::string, std::string> configs;
    if (c % 2 == 0) {  // a random point of the workload's space
      ScratchDir dir;
      std::string path = dir.file("m.onnx");
      write_bytes(path, b.bytes());
      std::vector<std::string> keys = driver::template_workloads(frontend::import_onnx(path, {}));
      ASSERT_EQ(keys.size(), 1u);
      ops::Workload w = ops::Workload::parse(keys[0]);
      EXPECT_EQ(w.template_name, "dense_int8.x86");
      EXPECT_EQ(w.get("data"), (Shape{static_cast<int64_t>(numel(xs)) / K, K}));
      configs[keys[0]] = ops::get_template(w.template_name).space(w).random(pick).to_json();
    }
    Built r = check_bit_exact(b, "rank" + std::to_string(c), seed(31) + static_cast<unsigned>(c),
                              configs);
    EXPECT_EQ(r.templates["dense_int8.x86"], 1u) << r.mod.at("kernels").dump();
  }
}

// QLinearMatMul of two activations (attention's Q K^T and P V) on
// batch_matmul_int8.x86: every dtype pair (u8 x u8 is what quantizers write
// for attention, exact through the row and column sum corrections), zero
// points at the range ends (0: a softmax's output; 128: no row-sum term),
// batch dims of rank 0 to 2, a right operand broadcast over the batch, K
// and N that no tile or quad divides.
TEST(Int8Encoder, ActivationTimesActivationBitExact) {
  std::mt19937 rng(seed(244));
  for (int c = 0; c < 9; ++c) {
    bool a_s8 = c % 4 >= 2, b_s8 = c % 2 == 1, broadcast = c == 5;
    int64_t M = 1 + static_cast<int64_t>(rng() % 20), K = 1 + static_cast<int64_t>(rng() % 70),
            N = 1 + static_cast<int64_t>(rng() % 40);
    // Case 8: no batch dims at all (two 2-D activations).
    Shape batch = c < 4    ? Shape{2, 3}
                  : c == 8 ? Shape{}
                           : Shape{1 + static_cast<int64_t>(rng() % 4)};
    Shape as = batch, bs = broadcast ? Shape{} : batch;
    as.insert(as.end(), {M, K});
    bs.insert(bs.end(), {K, N});
    QAct qa = act(a_s8, 2.f / 255.f, rng), qb = act(b_s8, 2.f / 255.f, rng);
    if (c == 0) qa.zp = 0;     // a softmax's output: no column-sum term
    if (c == 3) qb.zp = -128;  // s8 b at the range end
    if (c == 4) qb.zp = 128;   // u8 b: d = 0, no row-sum term
    if (c == 6) qa.zp = 127;
    if (c == 7) qa.zp = -128, qb.zp = 127;
    std::string what = "case " + std::to_string(c) + ": " + (a_s8 ? "s8" : "u8") + " x " +
                       (b_s8 ? "s8" : "u8") + " a " + graph::shape_str(as) + " b " +
                       graph::shape_str(bs) + " zp " + std::to_string(qa.zp) + ", " +
                       std::to_string(qb.zp);
    SCOPED_TRACE(what);
    OnnxBuilder b;
    b.input("a", dims_of(as));
    b.input("b", dims_of(bs));
    std::string af = quantize(b, "qa", "a", qa);
    std::string bf = quantize(b, "qb", "b", qb);
    b.node("MatMul", "matmul", {af, bf}, {"mm"});
    QAct qy = act(c % 3 == 0, 0.03f * std::sqrt(static_cast<float>(K)) / 8.f, rng);
    quantize_output(b, "mm", qy, static_cast<int>(as.size()));
    Built r = check_bit_exact(b, "attn" + std::to_string(c), seed(33) + static_cast<unsigned>(c));
    EXPECT_EQ(r.folded["QLinearMatMul"], 1u);
    EXPECT_EQ(r.folded["MatMul"], 0u);
    EXPECT_EQ(r.templates["batch_matmul_int8.x86"], 1u) << r.mod.at("kernels").dump();
  }
}

}  // namespace
}  // namespace kiln::test
