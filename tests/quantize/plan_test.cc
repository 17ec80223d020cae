// Quantization decisions (src/quantize/plan.h): the arithmetic against a
// plain reference of ONNX's QuantizeLinear, candidate selection, --keep-float.
#include "quantize/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln::quantize {
namespace {

// ONNX QuantizeLinear, written out: saturate(round_half_even(x / s) + zp).
int reference_q(float x, float s, int zp, int lo, int hi) {
  double v = static_cast<double>(x) / s;
  double r = std::floor(v);
  double frac = v - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  return static_cast<int>(std::min<double>(hi, std::max<double>(lo, r + zp)));
}

TEST(Plan, ActivationParametersContainZero) {
  frontend::ActivationQuant a = activation_quant({-1.0f, 3.0f});
  EXPECT_FLOAT_EQ(a.scale, 4.0f / 255);
  EXPECT_EQ(a.zero_point, 64);  // round(1 / (4/255)) = round(63.75)
  // 0 maps exactly to the zero point, so dequantizes to 0.
  EXPECT_EQ(reference_q(0.0f, a.scale, a.zero_point, 0, 255), a.zero_point);

  frontend::ActivationQuant pos = activation_quant({2.0f, 5.0f});  // widened to [0, 5]
  EXPECT_FLOAT_EQ(pos.scale, 5.0f / 255);
  EXPECT_EQ(pos.zero_point, 0);
  frontend::ActivationQuant neg = activation_quant({-5.0f, -1.0f});  // widened to [-5, 0]
  EXPECT_FLOAT_EQ(neg.scale, 5.0f / 255);
  EXPECT_EQ(neg.zero_point, 255);
  frontend::ActivationQuant zero = activation_quant({0.0f, 0.0f});
  EXPECT_EQ(zero.scale, 1.0f);
  EXPECT_EQ(zero.zero_point, 0);
}

TEST(Plan, ConvWeightsPerOutputChannelOnAxis0) {
  // [2, 1, 2, 2]: channel 0 up to 2.54, channel 1 all zero.
  frontend::FloatInitializer w{{2, 1, 2, 2}, {2.54f, -1.27f, 0.01f, 0.03f, 0, 0, 0, 0}};
  frontend::WeightQuant q = quantize_weight("W", w, 0);
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_FLOAT_EQ(q.scales[0], 2.54f / 127);
  EXPECT_FLOAT_EQ(q.scales[1], 1.0f / 127);  // all-zero channel
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(q.data[i], reference_q(w.data[i], q.scales[i / 4], 0, -127, 127)) << i;
  EXPECT_EQ(q.data[0], 127);
  EXPECT_EQ(q.data[1], -64);  // -63.5 rounds half to even
  EXPECT_EQ(q.axis, 0);
  EXPECT_EQ(q.shape, w.shape);
}

// --reduce-range: 7-bit weights, [-64, 64] (ONNX Runtime's symmetric reduced range),
// scale max|w| / 64 per channel; random weights against the plain formula, and every
// channel's largest |w| lands on +-64.
TEST(Plan, ReducedRangeWeightsWithin64) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  frontend::FloatInitializer w{{4, 3, 3, 3}, std::vector<float>(108)};
  for (float& v : w.data) v = d(rng);
  w.data[27] = -5.0f;                              // channel 1's extreme is negative
  for (size_t i = 54; i < 81; ++i) w.data[i] = 0;  // channel 2 all zero
  frontend::WeightQuant q = quantize_weight("W", w, 0, kReducedWeightMax);
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_FLOAT_EQ(q.scales[1], 5.0f / 64);
  EXPECT_FLOAT_EQ(q.scales[2], 1.0f / 64);  // all-zero channel
  for (size_t i = 0; i < w.data.size(); ++i) {
    EXPECT_EQ(q.data[i], reference_q(w.data[i], q.scales[i / 27], 0, -64, 64)) << i;
    EXPECT_LE(std::abs(int(q.data[i])), 64) << i;
  }
  EXPECT_EQ(q.data[27], -64);
  for (int c : {0, 1, 3}) {
    int top = 0;
    for (size_t i = size_t(c) * 27; i < size_t(c + 1) * 27; ++i)
      top = std::max(top, std::abs(int(q.data[i])));
    EXPECT_EQ(top, 64) << "channel " << c;
  }
  EXPECT_THROW(quantize_weight("W", w, 0, 128), std::invalid_argument);
}

