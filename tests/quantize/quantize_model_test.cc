// The whole quantizer on a small model built here: statistics gathered
// through a real kiln build against a plain C++ reference of the model, the
// QDQ file read back with the ONNX protobuf API, and the kiln command's
// errors (exit status, message, no output file).
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "driver/build.h"
#include "driver/package_writer.h"
#include "frontend/model_outputs.h"
#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"
#include "graph/interpreter.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/simplify.h"
#include "quantize/calibration_data.h"
#include "quantize/collect.h"
#include "quantize/plan.h"
#include "quantize/quantize.h"
#include "runtime/graph_executor.h"

namespace kiln::quantize {
namespace {

namespace fs = std::filesystem;
using test::OnnxBuilder;

constexpr int kC = 2, kH = 4, kW = 4, kM = 3, kN = 5, kSamples = 6;

std::vector<float> random_vector(size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Model {
  std::vector<float> w = random_vector(kM * kC * 9, 1, 0.3f), b = random_vector(kM, 2, 0.1f),
                     B = random_vector(kW * kN, 3, 0.4f);
  // x [1, C, H, W] -> Conv 3x3 pad 1 (+b) -> c -> Relu -> r -> MatMul B [W, N] -> y.
  std::string write(const std::string& file, int64_t opset = 17) const {
    OnnxBuilder m(opset);
    m.input("x", {"1", std::to_string(kC), std::to_string(kH), std::to_string(kW)});
    m.output("y", {"1", std::to_string(kM), std::to_string(kH), std::to_string(kN)});
    m.init_f32("W", {kM, kC, 3, 3}, w);
    m.init_f32("b", {kM}, b);
    m.init_f32("B", {kW, kN}, B);
    auto* conv = m.node("Conv", "conv1", {"x", "W", "b"}, {"c"});
    OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_ints(conv, "kernel_shape", {3, 3});
    m.node("Relu", "relu1", {"c"}, {"r"});
    m.node("MatMul", "mm1", {"r", "B"}, {"y"});
    return m.write(file);
  }
  // The reference: r and y of one sample, plain loops.
  void run(const float* x, std::vector<float>* r, std::vector<float>* y) const {
    r->assign(kM * kH * kW, 0);
    for (int m = 0; m < kM; ++m)
      for (int i = 0; i < kH; ++i)
        for (int j = 0; j < kW; ++j) {
          double acc = b[m];
          for (int c = 0; c < kC; ++c)
            for (int di = -1; di <= 1; ++di)
              for (int dj = -1; dj <= 1; ++dj) {
                const int ii = i + di, jj = j + dj;
                if (ii < 0 || jj < 0 || ii >= kH || jj >= kW) continue;
                acc += static_cast<double>(x[(c * kH + ii) * kW + jj]) *
                       w[((m * kC + c) * 3 + di + 1) * 3 + dj + 1];
              }
          (*r)[(m * kH + i) * kW + j] = std::max(0.0f, static_cast<float>(acc));
        }
    y->assign(kM * kH * kN, 0);
    for (int m = 0; m < kM; ++m)
      for (int i = 0; i < kH; ++i)
        for (int n = 0; n < kN; ++n) {
          double acc = 0;
          for (int k = 0; k < kW; ++k) acc += (*r)[(m * kH + i) * kW + k] * B[k * kN + n];
          (*y)[(m * kH + i) * kN + n] = static_cast<float>(acc);
        }
  }
};

struct Work {
  fs::path dir = fs::temp_directory_path() / ("kiln_quantize_tests_" + std::to_string(::getpid()));
  Work() { fs::create_directories(dir); }
  ~Work() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string calibration(std::vector<float>* data) const {
    *data = random_vector(kSamples * kC * kH * kW, 4, 1.0f);
    runtime::NDArray a = runtime::NDArray::empty({kSamples, 1, kC, kH, kW}, runtime::DType::f32());
    std::copy(data->begin(), data->end(), a.data_as<float>());
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", std::move(a)});
    const std::string f = (dir / "calib.npz").string();
    runtime::write_npz(f, arrays);
    return f;
  }
};

TEST(QuantizeModel, StatisticsFromTheKilnBuildMatchTheReference) {
  Work work;
  Model model;
  const std::string path = model.write("stats.onnx");
  std::vector<float> data;
  const std::string calib = work.calibration(&data);
  frontend::OnnxModelSummary summary = frontend::model_summary(path);
  std::vector<CalibrationSample> samples = load_calibration(calib, summary);
  auto stats = collect_statistics(summary, {"x", "r", "y"}, samples, true);
  float rmin = 1e30f, rmax = -1e30f, ymin = 1e30f, ymax = -1e30f;
  for (int s = 0; s < kSamples; ++s) {
    std::vector<float> r, y;
    model.run(data.data() + s * kC * kH * kW, &r, &y);
    for (float v : r) rmin = std::min(rmin, v), rmax = std::max(rmax, v);
    for (float v : y) ymin = std::min(ymin, v), ymax = std::max(ymax, v);
  }
  EXPECT_EQ(stats.at("x").min(), *std::min_element(data.begin(), data.end()));
  EXPECT_EQ(stats.at("x").max(), *std::max_element(data.begin(), data.end()));
  EXPECT_NEAR(stats.at("r").min(), rmin, 1e-5);
  EXPECT_NEAR(stats.at("r").max(), rmax, 1e-4 * rmax);
  EXPECT_NEAR(stats.at("y").min(), ymin, 1e-4 * std::fabs(ymin));
  EXPECT_NEAR(stats.at("y").max(), ymax, 1e-4 * std::fabs(ymax));
  double total = 0;
  for (double h : stats.at("y").histogram()) total += h;
  EXPECT_EQ(total, kSamples * kM * kH * kN);  // pass 2 saw every value once
}

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in)) << path;
  return m;
}

