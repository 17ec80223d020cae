// The integer path of quantized models (docs/quantization.md, "On the int8
// templates"): QDQ models whose convolutions the int8 templates run, built
// end to end and compared bit-exactly with the interpreter's integer result
// (graph::run_graph on the graph after fold_qdq, where every QLinearConv is
// evaluated with int32 accumulators and ONNX Runtime's requantization).
// Shapes, dtypes and parameter layouts are drawn at random per case; channel
// counts include ones that the channel blocks do not divide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/target.h"
#include "driver_harness.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "ops/op_template.h"
#include "ort_peer.h"
#include "runtime/npz.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;

unsigned seed(unsigned base) {
  const char* env = std::getenv("KILN_DRIVER_TEST_SEED");
  return base + (env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 0u);
}

// Activation quantization: uint8 with a mid-range zero point, or int8
// (symmetric-ish, the s8 models ORT's quantizer can write).
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

// Q(x) -> DQ: the quantized activation `name` and its dequantized value.
std::string quantize(OnnxBuilder& b, const std::string& name, const std::string& x, const QAct& q) {
  init_qparams(b, name, q);
  b.node("QuantizeLinear", name + ".q", {x, name + ".scale", name + ".zp"}, {name + ".u"});
  b.node("DequantizeLinear", name + ".dq", {name + ".u", name + ".scale", name + ".zp"},
         {name + ".f"});
  return name + ".f";
}

struct QConvSpec {
  int64_t cin, cout, k = 3, stride = 1, pad = 1;
  bool per_channel = true, bias = true, relu = false;
  int64_t group = 1;  // cin for a depthwise convolution (cout = cin)
  int wmax = 127;     // weights drawn in [-wmax, wmax]
  int plant = 0;      // if not 0: one weight set to this value (a 65 among 7-bit ones)
};

// DQ(w int8) [, DQ(b int32)] -> Conv [-> Relu] on the float `x` (scale xs):
// ORT's QDQ format around one convolution; returns the float conv output.
std::string qdq_conv(OnnxBuilder& b, const std::string& name, const std::string& x, float xs,
                     const QConvSpec& s, std::mt19937& rng) {
  Shape wshape = {s.cout, s.cin / s.group, s.k, s.k};
  std::uniform_int_distribution<int> wd(-s.wmax, s.wmax);
  std::vector<int8_t> w(numel(wshape));
  for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
  // The extremes of the range appear (with wmax 64: the pmaddubsw pair sums
  // closest to saturation, 255 * 64 twice).
  if (s.wmax != 127) {
    w[0] = static_cast<int8_t>(s.wmax);
    w[w.size() / 2] = static_cast<int8_t>(-s.wmax);
  }
  if (s.plant) w[w.size() - 1] = static_cast<int8_t>(s.plant);
  init_raw<int8_t>(b, name + ".w", wshape, onnx::TensorProto::INT8, w);
  int64_t nscale = s.per_channel ? s.cout : 1;
  std::vector<float> ws = uniform(static_cast<size_t>(nscale), rng, 0.002f, 0.01f);
  Shape sdims = s.per_channel ? Shape{s.cout} : Shape{};
  b.init_f32(name + ".ws", sdims, ws);
  init_raw<int8_t>(b, name + ".wzp", sdims, onnx::TensorProto::INT8,
                   std::vector<int8_t>(static_cast<size_t>(nscale), 0));
  auto* dq = b.node("DequantizeLinear", name + ".wdq", {name + ".w", name + ".ws", name + ".wzp"},
                    {name + ".wf"});
  OnnxBuilder::attr_int(dq, "axis", 0);
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
    auto* bdq = b.node("DequantizeLinear", name + ".bdq",
                       {name + ".b", name + ".bs", name + ".bzp"}, {name + ".bf"});
    OnnxBuilder::attr_int(bdq, "axis", 0);
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

QAct act(bool s8, float scale, std::mt19937& rng, bool relu = false) {
  QAct q{s8, scale, 0};
  if (relu)
    q.zp = s8 ? -128 : 0;  // ORT's quantizer: the Relu's range starts at 0
  else
    q.zp = s8 ? static_cast<int32_t>(rng() % 21) - 10 : 118 + static_cast<int32_t>(rng() % 21);
  return q;
}

struct Built {
  size_t qlinear_convs = 0;  // in the reference graph
  size_t int8_kernels = 0;   // kernels of mod.json running an int8 conv (runs_int8_conv)
  nlohmann::json mod;
  // The inputs drawn and the interpreter's outputs (which the build matched).
  std::map<std::string, graph::Initializer> inputs, want;
};

// Any int8 convolution template: direct, depthwise, or Winograd (what a 3x3
// stride-1 conv runs by default on a host without VNNI).
bool runs_int8_conv(const nlohmann::json& k) {
  for (const auto& t : k.at("op_types")) {
    const std::string op = t.get<std::string>();
    if (op.find("conv2d_NCHWc_int8") != std::string::npos ||
        op.find("conv2d_winograd_NCHWc_int8") != std::string::npos)
      return true;
  }
  return false;
}

// Imports the model, evaluates the folded graph (QLinearConv nodes, integer
// arithmetic) as the reference, builds and runs it and compares every output
// byte for byte.
// target: the package's (default: this machine); dump: write kernels' assembly there.
Built check_bit_exact(const OnnxBuilder& b, const std::string& name, unsigned rng_seed,
                      const std::map<std::string, std::string>& configs = {},
                      const codegen::Target* target = nullptr, const std::string& dump = "") {
  Built r;
  ScratchDir dir;
  std::string onnx_path = dir.file(name + ".onnx");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, {});
  graph::Graph folded = g;
  graph::passes::simplify(folded);
  graph::passes::fold_qdq(folded);
  for (const auto& n : folded.nodes) r.qlinear_convs += n.op_type == "QLinearConv";

  std::mt19937 rng(rng_seed);
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) inputs[in.name] = random_input(in.type, {-1.0, 1.0}, rng);
  std::map<std::string, graph::Initializer> want = graph::run_graph(folded, inputs);
  r.inputs = inputs;
  r.want = want;

  driver::BuildOptions options;
  options.configs = configs;
  if (target) options.target = *target;
  options.dump_kernels_dir = dump;
  driver::BuiltModule m = driver::build_module(g, options);
  r.mod = nlohmann::json::parse(m.graph_json);
  for (const auto& k : r.mod.at("kernels")) r.int8_kernels += runs_int8_conv(k);
  std::string pkg = dir.file(name + ".tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  for (const auto& [in_name, value] : inputs) ex.set_input(in_name, to_ndarray(value));
  ex.run();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    SCOPED_TRACE(name + " output '" + g.outputs[i] + "'");
    const graph::Initializer& w = want.at(g.outputs[i]);
    expect_close(w, ex.output(i), g.outputs[i], 0.0);
    // A constant reference would let a wrong kernel pass.
    bool varies = false;
    size_t es = graph::dtype_size(w.type.dtype);
    for (size_t j = es; j < w.data.size() && !varies; j += es)
      varies = std::memcmp(w.data.data(), w.data.data() + j, es) != 0;
    EXPECT_TRUE(varies) << "reference output '" << g.outputs[i] << "' is constant";
  }
  return r;
}