TEST(Plan, MatMulWeightsPerColumnOnAxis1) {
  // B [K=3, N=2]: column 0 max 3, column 1 max 0.5.
  frontend::FloatInitializer w{{3, 2}, {1.0f, 0.5f, -3.0f, 0.25f, 2.0f, -0.1f}};
  frontend::WeightQuant q = quantize_weight("B", w, 1);
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_FLOAT_EQ(q.scales[0], 3.0f / 127);
  EXPECT_FLOAT_EQ(q.scales[1], 0.5f / 127);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(q.data[i], reference_q(w.data[i], q.scales[i % 2], 0, -127, 127)) << i;
}

TEST(Plan, BiasAtInputTimesWeightScaleSaturating) {
  frontend::FloatInitializer b{{3}, {0.5f, -0.25f, 1e9f}};
  frontend::BiasQuant q = quantize_bias("b", b, 0.02f, {0.01f, 0.004f, 0.001f});
  EXPECT_FLOAT_EQ(q.scales[0], 0.02f * 0.01f);
  EXPECT_EQ(q.data[0], static_cast<int32_t>(std::nearbyint(0.5 / (0.02f * 0.01f))));
  EXPECT_EQ(q.data[1], static_cast<int32_t>(std::nearbyint(-0.25 / (0.02f * 0.004f))));
  EXPECT_EQ(q.data[2], 2147483647);
}

// Conv(x, W, b) -> Relu -> MatMul(., B) -> y; plus a MatMul of two activations.
frontend::OnnxModelSummary small_model() {
  frontend::OnnxModelSummary m;
  m.path = "small.onnx";
  m.inputs = {{"x", "float32", {1, 1, 4, 4}}};
  m.outputs = {"y", "z"};
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out) {
    frontend::OnnxNodeSummary n;
    n.name = name;
    n.label = name.empty() ? op + "#" + std::to_string(m.nodes.size()) : name;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    m.nodes.push_back(n);
  };
  node("conv1", "Conv", {"x", "W", "b"}, {"c"});
  node("relu1", "Relu", {"c"}, {"r"});
  node("flat", "Flatten", {"r"}, {"f"});
  node("", "MatMul", {"f", "B"}, {"y"});
  node("mm2", "MatMul", {"f", "f2"}, {"z"});
  m.float_initializers["W"] = {{2, 1, 1, 1}, {0.5f, -1.0f}};
  m.float_initializers["b"] = {{2}, {0.1f, 0.2f}};
  m.float_initializers["B"] = {{32, 3}, std::vector<float>(96, 0.25f)};
  for (const auto& [k, v] : m.float_initializers) m.initializers.insert(k);
  return m;
}

TEST(Plan, CandidatesAndWhatCalibrationObserves) {
  frontend::OnnxModelSummary m = small_model();
  std::vector<Candidate> c = find_candidates(m, {});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c[0].why_not.empty());
  EXPECT_EQ(c[0].output_range, "r");  // Conv -> Relu: the Relu's range quantizes c
  EXPECT_EQ(c[0].weight_axis, 0);
  EXPECT_EQ(c[1].weight_axis, 1);
  EXPECT_EQ(c[1].output_range, "y");
  EXPECT_NE(c[2].why_not.find("'f2' is not a float32 initializer"), std::string::npos);
  EXPECT_EQ(observed_tensors(c), (std::vector<std::string>{"x", "r", "f", "y"}));

  std::map<std::string, Range> ranges = {
      {"x", {-1, 1}}, {"r", {0, 2}}, {"f", {0, 2}}, {"y", {-4, 4}}};
  frontend::QuantPlan plan = make_plan(m, c, ranges);
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_EQ(plan.nodes[1].label, "MatMul#3");
  EXPECT_FLOAT_EQ(plan.activations.at("c").scale, 2.0f / 255);  // from r
  EXPECT_EQ(plan.activations.at("c").zero_point, 0);
  ASSERT_TRUE(plan.nodes[0].bias.has_value());
  EXPECT_FLOAT_EQ(plan.nodes[0].bias->scales[1],
                  plan.activations.at("x").scale * plan.nodes[0].weight->scales[1]);
  EXPECT_EQ(plan.kept_float.count("mm2"), 1u);
}