const onnx::TensorProto* find_init(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

const onnx::NodeProto* producer(const onnx::ModelProto& m, const std::string& tensor) {
  for (const auto& n : m.graph().node())
    for (const auto& o : n.output())
      if (o == tensor) return &n;
  return nullptr;
}

TEST(QuantizeModel, WritesAQdqModelInOrtsFormat) {
  Work work;
  Model model;
  const std::string path = model.write("qdq.onnx");
  std::vector<float> data;
  QuantizeOptions o;
  o.calibration = work.calibration(&data);
  const std::string out = (work.dir / "model.qdq.onnx").string();
  QuantizeResult r = quantize_model(path, out, o);
  ASSERT_EQ(r.plan.nodes.size(), 2u);
  onnx::ModelProto q = read_model(out);
  EXPECT_NO_THROW(onnx::checker::check_model(q));

  // Conv reads DQ(Q(x)), DQ(W_quantized), DQ(b_quantized); writes c_prequant.
  const onnx::NodeProto* conv = nullptr;
  for (const auto& n : q.graph().node())
    if (n.op_type() == "Conv") conv = &n;
  ASSERT_NE(conv, nullptr);
  const onnx::NodeProto* dq_x = producer(q, conv->input(0));
  ASSERT_NE(dq_x, nullptr);
  EXPECT_EQ(dq_x->op_type(), "DequantizeLinear");
  EXPECT_EQ(producer(q, dq_x->input(0))->op_type(), "QuantizeLinear");
  EXPECT_EQ(producer(q, dq_x->input(0))->input(0), "x");
  const onnx::NodeProto* dq_w = producer(q, conv->input(1));
  ASSERT_EQ(dq_w->op_type(), "DequantizeLinear");
  EXPECT_EQ(dq_w->input(0), "W_quantized");
  ASSERT_EQ(dq_w->attribute_size(), 1);
  EXPECT_EQ(dq_w->attribute(0).i(), 0);  // axis
  EXPECT_EQ(producer(q, conv->input(2))->input(0), "b_quantized");
  EXPECT_EQ(conv->output(0), "c_prequant");
  // The float weights are gone; the int8 ones hold quantize_weight's values.
  EXPECT_EQ(find_init(q, "W"), nullptr);
  EXPECT_EQ(find_init(q, "B"), nullptr);
  const onnx::TensorProto* wq = find_init(q, "W_quantized");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->data_type(), onnx::TensorProto::INT8);
  frontend::WeightQuant ref = quantize_weight("W", {{kM, kC, 3, 3}, model.w}, 0);
  ASSERT_EQ(wq->raw_data().size(), ref.data.size());
  EXPECT_EQ(std::memcmp(wq->raw_data().data(), ref.data.data(), ref.data.size()), 0);
  EXPECT_EQ(find_init(q, "b_quantized")->data_type(), onnx::TensorProto::INT32);
  // MatMul B per column: axis 1.
  const onnx::NodeProto* mm = nullptr;
  for (const auto& n : q.graph().node())
    if (n.op_type() == "MatMul") mm = &n;
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(producer(q, mm->input(1))->attribute(0).i(), 1);
  // The conv's output is quantized with the Relu's range (zero point 0) and
  // the graph output y keeps its name, now DequantizeLinear's.
  const onnx::TensorProto* czp = find_init(q, "c_zero_point");
  ASSERT_NE(czp, nullptr);
  EXPECT_EQ(czp->data_type(), onnx::TensorProto::UINT8);
  EXPECT_EQ(static_cast<uint8_t>(czp->raw_data()[0]), 0);
  EXPECT_EQ(producer(q, "y")->op_type(), "DequantizeLinear");
  EXPECT_EQ(q.graph().output(0).name(), "y");
}