// Two quantized convolutions in a row (uint8/int8 activations between them
// stay in NCHW[x]c), random shapes and settings per case.
TEST(Int8Path, ConvChainsBitExact) {
  std::mt19937 rng(seed(140));
  for (int c = 0; c < 8; ++c) {
    bool s8 = c % 2 == 1;
    int64_t cin = std::vector<int64_t>{3, 5, 8, 12, 16, 20}[rng() % 6];
    int64_t mid = std::vector<int64_t>{4, 6, 10, 16, 24, 36}[rng() % 6];
    int64_t cout = std::vector<int64_t>{5, 8, 12, 17, 32}[rng() % 5];
    int64_t h = 5 + static_cast<int64_t>(rng() % 7), w = 5 + static_cast<int64_t>(rng() % 7);
    QConvSpec s1{cin, mid, (c % 3 == 2) ? 1 : 3, 1 + static_cast<int64_t>(rng() % 2), 0};
    s1.pad = s1.k == 3 ? 1 : 0;
    s1.per_channel = c % 4 < 2;
    s1.bias = c % 3 != 1;
    s1.relu = c % 4 == 1 || c % 4 == 2;
    QConvSpec s2{mid, cout, 3, 1, 1};
    s2.per_channel = !s1.per_channel;
    s2.bias = !s1.bias;
    std::string what = "case " + std::to_string(c) + ": " + (s8 ? "s8" : "u8") + " cin " +
                       std::to_string(cin) + " mid " + std::to_string(mid) + " cout " +
                       std::to_string(cout) + " " + std::to_string(h) + "x" + std::to_string(w) +
                       " k " + std::to_string(s1.k) + " stride " + std::to_string(s1.stride) +
                       (s1.per_channel ? " per-channel" : " per-tensor") +
                       (s1.bias ? " bias" : "") + (s1.relu ? " relu" : "");
    SCOPED_TRACE(what);
    OnnxBuilder b;
    b.input("x", {"1", std::to_string(cin), std::to_string(h), std::to_string(w)});
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    std::string y1 = qdq_conv(b, "conv1", xf, qx.scale, s1, rng);
    QAct q1 = act(s8, output_scale(qx.scale, cin * s1.k * s1.k), rng, s1.relu);
    std::string y1f = quantize(b, "q1", y1, q1);
    std::string y2 = qdq_conv(b, "conv2", y1f, q1.scale, s2, rng);
    QAct q2 = act(s8, output_scale(q1.scale, mid * 9), rng);
    init_qparams(b, "q2", q2);
    b.node("QuantizeLinear", "q2.q", {y2, "q2.scale", "q2.zp"}, {"y"});
    output_any(b, "y", 4, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
    Built r = check_bit_exact(b, "chain" + std::to_string(c), seed(7) + static_cast<unsigned>(c));
    EXPECT_EQ(r.qlinear_convs, 2u);
    EXPECT_EQ(r.int8_kernels, 2u) << r.mod.at("kernels").dump();
  }
}

// The same chain built with configs a tuner could pick (random points of the
// int8 workloads' spaces, channel blocks that divide nothing included):
// kiln tune's tasks are exactly these workloads, keyed with dtype=uint8.
TEST(Int8Path, TunedConfigsStayBitExact) {
  std::mt19937 rng(seed(143));
  std::mt19937_64 pick(seed(144));
  for (int c = 0; c < 4; ++c) {
    bool s8 = c % 2 == 1;
    int64_t cin = std::vector<int64_t>{3, 12, 20}[rng() % 3];
    int64_t mid = std::vector<int64_t>{10, 24, 36}[rng() % 3], cout = 17;
    OnnxBuilder b;
    b.input("x", {"1", std::to_string(cin), "9", "7"});
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    QConvSpec s1{cin, mid, 3, 1, 1};
    std::string y1 = qdq_conv(b, "conv1", xf, qx.scale, s1, rng);
    QAct q1 = act(s8, output_scale(qx.scale, cin * 9), rng);
    std::string y1f = quantize(b, "q1", y1, q1);
    std::string y2 = qdq_conv(b, "conv2", y1f, q1.scale, {mid, cout, 1, 1, 0}, rng);
    QAct q2 = act(s8, output_scale(q1.scale, mid), rng);
    init_qparams(b, "q2", q2);
    b.node("QuantizeLinear", "q2.q", {y2, "q2.scale", "q2.zp"}, {"y"});
    output_any(b, "y", 4, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);

    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    std::vector<std::string> keys = driver::template_workloads(frontend::import_onnx(path, {}));
    ASSERT_EQ(keys.size(), 2u);
    std::map<std::string, std::string> configs;
    for (const std::string& key : keys) {
      EXPECT_NE(key.find("conv2d_NCHWc_int8.x86("), std::string::npos) << key;
      EXPECT_NE(key.find("dtype=uint8"), std::string::npos) << key;
      ops::Workload w = ops::Workload::parse(key);
      const ops::OpTemplate& t = ops::get_template(w.template_name);
      schedule::ConfigSpace space = t.space(w);
      configs[key] = space.random(pick).to_json();
    }
    std::string what;
    for (const auto& [k, v] : configs) what += k + " " + v + "\n";
    SCOPED_TRACE(what);
    Built r = check_bit_exact(b, "tuned" + std::to_string(c), seed(19) + static_cast<unsigned>(c),
                              configs);
    EXPECT_EQ(r.int8_kernels, 2u) << r.mod.at("kernels").dump();
  }
}

bool runs_dense_int8(const nlohmann::json& k) {
  for (const auto& t : k.at("op_types"))
    if (t.get<std::string>() == "dense_int8.x86") return true;
  return false;
}

// The assembly files under dir (--dump-kernels) that contain `what`.
int files_with(const std::string& dir, const std::string& what) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".s") continue;
    std::ifstream in(e.path());
    std::stringstream s;
    s << in.rdbuf();
    n += s.str().find(what) != std::string::npos;
  }
  return n;
}