// --quantize-also MatMul: a MatMul of two activations (mm2: f x f2) gets both
// inputs quantized and no weight; a MatMul with a weight stays as it was.
TEST(Plan, ActivationMatMulOnRequest) {
  frontend::OnnxModelSummary m = small_model();
  std::vector<Candidate> c = find_candidates(m, {}, {"MatMul"});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].weight, "B");
  EXPECT_TRUE(c[2].why_not.empty()) << c[2].why_not;
  EXPECT_EQ(c[2].activations, (std::vector<std::string>{"f", "f2"}));
  EXPECT_TRUE(c[2].weight.empty());
  std::map<std::string, Range> ranges;
  for (const std::string& t : observed_tensors(c)) ranges[t] = {-1, 1};
  frontend::QuantPlan plan = make_plan(m, c, ranges);
  ASSERT_EQ(plan.nodes.size(), 3u);
  EXPECT_EQ(plan.nodes[2].label, "mm2");
  EXPECT_FALSE(plan.nodes[2].weight.has_value());
  EXPECT_EQ(plan.activations.count("f2"), 1u);
  EXPECT_EQ(plan.kept_float.count("mm2"), 0u);
}

TEST(Plan, KeepFloatByNameAndByLabel) {
  frontend::OnnxModelSummary m = small_model();
  std::vector<Candidate> c = find_candidates(m, {"conv1", "MatMul#3"});
  EXPECT_EQ(c[0].why_not, "--keep-float");
  EXPECT_EQ(c[1].why_not, "--keep-float");
  EXPECT_TRUE(observed_tensors(c).empty());
}

TEST(Plan, UnknownKeepFloatNameListsNearMatches) {
  frontend::OnnxModelSummary m = small_model();
  try {
    find_candidates(m, {"conv_1"});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("small.onnx has no node 'conv_1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nearest: conv1"), std::string::npos) << msg;
  }
}

TEST(Plan, AddAndPoolingOnRequest) {
  frontend::OnnxModelSummary m = small_model();
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out) {
    frontend::OnnxNodeSummary n;
    n.name = n.label = name;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    m.nodes.push_back(n);
  };
  node("add1", "Add", {"y", "z"}, {"s"});
  node("relu2", "Relu", {"s"}, {"t"});
  node("pool", "MaxPool", {"r"}, {"p"});
  node("add_const", "Add", {"p", "b"}, {"q"});  // b is an initializer
  m.outputs = {"t", "q"};
  // By default none of them is a candidate.
  EXPECT_EQ(find_candidates(m, {}).size(), 3u);
  std::vector<Candidate> c = find_candidates(m, {}, {"Add", "MaxPool"});
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[3].activations, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(c[3].output_range, "t");  // Add -> Relu
  EXPECT_TRUE(c[3].weight.empty());
  EXPECT_TRUE(c[4].why_not.empty());
  EXPECT_EQ(c[4].activations, (std::vector<std::string>{"r"}));
  EXPECT_EQ(c[5].why_not, "input 'b' is a constant");
  std::map<std::string, Range> ranges;
  for (const std::string& t : observed_tensors(c)) ranges[t] = {-1, 1};
  frontend::QuantPlan plan = make_plan(m, c, ranges);
  ASSERT_EQ(plan.nodes.size(), 4u);
  EXPECT_FALSE(plan.nodes[2].weight.has_value());
  EXPECT_EQ(plan.nodes[2].label, "add1");
  try {
    find_candidates(m, {}, {"Sub"});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(Add, AveragePool, GlobalAveragePool, MaxPool, MatMul)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Plan, GemmFormsAndBiasShape) {
  frontend::OnnxModelSummary m;
  m.path = "g.onnx";
  frontend::OnnxNodeSummary g;
  g.name = g.label = "fc";
  g.op_type = "Gemm";
  g.inputs = {"a", "Wt", "c"};
  g.outputs = {"o"};
  g.int_attrs["transB"] = 1;
  m.nodes.push_back(g);
  m.float_initializers["Wt"] = {{4, 3}, std::vector<float>(12, 1.0f)};  // [N, K]
  m.float_initializers["c"] = {{4}, std::vector<float>(4, 0.0f)};
  std::vector<Candidate> c = find_candidates(m, {});
  EXPECT_TRUE(c[0].why_not.empty()) << c[0].why_not;
  EXPECT_EQ(c[0].weight_axis, 0);
  m.nodes[0].float_attrs["alpha"] = 2.0f;
  EXPECT_EQ(find_candidates(m, {})[0].why_not, "alpha or beta is not 1");
  m.nodes[0].float_attrs.clear();
  m.float_initializers["c"] = {{1, 4}, std::vector<float>(4, 0.0f)};  // a 2-D C
  EXPECT_NE(find_candidates(m, {})[0].why_not.find("bias 'c'"), std::string::npos);
}