// A weight shared by three MatMuls and an activation read by two: one int8
// weight with one DequantizeLinear, one Q/DQ pair for x, and h (a quantized
// node's output) read through its own DQ by the next node.
TEST(QuantizeModel, SharedWeightsAndActivationsAreQuantizedOnce) {
  Work work;
  OnnxBuilder m;
  m.input("x", {"2", "4"});
  m.output("y", {"2", "4"});
  m.output("z", {"2", "4"});
  m.init_f32("B", {4, 4}, random_vector(16, 8, 0.5f));
  m.node("MatMul", "mm1", {"x", "B"}, {"h"});
  m.node("MatMul", "mm2", {"h", "B"}, {"y"});
  m.node("MatMul", "mm3", {"x", "B"}, {"z"});
  const std::string path = m.write("shared.onnx");
  runtime::NDArray a = runtime::NDArray::empty({3, 2, 4}, runtime::DType::f32());
  std::vector<float> v = random_vector(24, 9, 1.0f);
  std::copy(v.begin(), v.end(), a.data_as<float>());
  std::vector<runtime::NamedArray> arrays;
  arrays.push_back({"x", std::move(a)});
  QuantizeOptions o;
  o.calibration = (work.dir / "shared_calib.npz").string();
  runtime::write_npz(o.calibration, arrays);
  const std::string out = (work.dir / "shared.qdq.onnx").string();
  ASSERT_EQ(quantize_model(path, out, o).plan.nodes.size(), 3u);
  onnx::ModelProto q = read_model(out);
  EXPECT_NO_THROW(onnx::checker::check_model(q));
  int q_of_x = 0, dq_of_b = 0;
  for (const auto& n : q.graph().node()) {
    if (n.op_type() == "QuantizeLinear" && n.input(0) == "x") ++q_of_x;
    if (n.op_type() == "DequantizeLinear" && n.input(0) == "B_quantized") ++dq_of_b;
  }
  EXPECT_EQ(q_of_x, 1);
  EXPECT_EQ(dq_of_b, 1);
  for (const auto& n : q.graph().node())
    if (n.op_type() == "MatMul") {
      EXPECT_EQ(producer(q, n.input(0))->op_type(), "DequantizeLinear") << n.name();
      EXPECT_EQ(n.input(1), "B_dequantized") << n.name();
    }
  EXPECT_EQ(producer(q, "h")->op_type(), "DequantizeLinear");
  EXPECT_EQ(find_init(q, "B"), nullptr);
}

// The template kernels' op types of a build, in kernel order (mod.json).
std::vector<std::string> kernel_op_types(const nlohmann::json& mod) {
  std::vector<std::string> out;
  for (const auto& k : mod.at("kernels")) {
    std::string ops;
    for (const auto& t : k.at("op_types")) ops += (ops.empty() ? "" : "+") + t.get<std::string>();
    out.push_back(ops);
  }
  return out;
}