// `kiln build` of a QDQ model for haswell names how many of its int8 conv /
// dense workloads keep 8-bit weights (here conv2 of conv1, conv2 and the
// MatMul) and how to get 7-bit ones; a build for a VNNI target says nothing.
void expect_eight_bit_note(const std::string& model) {
  ScratchDir tmp, capture, out;
  CommandResult hsw = run_kiln("build " + quote(model) + " -o " + quote(out.file("h.tar")) +
                                   " --no-shipped-logs --target 'llvm -mcpu=haswell'",
                               tmp, capture);
  ASSERT_EQ(hsw.status, 0) << hsw.err;
  EXPECT_NE(hsw.out.find("note: 1 of 3 int8 conv/dense workloads have weights outside [-64, 64]"),
            std::string::npos)
      << hsw.out;
  EXPECT_NE(hsw.out.find("reduce_range=True"), std::string::npos) << hsw.out;
  CommandResult icx = run_kiln("build " + quote(model) + " -o " + quote(out.file("i.tar")) +
                                   " --no-shipped-logs --target "
                                   "'llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server'",
                               tmp, capture);
  ASSERT_EQ(icx.status, 0) << icx.err;
  EXPECT_EQ(icx.out.find("weights outside [-64, 64]"), std::string::npos) << icx.out;
}