// A Linear layer as exporters write it for a rank-3 activation: MatMul ->
// Add(bias [N], either operand order) [-> Relu]. The MatMul is quantized with
// the Add as one unit: the Add's output (range: the Relu's) is the one
// quantized, the bias stays float (no int32 bias in the plan), and the Add is
// no candidate of its own, even with --quantize-also Add.
TEST(Plan, MatMulWithBiasAddIsOneUnit) {
  frontend::OnnxModelSummary m;
  m.path = "linear.onnx";
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out) {
    frontend::OnnxNodeSummary n;
    n.name = n.label = name;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    m.nodes.push_back(n);
  };
  node("mm1", "MatMul", {"x", "W1"}, {"h"});
  node("add1", "Add", {"b1", "h"}, {"hb"});  // PyTorch writes the bias first
  node("relu1", "Relu", {"hb"}, {"r"});
  node("mm2", "MatMul", {"r", "W2"}, {"g"});
  node("add2", "Add", {"g", "b2"}, {"y"});  // the graph output
  m.outputs = {"y"};
  m.float_initializers["W1"] = {{4, 3}, std::vector<float>(12, 0.5f)};
  m.float_initializers["b1"] = {{3}, {0.1f, -0.2f, 0.3f}};
  m.float_initializers["W2"] = {{3, 2}, std::vector<float>(6, -0.25f)};
  m.float_initializers["b2"] = {{1, 1, 2}, {0.5f, 0.25f}};  // [1, 1, N]: still one per column
  for (const auto& [k, v] : m.float_initializers) m.initializers.insert(k);

  for (const std::vector<std::string>& also :
       {std::vector<std::string>{}, std::vector<std::string>{"Add"}}) {
    SCOPED_TRACE(also.empty() ? "default" : "--quantize-also Add");
    std::vector<Candidate> c = find_candidates(m, {}, also);
    ASSERT_EQ(c.size(), 2u);  // the two MatMuls; neither Add
    EXPECT_EQ(c[0].bias_add, std::optional<size_t>(1));
    EXPECT_EQ(c[0].output, "hb");
    EXPECT_EQ(c[0].output_range, "r");
    EXPECT_TRUE(c[0].bias.empty());
    EXPECT_EQ(c[1].bias_add, std::optional<size_t>(4));
    EXPECT_EQ(c[1].output, "y");
    EXPECT_EQ(c[1].output_range, "y");
    // h and g (the MatMuls' own outputs) are not observed: nothing quantizes them.
    EXPECT_EQ(observed_tensors(c), (std::vector<std::string>{"x", "r", "y"}));
    std::map<std::string, Range> ranges = {{"x", {-1, 1}}, {"r", {0, 3}}, {"y", {-2, 2}}};
    frontend::QuantPlan plan = make_plan(m, c, ranges);
    ASSERT_EQ(plan.nodes.size(), 2u);
    EXPECT_EQ(plan.nodes[0].output, "hb");
    EXPECT_EQ(plan.nodes[0].bias_add, std::optional<size_t>(1));
    EXPECT_FALSE(plan.nodes[0].bias.has_value());
    EXPECT_FLOAT_EQ(plan.activations.at("hb").scale, 3.0f / 255);  // from r
    EXPECT_EQ(plan.activations.count("h"), 0u);
    EXPECT_TRUE(plan.kept_float.empty());
  }

  // Not a bias: a constant of [M, N] values, a second reader of the MatMul's
  // output, an Add the user keeps in float32. Then the MatMul's own output is
  // quantized, as before.
  frontend::OnnxModelSummary full = m;
  full.float_initializers["b1"] = {{2, 3}, std::vector<float>(6, 0.1f)};
  EXPECT_FALSE(find_candidates(full, {})[0].bias_add.has_value());
  frontend::OnnxModelSummary shared = m;
  shared.outputs.push_back("h");
  EXPECT_FALSE(find_candidates(shared, {})[0].bias_add.has_value());
  std::vector<Candidate> kept = find_candidates(m, {"add1"});
  EXPECT_FALSE(kept[0].bias_add.has_value());
  EXPECT_EQ(kept[0].output, "h");
  EXPECT_EQ(kept[0].output_range, "h");
  EXPECT_TRUE(kept[1].bias_add.has_value());
}

}  // namespace
}  // namespace kiln::quantize