// Runs the kiln command; returns its exit status, stderr in *err.
int kiln(const std::string& args, std::string* err, const fs::path& dir);

// A Linear layer on a rank-3 activation as PyTorch exports it, MatMul ->
// Add(bias), twice (a Relu between; the second Add writes the graph output).
// kiln quantize writes ONNX Runtime's unit for it: DQ(x), DQ(w) -> MatMul ->
// Add(float bias) -> Q -> DQ, no Q between MatMul and Add. kiln's fold then
// makes each layer one QLinearMatMul with its int32 bias (one dense_int8
// kernel, no Add kernel), whose output is the QDQ model's (ONNX semantics,
// as ORT computes them: the interpreter on the unfolded graph) within one
// step of the output's scale; and kiln build --precision int8 (the
// in-process path) builds the same kernels.
TEST(QuantizeModel, LinearWithBiasIsOneIntegerKernel) {
  Work work;
  constexpr int64_t kB = 2, kS = 3, kK = 6, kHidden = 5, kOut = 4, kCalib = 8;
  OnnxBuilder m;
  m.input("x", {std::to_string(kB), std::to_string(kS), std::to_string(kK)});
  m.output("y", {std::to_string(kB), std::to_string(kS), std::to_string(kOut)});
  m.init_f32("W1", {kK, kHidden}, random_vector(kK * kHidden, 11, 0.5f));
  m.init_f32("b1", {kHidden}, random_vector(kHidden, 12, 0.5f));
  m.init_f32("W2", {kHidden, kOut}, random_vector(kHidden * kOut, 13, 0.5f));
  m.init_f32("b2", {kOut}, random_vector(kOut, 14, 0.5f));
  m.node("MatMul", "mm1", {"x", "W1"}, {"h"});
  m.node("Add", "add1", {"b1", "h"}, {"hb"});  // PyTorch writes the bias first
  m.node("Relu", "relu1", {"hb"}, {"r"});
  m.node("MatMul", "mm2", {"r", "W2"}, {"g"});
  m.node("Add", "add2", {"g", "b2"}, {"y"});
  const std::string path = m.write("linear_bias.onnx");
  runtime::NDArray a = runtime::NDArray::empty({kCalib, kB, kS, kK}, runtime::DType::f32());
  std::vector<float> v = random_vector(kCalib * kB * kS * kK, 15, 1.0f);
  std::copy(v.begin(), v.end(), a.data_as<float>());
  std::vector<runtime::NamedArray> arrays;
  arrays.push_back({"x", std::move(a)});
  QuantizeOptions o;
  o.calibration = (work.dir / "linear_calib.npz").string();
  runtime::write_npz(o.calibration, arrays);
  const std::string out = (work.dir / "linear.qdq.onnx").string();
  QuantizeResult r = quantize_model(path, out, o);
  ASSERT_EQ(r.plan.nodes.size(), 2u);
  ASSERT_TRUE(r.plan.kept_float.empty());

  onnx::ModelProto q = read_model(out);
  EXPECT_NO_THROW(onnx::checker::check_model(q));
  int matmuls = 0;
  for (const auto& n : q.graph().node()) {
    if (n.op_type() == "QuantizeLinear") {
      const onnx::NodeProto* p = producer(q, n.input(0));
      EXPECT_TRUE(p == nullptr || p->op_type() != "MatMul") << n.name() << " quantizes a MatMul";
    }
    if (n.op_type() != "MatMul") continue;
    ++matmuls;
    std::vector<const onnx::NodeProto*> readers;
    for (const auto& k : q.graph().node())
      for (const auto& in : k.input())
        if (in == n.output(0)) readers.push_back(&k);
    ASSERT_EQ(readers.size(), 1u) << n.name();
    EXPECT_EQ(readers[0]->op_type(), "Add") << n.name();
    // The Add writes X_prequant, which the Q of its output reads.
    EXPECT_NE(readers[0]->output(0).find("_prequant"), std::string::npos);
  }
  EXPECT_EQ(matmuls, 2);
  for (const char* b : {"b1", "b2"}) {  // the biases stay float32 inputs of their Adds
    ASSERT_NE(find_init(q, b), nullptr) << b;
    EXPECT_EQ(find_init(q, b)->data_type(), onnx::TensorProto::FLOAT) << b;
  }
  const onnx::NodeProto* dq_y = producer(q, "y");
  ASSERT_NE(dq_y, nullptr);
  EXPECT_EQ(dq_y->op_type(), "DequantizeLinear");
  EXPECT_EQ(producer(q, producer(q, dq_y->input(0))->input(0))->op_type(), "Add");

  // kiln's fold: two QLinearMatMuls with the int32 bias (kiln's 9th input), no Add left.
  graph::Graph g = frontend::import_onnx(out, {});
  graph::Graph folded = g;
  graph::passes::simplify(folded);
  EXPECT_EQ(graph::passes::fold_qdq(folded), 2);
  std::map<std::string, size_t> ops;
  for (const auto& n : folded.nodes) {
    ++ops[n.op_type];
    if (n.op_type == "QLinearMatMul") {
      EXPECT_EQ(n.inputs.size(), 9u) << n.name;
    }
  }
  EXPECT_EQ(ops["QLinearMatMul"], 2u);
  EXPECT_EQ(ops["Add"] + ops["MatMul"], 0u);

  // The build: two dense_int8 kernels and nothing that adds.
  driver::BuildOptions options;
  driver::BuiltModule built = driver::build(out, options);
  const std::vector<std::string> kernels = kernel_op_types(nlohmann::json::parse(built.graph_json));
  size_t dense = 0;
  for (const std::string& k : kernels) {
    EXPECT_EQ(k.find("Add"), std::string::npos) << k;
    dense += k.find("dense_int8.x86") != std::string::npos;
  }
  EXPECT_EQ(dense, 2u);

  // Its output against the QDQ model's own semantics on fresh inputs.
  const std::string pkg = (work.dir / "linear.tar").string();
  driver::write_package(built, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  graph::Initializer x;
  x.type = {"float32", {kB, kS, kK}};
  std::vector<float> xv = random_vector(kB * kS * kK, 16, 1.0f);
  x.data.resize(xv.size() * sizeof(float));
  std::memcpy(x.data.data(), xv.data(), x.data.size());
  runtime::NDArray xa = runtime::NDArray::empty(x.type.shape, runtime::DType::f32());
  std::memcpy(xa.data(), x.data.data(), x.data.size());
  ex.set_input("x", std::move(xa));
  ex.run();
  const std::vector<float> want = graph::run_graph(g, {{"x", x}}).at("y").as<float>();
  const runtime::NDArray got = ex.output(0);
  ASSERT_EQ(static_cast<size_t>(got.nbytes()), want.size() * sizeof(float));
  const float y_scale = r.plan.activations.at("y").scale;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got.data_as<float>()[i]) - want[i]));
  EXPECT_LE(worst, 1.0001 * y_scale) << "kiln's int8 output vs the QDQ model's, scale " << y_scale;

  // kiln build --precision int8 makes the same decision: the same kernels.
  const std::string tar = (work.dir / "linear_int8.tar").string();
  std::string err;
  ASSERT_EQ(
      kiln("build " + path + " -o " + tar + " --precision int8 --calibration " + o.calibration,
           &err, work.dir),
      0)
      << err;
  const std::string mod = (work.dir / "linear_int8_mod.json").string();
  ASSERT_EQ(std::system(("tar -xOf " + tar + " mod.json > " + mod).c_str()), 0);
  std::ifstream mod_in(mod);
  EXPECT_EQ(kernel_op_types(nlohmann::json::parse(mod_in)), kernels);
}