// 7-bit weights (kiln quantize --reduce-range): a QLinearConv or QLinearMatMul
// whose constant weight lies entirely within [-64, 64] gets weight_range=[7] on
// a target without a dot instruction (haswell), and its kernel is pmaddubsw +
// pmaddwd; a weight of 65 or -65 keeps the exact vpmaddwd sequence; a target
// with VNNI never gets the parameter. A conv of 3 channels gets fold_kw=[1] on
// haswell only. Built for haswell (which this machine
// runs) and for this machine, both bit-exact against the interpreter.
TEST(Int8Path, SevenBitWeightsTakeThePmaddubswPathOnlyWhenInRange) {
  if (!codegen::Target::host().has_feature("avx2")) GTEST_SKIP() << "the host has no AVX2";
  const codegen::Target hsw = codegen::Target::parse("llvm -mcpu=haswell");
  const codegen::Target icx =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  std::mt19937 rng(seed(145));
  for (int c = 0; c < 4; ++c) {
    bool s8 = c % 2 == 1;
    int plant = c < 2 ? 65 : -65;
    SCOPED_TRACE("case " + std::to_string(c) + (s8 ? " s8" : " u8") + ", planted " +
                 std::to_string(plant));
    int64_t cin = std::vector<int64_t>{3, 12, 20, 16}[c],
            mid = std::vector<int64_t>{10, 24, 17, 32}[c];
    int64_t K = 5 + static_cast<int64_t>(rng() % 40), N = 3 + static_cast<int64_t>(rng() % 30);
    OnnxBuilder b;
    b.input("x", {"1", std::to_string(cin), "9", "11"});
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    // conv1: 7-bit weights; conv2: 7-bit but one (planted) 65 or -65.
    QConvSpec s1{cin, mid, 3, 1, 1};
    s1.wmax = 64;
    s1.per_channel = c < 2;
    std::string y1 = qdq_conv(b, "conv1", xf, qx.scale, s1, rng);
    QAct q1 = act(s8, output_scale(qx.scale, cin * 9), rng);
    std::string y1f = quantize(b, "q1", y1, q1);
    QConvSpec s2{mid, K, c % 2 ? 1 : 3, 1, c % 2 ? 0 : 1};
    s2.wmax = 64;
    s2.plant = plant;
    std::string y2 = qdq_conv(b, "conv2", y1f, q1.scale, s2, rng);
    QAct q2 = act(s8, output_scale(q1.scale, mid * s2.k * s2.k), rng);
    std::string y2f = quantize(b, "q2", y2, q2);
    // Pooled to [1, K] for a QLinearMatMul with 7-bit weights.
    b.node("GlobalAveragePool", "gap", {y2f}, {"pooled"});
    init_raw<int64_t>(b, "flat_shape", {2}, onnx::TensorProto::INT64, {1, K});
    b.node("Reshape", "flat", {"pooled", "flat_shape"}, {"flat.y"});
    std::string ff = quantize(b, "qf", "flat.y", act(s8, 2.f / 255.f, rng));
    std::uniform_int_distribution<int> wd(-64, 64);
    std::vector<int8_t> w(static_cast<size_t>(K * N));
    for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
    w[0] = 64;
    w[1] = -64;
    init_raw<int8_t>(b, "w", {K, N}, onnx::TensorProto::INT8, w);
    b.init_f32("ws", {}, {0.004f});
    init_raw<int8_t>(b, "wzp", {}, onnx::TensorProto::INT8, {0});
    b.node("DequantizeLinear", "wdq", {"w", "ws", "wzp"}, {"wf"});
    b.node("MatMul", "matmul", {ff, "wf"}, {"mm"});
    QAct qy = act(s8, output_scale(2.f / 255.f, K), rng);
    init_qparams(b, "qy", qy);
    b.node("QuantizeLinear", "qy.q", {"mm", "qy.scale", "qy.zp"}, {"y"});
    output_any(b, "y", 2, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);

    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    graph::Graph g = frontend::import_onnx(path, {});
    int narrow = 0, exact = 0;
    for (const std::string& key : driver::template_workloads(g, hsw.isa())) {
      if (key.rfind("conv2d_NCHWc_int8.x86(", 0) != 0 && key.rfind("dense_int8.x86(", 0) != 0)
        continue;
      bool has = key.find("weight_range=[7]") != std::string::npos;
      narrow += has;
      exact += !has;
      // conv1 (cin channels in) and the MatMul are in range, conv2 (mid in) is not.
      bool conv2 = key.find("data=[1," + std::to_string(mid) + ",") != std::string::npos;
      EXPECT_EQ(has, !conv2) << key;
      // Case 0's conv1 reads 3 channels: its dot runs over (kw, c) pairs.
      bool three_in = key.find("data=[1,3,") != std::string::npos;
      EXPECT_EQ(key.find("fold_kw=[1]") != std::string::npos, three_in) << key;
    }
    EXPECT_EQ(narrow, 2);
    EXPECT_EQ(exact, 1);
    for (const std::string& key : driver::template_workloads(g, icx.isa())) {
      EXPECT_EQ(key.find("weight_range"), std::string::npos) << "VNNI: " << key;
      EXPECT_EQ(key.find("fold_kw"), std::string::npos) << "VNNI: " << key;
    }
    if (c == 0) expect_eight_bit_note(path);

    std::string asm_dir = dir.file("kernels");
    Built h = check_bit_exact(b, "narrow_hsw" + std::to_string(c), seed(23) + unsigned(c), {}, &hsw,
                              asm_dir);
    EXPECT_EQ(h.int8_kernels, 2u) << h.mod.at("kernels").dump();
    EXPECT_EQ(files_with(asm_dir, "vpmaddubsw"), 2);  // conv1 and the MatMul
    EXPECT_GE(files_with(asm_dir, "vpsraw"), 1);      // conv2: the exact sequence's widening
    // This machine's build (VNNI where it has it) equals the same reference.
    check_bit_exact(b, "narrow_host" + std::to_string(c), seed(23) + unsigned(c));
  }
}

// QDQ MatMul [M, K] x [K, N] and Gemm (transB=1, no C) on dense_int8.x86:
// u8 and s8 activations, per-tensor and per-column weight scales, K and N
// that no tile divides.
TEST(Int8Path, MatMulAndGemmBitExact) {
  std::mt19937 rng(seed(142));
  for (int c = 0; c < 6; ++c) {
    bool s8 = c % 2 == 1, gemm = c % 3 == 2, per_col = c < 3;
    int64_t M = 1 + static_cast<int64_t>(rng() % 9), K = 5 + static_cast<int64_t>(rng() % 60),
            N = 3 + static_cast<int64_t>(rng() % 40);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + (s8 ? "s8" : "u8") +
                 (gemm ? " Gemm" : " MatMul") + " M " + std::to_string(M) + " K " +
                 std::to_string(K) + " N " + std::to_string(N) +
                 (per_col ? " per-column" : " per-tensor"));
    OnnxBuilder b;
    b.input("x", {std::to_string(M), std::to_string(K)});
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    Shape wshape = gemm ? Shape{N, K} : Shape{K, N};
    std::uniform_int_distribution<int> wd(-127, 127);
    std::vector<int8_t> w(numel(wshape));
    for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
    init_raw<int8_t>(b, "w", wshape, onnx::TensorProto::INT8, w);
    int64_t nscale = per_col ? N : 1;
    Shape sdims = per_col ? Shape{N} : Shape{};
    b.init_f32("ws", sdims, uniform(static_cast<size_t>(nscale), rng, 0.002f, 0.01f));
    init_raw<int8_t>(b, "wzp", sdims, onnx::TensorProto::INT8,
                     std::vector<int8_t>(static_cast<size_t>(nscale), 0));
    auto* dq = b.node("DequantizeLinear", "wdq", {"w", "ws", "wzp"}, {"wf"});
    OnnxBuilder::attr_int(dq, "axis", gemm ? 0 : 1);
    if (gemm) {
      auto* n = b.node("Gemm", "gemm", {xf, "wf"}, {"mm"});
      OnnxBuilder::attr_int(n, "transB", 1);
    } else {
      b.node("MatMul", "matmul", {xf, "wf"}, {"mm"});
    }
    QAct qy = act(s8, output_scale(qx.scale, K), rng);
    init_qparams(b, "qy", qy);
    b.node("QuantizeLinear", "qy.q", {"mm", "qy.scale", "qy.zp"}, {"y"});
    output_any(b, "y", 2, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
    Built r = check_bit_exact(b, "mm" + std::to_string(c), seed(17) + static_cast<unsigned>(c));
    size_t dense = 0;
    for (const auto& k : r.mod.at("kernels")) dense += runs_dense_int8(k);
    EXPECT_EQ(dense, 1u) << r.mod.at("kernels").dump();
  }
}

// A ResNet basic block with a stride-2 downsample, in ORT's QDQ format: the
// three convolutions on the int8 template, the residual Add and the final
// Relu between DequantizeLinear and QuantizeLinear in float.
TEST(Int8Path, ResNetBlockEndToEnd) {
  std::mt19937 rng(seed(141));
  int64_t cin = 16, cout = 32, h = 14, w = 14;
  OnnxBuilder b;
  b.input("x", {"1", std::to_string(cin), std::to_string(h), std::to_string(w)});
  output_any(b, "y", 4);
  QAct qx = act(false, 2.f / 255.f, rng);
  std::string xf = quantize(b, "qx", "x", qx);
  QConvSpec c1{cin, cout, 3, 2, 1};
  c1.relu = true;
  std::string y1 = qdq_conv(b, "conv1", xf, qx.scale, c1, rng);
  QAct q1 = act(false, output_scale(qx.scale, cin * 9), rng, true);
  std::string y1f = quantize(b, "q1", y1, q1);
  std::string y2 = qdq_conv(b, "conv2", y1f, q1.scale, {cout, cout, 3, 1, 1}, rng);
  QAct q2 = act(false, output_scale(q1.scale, cout * 9), rng);
  std::string y2f = quantize(b, "q2", y2, q2);
  std::string yd = qdq_conv(b, "down", xf, qx.scale, {cin, cout, 1, 2, 0}, rng);
  QAct qd = act(false, output_scale(qx.scale, cin), rng);
  std::string ydf = quantize(b, "qd", yd, qd);
  b.node("Add", "add", {y2f, ydf}, {"s"});
  b.node("Relu", "relu", {"s"}, {"r"});
  QAct qy = act(false, q2.scale * 1.5f, rng, true);
  std::string yf = quantize(b, "qy", "r", qy);
  b.node("Identity", "out", {yf}, {"y"});
  Built r = check_bit_exact(b, "resnet_block", seed(9));
  EXPECT_EQ(r.qlinear_convs, 3u);
  EXPECT_EQ(r.int8_kernels, 3u) << r.mod.at("kernels").dump();
}

// ResNet's stem: conv 7x7 stride 2 (Relu) -> Q -> DQ -> MaxPool 3x3 stride 2 ->
// Q with the same parameters -> DQ -> conv. fold_qdq runs the MaxPool on the
// 8-bit values (no QuantizeLinear / DequantizeLinear kernel beside it; the
// first conv's kernel writes 8 bits, no float), byte for byte the
// interpreter's result; u8 and s8 activations, channel counts the blocks do
// not divide, odd sizes.
TEST(Int8Path, StemMaxPoolRunsOn8BitValues) {
  std::mt19937 rng(seed(147));
  for (bool s8 : {false, true}) {
    SCOPED_TRACE(s8 ? "int8" : "uint8");
    int64_t cin = 3, mid = 20, cout = 12, h = 37, w = 29;
    OnnxBuilder b;
    b.input("x", {"1", std::to_string(cin), std::to_string(h), std::to_string(w)});
    output_any(b, "y", 4);
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    QConvSpec c1{cin, mid, 7, 2, 3};
    c1.relu = true;
    std::string y1 = qdq_conv(b, "stem", xf, qx.scale, c1, rng);
    QAct q1 = act(s8, output_scale(qx.scale, cin * 49), rng, true);
    std::string y1f = quantize(b, "q1", y1, q1);
    auto* pool = b.node("MaxPool", "pool", {y1f}, {"p"});
    OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(pool, "strides", {2, 2});
    OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
    std::string pf = quantize(b, "qp", "p", q1);  // ORT: the pool keeps its input's parameters
    std::string y2 = qdq_conv(b, "conv", pf, q1.scale, {mid, cout, 3, 1, 1}, rng);
    QAct q2 = act(s8, output_scale(q1.scale, mid * 9), rng);
    b.node("Identity", "out", {quantize(b, "q2", y2, q2)}, {"y"});
    Built r = check_bit_exact(b, s8 ? "stem_s8" : "stem_u8", seed(10));
    EXPECT_EQ(r.int8_kernels, 2u) << r.mod.at("kernels").dump();
    bool pooled = false;
    for (const auto& k : r.mod.at("kernels")) {
      std::vector<std::string> ops = k.at("op_types").get<std::vector<std::string>>();
      if (std::find(ops.begin(), ops.end(), "MaxPool") == ops.end()) continue;
      pooled = true;
      // (s8: the next conv's shift to uint8, kiln.Requantize, joins the pool's kernel.)
      for (const char* q : {"QuantizeLinear", "DequantizeLinear"})
        EXPECT_EQ(std::find(ops.begin(), ops.end(), q), ops.end()) << k.dump();
    }
    EXPECT_TRUE(pooled);
    // The stem (the first int8 conv kernel) ends with its requantization: no float output.
    for (const auto& k : r.mod.at("kernels"))
      if (runs_int8_conv(k)) {
        EXPECT_EQ(k.at("op_types").back(), "kiln.Requantize") << k.dump();
        break;
      }
  }
}