// Issue 65 #3: kl on constant calibration data (all 0.5) calibrated x to [0, 0.0625], clipping
// every sample, and said nothing. It falls back to max calibration with a warning naming x.
TEST(QuantizeModel, ConstantCalibrationDataFallsBackToMaxWithAWarning) {
  Work work;
  Model model;
  const std::string path = model.write("const.onnx");
  runtime::NDArray a = runtime::NDArray::empty({kSamples, 1, kC, kH, kW}, runtime::DType::f32());
  std::fill(a.data_as<float>(), a.data_as<float>() + a.numel(), 0.5f);
  std::vector<runtime::NamedArray> arrays;
  arrays.push_back({"x", std::move(a)});
  QuantizeOptions o;
  o.calibration = (work.dir / "const.npz").string();
  runtime::write_npz(o.calibration, arrays);
  o.method = CalibrationMethod::kKl;
  QuantizeResult r = plan_quantization(path, o);
  ASSERT_TRUE(r.plan.activations.count("x"));
  EXPECT_EQ(r.plan.activations.at("x").max, 0.5f);
  bool named = false;
  for (const std::string& w : r.warnings)
    named = named || w.rfind("tensor 'x': every value is 0.5", 0) == 0;
  EXPECT_TRUE(named) << ::testing::PrintToString(r.warnings);

  // The command says so on stderr and still writes the model.
  const std::string out = (work.dir / "const.qdq.onnx").string(),
                    log = (work.dir / "const.err").string();
  const int rc =
      std::system((std::string(KILN_BINARY) + " quantize " + path + " -o " + out +
                   " --calibration " + o.calibration + " --calibrate kl >/dev/null 2>" + log)
                      .c_str());
  EXPECT_EQ(rc, 0);
  std::ifstream in(log);
  std::stringstream err;
  err << in.rdbuf();
  EXPECT_NE(err.str().find("kiln quantize: warning: tensor 'x': every value is 0.5"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("falls back to max calibration, [0.5, 0.5]"), std::string::npos)
      << err.str();
  EXPECT_TRUE(fs::exists(out));
}

// Issue 65 #15: an opset-99 model was quantized into a file the build then refused, the error
// naming a deleted temporary file. The build's opset check runs first, naming the model.
TEST(QuantizeModel, UnsupportedOpsetIsRefusedUpFront) {
  Work work;
  Model model;
  const std::string path = model.write("new.onnx", 99);
  std::vector<float> data;
  QuantizeOptions o;
  o.calibration = work.calibration(&data);
  const std::string out = (work.dir / "new.qdq.onnx").string();
  try {
    quantize_model(path, out, o);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": opset 99 is not supported (kiln accepts "
                                                 "opsets 1 to 18",
                                          0),
              0u)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("/tmp/kiln-"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(QuantizeModel, OldOpsetIsRefusedAndNothingIsWritten) {
  Work work;
  Model model;
  const std::string path = model.write("old.onnx", 12);
  std::vector<float> data;
  QuantizeOptions o;
  o.calibration = work.calibration(&data);
  const std::string out = (work.dir / "old.qdq.onnx").string();
  try {
    quantize_model(path, out, o);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("old.onnx: the model imports opset 12"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(work.dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// Runs the kiln command; returns its exit status, stderr in *err.
int kiln(const std::string& args, std::string* err, const fs::path& dir) {
  const std::string log = (dir / "stderr.txt").string();
  int rc = std::system((std::string(KILN_BINARY) + " " + args + " >/dev/null 2>" + log).c_str());
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  *err = s.str();
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(QuantizeModel, CommandErrorsLeaveTheOutputAlone) {
  Work work;
  Model model;
  const std::string path = model.write("cli.onnx");
  std::vector<float> data;
  const std::string calib = work.calibration(&data);
  const std::string out = (work.dir / "out.onnx").string();
  std::string err;
  // A good run first.
  ASSERT_EQ(kiln("quantize " + path + " -o " + out + " --calibration " + calib +
                     " --calibrate percentile",
                 &err, work.dir),
            0)
      << err;
  const auto size = fs::file_size(out);
  // Then failures: the existing output stays as it was.
  EXPECT_EQ(
      kiln("quantize " + path + " -o " + out + " --calibration " + calib + " --keep-float relu_1",
           &err, work.dir),
      1);
  EXPECT_NE(err.find("has no node 'relu_1' (nearest: relu1"), std::string::npos) << err;
  EXPECT_EQ(kiln("quantize " + path + " -o " + out + " --calibration " + path, &err, work.dir), 1);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_EQ(kiln("quantize " + path + " -o " + out + " --calibration " + calib + " --calibrate l2",
                 &err, work.dir),
            1);
  EXPECT_NE(err.find("valid: max, percentile, kl"), std::string::npos) << err;
  // A QDQ model is not quantized again.
  EXPECT_EQ(kiln("quantize " + out + " -o " + (work.dir / "twice.onnx").string() +
                     " --calibration " + calib,
                 &err, work.dir),
            1);
  EXPECT_NE(err.find("is already quantized (node "), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(work.dir / "twice.onnx"));
  EXPECT_EQ(fs::file_size(out), size);
  // kiln build --precision: int8 builds or says that QDQ import is missing;
  // bf16 for a target without avx512bf16 and unknown precisions are refused.
  const std::string tar = (work.dir / "int8.tar").string();
  int rc = kiln("build " + path + " -o " + tar + " --precision int8 --calibration " + calib, &err,
                work.dir);
  if (rc != 0) {
    EXPECT_NE(err.find("kiln cannot import QDQ models yet"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(tar));
  } else {
    EXPECT_TRUE(fs::exists(tar));
  }
  EXPECT_EQ(kiln("build " + path + " -o " + tar + " --precision bf16 --target 'llvm -mcpu=haswell'",
                 &err, work.dir),
            1);
  EXPECT_NE(err.find("--precision bf16 needs avx512bf16"), std::string::npos) << err;
  EXPECT_EQ(kiln("build " + path + " -o " + tar + " --precision fp8", &err, work.dir), 1);
  EXPECT_NE(err.find("valid: fp32, int8, bf16"), std::string::npos) << err;
  EXPECT_EQ(kiln("build " + path + " -o " + tar + " --precision int8", &err, work.dir), 1);
  EXPECT_NE(err.find("--precision int8 needs --calibration"), std::string::npos) << err;
}

// Issue 65 #15: options that would be ignored are refused. --percentile without --calibrate
// percentile was dropped silently, and --precision bf16 on a QDQ model built int8 kernels.
TEST(QuantizeModel, OptionsThatWouldBeIgnoredAreRefused) {
  Work work;
  Model model;
  const std::string path = model.write("opts.onnx");
  std::vector<float> data;
  const std::string calib = work.calibration(&data);
  const std::string out = (work.dir / "opts.qdq.onnx").string();
  std::string err;
  for (const std::string& method : {std::string(""), std::string(" --calibrate kl")}) {
    EXPECT_EQ(kiln("quantize " + path + " -o " + out + " --calibration " + calib +
                       " --percentile 99" + method,
                   &err, work.dir),
              1);
    EXPECT_NE(err.find("--percentile is for --calibrate percentile; the calibration method is " +
                       std::string(method.empty() ? "max" : "kl")),
              std::string::npos)
        << err;
    EXPECT_FALSE(fs::exists(out));
  }
  const std::string tar = (work.dir / "opts.tar").string();
  EXPECT_EQ(kiln("build " + path + " -o " + tar + " --precision int8 --calibration " + calib +
                     " --percentile 99",
                 &err, work.dir),
            1);
  EXPECT_NE(err.find("--percentile is for --calibrate percentile"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tar));
  // With the method it applies to, it is used.
  ASSERT_EQ(kiln("quantize " + path + " -o " + out + " --calibration " + calib +
                     " --percentile 99 --calibrate percentile",
                 &err, work.dir),
            0)
      << err;
  // The QDQ model with --precision bf16 (a target that has avx512bf16, so that the check of
  // the target passes): refused, naming the file and a quantized node.
  EXPECT_EQ(
      kiln("build " + out + " -o " + tar + " --precision bf16 --target 'llvm -mcpu=sapphirerapids'",
           &err, work.dir),
      1);
  EXPECT_NE(err.find(out + ": --precision bf16 does not apply to a quantized model (node '"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("QDQ models build as int8"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tar));
}

}  // namespace
}  // namespace kiln::quantize