// ---- depthwise (MobileNet) -----------------------------------------------------------

bool runs_depthwise_int8(const nlohmann::json& k) {
  for (const auto& t : k.at("op_types"))
    if (t.get<std::string>() == "depthwise_conv2d_NCHWc_int8.x86") return true;
  return false;
}

// An output array's elements as doubles (ORT writes the model's own dtypes).
std::vector<double> as_doubles(const runtime::NDArray& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  const runtime::DType t = a.dtype();
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == runtime::DType::u8()) v[i] = a.data_as<uint8_t>()[i];
    else if (t == runtime::DType::i8()) v[i] = a.data_as<int8_t>()[i];
    else if (t == runtime::DType::i32()) v[i] = a.data_as<int32_t>()[i];
    else if (t == runtime::DType::i64()) v[i] = static_cast<double>(a.data_as<int64_t>()[i]);
    else if (t == runtime::DType::f32()) v[i] = a.data_as<float>()[i];
    else ADD_FAILURE() << "ORT output of an unexpected dtype";
  }
  return v;
}

// ONNX Runtime's outputs for `model` on `inputs` (bench/peers/ort_run.py in
// the peers' venv: ort_peer.h), by kiln run's names (output_0, ... in the
// graph's output order), or an empty map, with the reason in *skip, without
// that venv's onnxruntime.
std::map<std::string, std::vector<double>> ort_outputs(
    const std::string& model, const std::map<std::string, graph::Initializer>& inputs,
    const ScratchDir& dir, std::string* skip) {
  if (!test::ort_missing().empty()) {
    *skip = test::ort_missing();
    return {};
  }
  std::vector<runtime::NamedArray> arrays;
  for (const auto& [name, value] : inputs) arrays.push_back({name, to_ndarray(value)});
  std::string in = dir.file("ort_in.npz"), out = dir.file("ort_out.npz");
  runtime::write_npz(in, arrays);
  std::string cmd = test::ort_command("run", model + " " + in + " " + out + " --threads 1") +
                    " >" + dir.file("ort.log") + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir.file("ort.log"));
    ADD_FAILURE() << "ORT failed on " << model << ": " << log.rdbuf();
    return {};
  }
  std::map<std::string, std::vector<double>> r;
  for (const runtime::NamedArray& a : runtime::read_npz(out)) r[a.name] = as_doubles(a.array);
  return r;
}

struct MobileNetCase {
  bool s8;
  int64_t cin, mid, k, stride, h, w;
  bool per_channel, bias;
};

// MobileNetV2's inverted residual in ORT's QDQ format: pointwise (Relu) ->
// depthwise 3x3 or 5x5, stride 1 or 2 (Relu) -> pointwise, and the residual
// Add when the stride is 1; output "y".
void mobilenet_block(OnnxBuilder& b, const MobileNetCase& k, std::mt19937& rng) {
  b.input("x", {"1", std::to_string(k.cin), std::to_string(k.h), std::to_string(k.w)});
  QAct qx = act(k.s8, 2.f / 255.f, rng);
  std::string xf = quantize(b, "qx", "x", qx);
  QConvSpec pw1{k.cin, k.mid, 1, 1, 0};
  pw1.relu = true;
  std::string y1 = qdq_conv(b, "expand", xf, qx.scale, pw1, rng);
  QAct q1 = act(k.s8, output_scale(qx.scale, k.cin), rng, true);
  std::string y1f = quantize(b, "q1", y1, q1);
  QConvSpec dw{k.mid, k.mid, k.k, k.stride, k.k / 2};
  dw.group = k.mid;
  dw.relu = true;
  dw.per_channel = k.per_channel;
  dw.bias = k.bias;
  std::string y2 = qdq_conv(b, "depthwise", y1f, q1.scale, dw, rng);
  QAct q2 = act(k.s8, output_scale(q1.scale, k.k * k.k), rng, true);
  std::string y2f = quantize(b, "q2", y2, q2);
  std::string y3 = qdq_conv(b, "project", y2f, q2.scale, {k.mid, k.cin, 1, 1, 0}, rng);
  QAct q3 = act(k.s8, output_scale(q2.scale, k.mid), rng);
  std::string y = quantize(b, "q3", y3, q3);
  if (k.stride == 1) {
    b.node("Add", "add", {y, xf}, {"s"});
    y = "s";
  }
  QAct qy = act(k.s8, q3.scale * 1.5f, rng);
  init_qparams(b, "qy", qy);
  b.node("QuantizeLinear", "qy.q", {y, "qy.scale", "qy.zp"}, {"y"});
  output_any(b, "y", 4, k.s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
}

// The MobileNet block (mobilenet_block): the depthwise QLinearConv runs on
// depthwise_conv2d_NCHWc_int8.x86, its neighbours on conv2d_NCHWc_int8.x86,
// the activations between them stay uint8 in NCHW[x]c (no layout transform
// between the three kernels when the channel blocks agree), and the output
// equals the interpreter's integer result byte for byte; ONNX Runtime on the
// same file agrees within one quantization unit (when it is installed).
TEST(Int8Path, MobileNetDepthwiseBlockBitExact) {
  std::mt19937 rng(seed(145));
  const MobileNetCase cases[] = {
      {false, 16, 48, 3, 1, 10, 10, true, true},   // blocks of 16 everywhere, residual
      {true, 8, 20, 5, 2, 11, 9, true, false},     // 5x5 stride 2, 20 channels: a padded block
      {false, 12, 36, 3, 2, 9, 12, false, false},  // per-tensor, no bias
      {true, 24, 64, 3, 1, 7, 8, false, true},     // s8, residual
  };
  int ort_checked = 0;
  std::string ort_skip;
  for (size_t c = 0; c < std::size(cases); ++c) {
    const MobileNetCase& k = cases[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": " + (k.s8 ? "s8" : "u8") + " cin " +
                 std::to_string(k.cin) + " mid " + std::to_string(k.mid) + " k " +
                 std::to_string(k.k) + " stride " + std::to_string(k.stride));
    OnnxBuilder b;
    mobilenet_block(b, k, rng);

    Built r = check_bit_exact(b, "mbv2_" + std::to_string(c), seed(23) + static_cast<unsigned>(c));
    EXPECT_EQ(r.qlinear_convs, 3u);
    size_t depthwise = 0, transforms = 0;
    for (const auto& kern : r.mod.at("kernels")) {
      depthwise += runs_depthwise_int8(kern);
      for (const auto& t : kern.at("op_types"))
        transforms += t.get<std::string>() == "kiln.LayoutTransform";
    }
    EXPECT_EQ(depthwise, 1u) << r.mod.at("kernels").dump();
    EXPECT_EQ(r.int8_kernels, 3u) << r.mod.at("kernels").dump();
    // uint8 with blocks that divide the channels: into the blocked layout
    // once at the input, out of it once at the output, nothing between the
    // three kernels. (int8 activations are shifted to uint8 between them by
    // a LayoutTransform -> Requantize(+128) -> LayoutTransform kernel, as
    // between two conv2d_NCHWc_int8 kernels.)
    if (!k.s8 && k.mid % 16 == 0) {
      EXPECT_LE(transforms, 2u) << r.mod.at("kernels").dump();
    }

    // ONNX Runtime on the same file: within one unit of the integer result.
    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    auto ort = ort_outputs(path, r.inputs, dir, &ort_skip);
    if (ort.empty()) continue;
    const graph::Initializer& want = r.want.at("y");
    const std::vector<double>& got = ort.at("output_0");  // "y", the only output
    ASSERT_EQ(got.size(), want.data.size());
    int64_t worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      int64_t v = k.s8 ? int64_t(static_cast<int8_t>(want.data[i])) : int64_t(want.data[i]);
      worst = std::max<int64_t>(worst, std::llabs(v - static_cast<int64_t>(got[i])));
    }
    // Without VNNI, ORT's u8 x s8 kernels (vpmaddubsw) saturate pairs of
    // products at 16 bits: on an AVX2 host it was 2-4 units off here, while
    // kiln's output stayed the interpreter's byte for byte.
    const codegen::Target host = codegen::Target::host();
    const int64_t ort_units = host.has_feature("avx512vnni") || host.has_feature("avxvnni") ? 1 : 8;
    EXPECT_LE(worst, ort_units) << "ORT differs by " << worst << " units";
    ++ort_checked;
  }
  if (!ort_skip.empty())
    std::printf("ONNX Runtime comparison skipped: %s\n", ort_skip.c_str());
  else
    std::printf("ONNX Runtime agreed within 1 unit on %d cases\n", ort_checked);
}

// The MobileNet block built with configs a tuner could pick (random points of
// the three int8 workloads' spaces: channel blocks that disagree between
// neighbours or divide nothing, every pad_mode): still bit-exact.
TEST(Int8Path, MobileNetBlockTunedConfigsStayBitExact) {
  std::mt19937 rng(seed(146));
  std::mt19937_64 pick(seed(147));
  const MobileNetCase cases[] = {
      {false, 12, 40, 3, 1, 9, 7, true, true},
      {true, 8, 24, 5, 2, 10, 11, false, true},
      {false, 16, 36, 3, 2, 8, 8, true, false},
      {true, 20, 48, 3, 1, 6, 9, false, false},
  };
  for (size_t c = 0; c < std::size(cases); ++c) {
    OnnxBuilder b;
    mobilenet_block(b, cases[c], rng);
    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    std::vector<std::string> keys = driver::template_workloads(frontend::import_onnx(path, {}));
    ASSERT_EQ(keys.size(), 3u);
    std::map<std::string, std::string> configs;
    size_t depthwise_keys = 0;
    for (const std::string& key : keys) {
      depthwise_keys += key.rfind("depthwise_conv2d_NCHWc_int8.x86(", 0) == 0;
      EXPECT_NE(key.find("dtype=uint8"), std::string::npos) << key;
      ops::Workload w = ops::Workload::parse(key);
      configs[key] = ops::get_template(w.template_name).space(w).random(pick).to_json();
    }
    EXPECT_EQ(depthwise_keys, 1u);
    std::string what = "case " + std::to_string(c) + "\n";
    for (const auto& [k, v] : configs) what += k + " " + v + "\n";
    SCOPED_TRACE(what);
    Built r = check_bit_exact(b, "mbv2_tuned" + std::to_string(c),
                              seed(29) + static_cast<unsigned>(c), configs);
    size_t depthwise = 0;
    for (const auto& kern : r.mod.at("kernels")) depthwise += runs_depthwise_int8(kern);
    EXPECT_EQ(depthwise, 1u) << r.mod.at("kernels").dump();
  }
}

}  // namespace
bool runs_winograd_int8(const nlohmann::json& k) {
  for (const auto& t : k.at("op_types"))
    if (t.get<std::string>() == "conv2d_winograd_NCHWc_int8.x86") return true;
  return false;
}

// Integer Winograd (ops/winograd_conv2d_int8.h): on haswell the 3x3 stride-1
// QLinearConvs with >= 16 channels and >= 32 output tiles get it as a second
// task beside the direct conv and, untuned, run on it (pmaddwd); a VNNI target
// never gets it; the 3x3 conv with 8 input channels and the stride-2 one keep
// the direct conv. Bit-exact against the interpreter untuned (u8 and s8
// activations, per-channel and per-tensor weights, the full int8 range) and
// with random configs of every task.
TEST(Int8Path, WinogradOnX86WithoutADotInstruction) {
  if (!codegen::Target::host().has_feature("avx2")) GTEST_SKIP() << "the host has no AVX2";
  const codegen::Target hsw = codegen::Target::parse("llvm -mcpu=haswell");
  const codegen::Target icx =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  std::mt19937 rng(seed(151));
  for (int c = 0; c < 2; ++c) {
    bool s8 = c == 1;
    SCOPED_TRACE(std::string("case ") + (s8 ? "s8" : "u8"));
    OnnxBuilder b;
    b.input("x", {"1", "8", "13", "17"});
    QAct qx = act(s8, 2.f / 255.f, rng);
    std::string xf = quantize(b, "qx", "x", qx);
    QConvSpec s0{8, 16, 3, 1, 1};  // 8 channels in: direct
    std::string y0 = qdq_conv(b, "conv0", xf, qx.scale, s0, rng);
    QAct q0 = act(s8, output_scale(qx.scale, 8 * 9), rng);
    std::string y0f = quantize(b, "q0", y0, q0);
    QConvSpec s1{16, 20, 3, 1, 1};  // Winograd: 7 x 9 tiles
    s1.per_channel = c == 0;
    std::string y1 = qdq_conv(b, "conv1", y0f, q0.scale, s1, rng);
    QAct q1 = act(s8, output_scale(q0.scale, 16 * 9), rng);
    std::string y1f = quantize(b, "q1", y1, q1);
    QConvSpec s2{20, 16, 3, 2, 1};  // stride 2: direct
    std::string y2 = qdq_conv(b, "conv2", y1f, q1.scale, s2, rng);
    QAct q2 = act(s8, output_scale(q1.scale, 20 * 9), rng);
    init_qparams(b, "q2", q2);
    b.node("QuantizeLinear", "q2.q", {y2, "q2.scale", "q2.zp"}, {"y"});
    output_any(b, "y", 4, s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);

    ScratchDir dir;
    std::string path = dir.file("m.onnx");
    write_bytes(path, b.bytes());
    graph::Graph g = frontend::import_onnx(path, {});
    std::vector<std::string> keys = driver::template_workloads(g, hsw.isa());
    int winograd = 0;
    for (const std::string& key : keys)
      if (key.rfind("conv2d_winograd_NCHWc_int8.x86(", 0) == 0) {
        ++winograd;
        EXPECT_NE(key.find("data=[1,16,13,17]"), std::string::npos) << key;
      }
    EXPECT_EQ(winograd, 1);
    EXPECT_EQ(keys.size(), 4u);  // three direct convs and the Winograd alternative
    for (const std::string& key : driver::template_workloads(g, icx.isa()))
      EXPECT_EQ(key.find("winograd"), std::string::npos) << "VNNI: " << key;

    std::string asm_dir = dir.file("kernels");
    Built h = check_bit_exact(b, "winograd_hsw" + std::to_string(c), seed(29) + unsigned(c), {},
                              &hsw, asm_dir);
    size_t on_winograd = 0;
    for (const auto& k : h.mod.at("kernels")) on_winograd += runs_winograd_int8(k);
    EXPECT_EQ(on_winograd, 1u) << h.mod.at("kernels").dump();
    EXPECT_EQ(h.int8_kernels, 3u) << h.mod.at("kernels").dump();  // two direct, one Winograd
    EXPECT_GE(files_with(asm_dir, "vpmaddwd"), 1);

    // Random configs of every task, the Winograd one among them.
    std::mt19937_64 pick(seed(31) + unsigned(c));
    std::map<std::string, std::string> configs;
    for (const std::string& key : keys) {
      ops::Workload w = ops::Workload::parse(key);
      configs[key] = ops::get_template(w.template_name).space(w).random(pick).to_json();
    }
    check_bit_exact(b, "winograd_cfg" + std::to_string(c), seed(37) + unsigned(c), configs, &hsw);
  }
}

}  // namespace kiln::test
