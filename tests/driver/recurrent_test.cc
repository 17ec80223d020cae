// LSTM, GRU and RNN end to end: unroll_recurrent's nodes, compiled, against
// the reference evaluation, over directions, layouts, optional B and
// initial_h, with weights that are constants (folded at build time) or graph
// inputs fed at run time. The RNN reference is checked against a loop here.
#include <gtest/gtest.h>

#include <cmath>

#include "driver_harness.h"
#include "graph/op_registry.h"

namespace kiln::test {
namespace {

using Ints = std::vector<int64_t>;

struct RecurrentCase {
  std::string op;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = false, runtime_weights = false;
  int64_t seq = 4, batch = 2, input = 3, hidden = 5;
  std::vector<std::string> activations = {};
  std::vector<float> alpha = {}, beta = {};
  float clip = 0;  // none
  bool input_forget = false;
  enum Lens { kNoLens, kConstantLens, kRuntimeLens } lens = kNoLens;  // sequence_lens
};

void attr_strings(onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}

std::vector<std::string> dims_of(const Ints& shape) {
  std::vector<std::string> d;
  for (int64_t v : shape) d.push_back(std::to_string(v));
  return d;
}

OnnxBuilder recurrent_model(const RecurrentCase& c, std::mt19937& rng) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, H = c.hidden;
  const int64_t G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
  OnnxBuilder b(14);
  b.input("x", dims_of(c.layout ? Ints{c.batch, c.seq, c.input} : Ints{c.seq, c.batch, c.input}));
  auto weight = [&](const std::string& name, const Ints& shape) {
    if (c.runtime_weights)
      b.input(name, dims_of(shape));
    else
      init_random(b, name, shape, rng);
    return name;
  };
  std::vector<std::string> in = {"x", weight("w", {D, G * H, c.input}), weight("r", {D, G * H, H})};
  in.push_back(c.bias ? weight("b", {D, 2 * G * H}) : "");
  if (c.lens == RecurrentCase::kConstantLens) {
    std::vector<int32_t> lens(static_cast<size_t>(c.batch), static_cast<int32_t>(c.seq));
    lens[0] = 1;
    init_raw(b, "lens", {c.batch}, onnx::TensorProto::INT32, lens);
  } else if (c.lens == RecurrentCase::kRuntimeLens) {
    b.input("lens", {std::to_string(c.batch)}, onnx::TensorProto::INT32);
  }
  in.push_back(c.lens == RecurrentCase::kNoLens ? "" : "lens");
  const Ints state = c.layout ? Ints{c.batch, D, H} : Ints{D, c.batch, H};
  if (c.initial) b.input("h0", dims_of(state));
  in.push_back(c.initial ? "h0" : "");
  std::vector<std::string> outs = {"y", "y_h"};
  if (c.op == "LSTM") outs.push_back("y_c");
  output_any(b, "y", 4);
  output_any(b, "y_h", 3);
  if (c.op == "LSTM") output_any(b, "y_c", 3);
  onnx::NodeProto* n = b.node(c.op, "rec", in, outs);
  OnnxBuilder::attr_int(n, "hidden_size", H);
  attr_string(n, "direction", c.direction);
  if (c.layout) OnnxBuilder::attr_int(n, "layout", c.layout);
  if (!c.activations.empty()) attr_strings(n, "activations", c.activations);
  if (!c.alpha.empty()) attr_floats(n, "activation_alpha", c.alpha);
  if (!c.beta.empty()) attr_floats(n, "activation_beta", c.beta);
  if (c.clip > 0) OnnxBuilder::attr_float(n, "clip", c.clip);
  if (c.input_forget) OnnxBuilder::attr_int(n, "input_forget", 1);
  return b;
}

void check_recurrent(const RecurrentCase& c, unsigned seed) {
  SCOPED_TRACE(c.op + " " + c.direction + " layout " + std::to_string(c.layout) +
               (c.bias ? " B" : "") + (c.initial ? " h0" : "") +
               (c.runtime_weights ? " run-time weights" : " constant weights") + " T " +
               std::to_string(c.seq) + " N " + std::to_string(c.batch) + " I " +
               std::to_string(c.input) + " H " + std::to_string(c.hidden));
  std::mt19937 rng(seed);
  E2EOptions opt;
  opt.seed = seed;
  opt.rel = 2e-5;
  opt.ranges["lens"] = {1, static_cast<double>(c.seq + 1)};
  check_end_to_end(recurrent_model(c, rng), "recurrent", opt);
}

void check_op(const std::string& op, unsigned seed) {
  for (bool runtime : {false, true})
    for (const std::string direction : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1}) {
        RecurrentCase c{op, direction, layout};
        c.runtime_weights = runtime;
        c.bias = layout == 0 || runtime;
        c.initial = direction != "forward";
        check_recurrent(c, ++seed);
      }
  RecurrentCase one_step{op};
  one_step.seq = 1;
  one_step.batch = 1;
  one_step.hidden = 8;
  one_step.runtime_weights = true;
  check_recurrent(one_step, ++seed);
  RecurrentCase wide{op, "bidirectional", 1, false, true, false, 6, 3, 7, 16};
  check_recurrent(wide, ++seed);
}

TEST(Recurrent, RnnCompiledMatchesReference) { check_op("RNN", 100); }
TEST(Recurrent, GruCompiledMatchesReference) { check_op("GRU", 200); }
TEST(Recurrent, LstmCompiledMatchesReference) { check_op("LSTM", 300); }

// Non-default activations (with alpha / beta), clip and input_forget, compiled.
TEST(Recurrent, ActivationsAndClipCompiledMatchReference) {
  RecurrentCase rnn{"RNN", "bidirectional"};
  rnn.activations = {"LeakyRelu", "HardSigmoid"};
  rnn.alpha = {0.2f, 0.3f};
  rnn.beta = {0.6f};
  check_recurrent(rnn, 400);
  RecurrentCase gru{"GRU", "reverse", 1};
  gru.activations = {"HardSigmoid", "Softsign"};
  gru.runtime_weights = true;
  check_recurrent(gru, 401);
  RecurrentCase lstm{"LSTM", "forward"};
  lstm.activations = {"Sigmoid", "Elu", "ScaledTanh"};
  lstm.alpha = {0.5f, 0.8f};
  lstm.beta = {1.5f};
  check_recurrent(lstm, 402);
  RecurrentCase coupled{"LSTM", "bidirectional", 1};
  coupled.input_forget = true;
  check_recurrent(coupled, 404);
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    RecurrentCase clipped{op, "bidirectional"};
    clipped.clip = 0.4f;
    check_recurrent(clipped, 403);
  }
}

// sequence_lens shorter than the sequence, as a constant or fed at run time.
TEST(Recurrent, SequenceLensCompiledMatchReference) {
  unsigned seed = 500;
  for (const std::string op : {"RNN", "GRU", "LSTM"})
    for (const std::string direction : {"forward", "reverse", "bidirectional"}) {
      RecurrentCase c{op, direction, direction == "reverse" ? 1 : 0};
      c.batch = 3;
      c.lens = direction == "forward" ? RecurrentCase::kConstantLens : RecurrentCase::kRuntimeLens;
      c.runtime_weights = direction == "bidirectional";
      check_recurrent(c, ++seed);
    }
}

graph::Initializer floats(const Ints& shape, const std::vector<float>& v) {
  graph::Initializer t{{"float32", shape}, {}};
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// The reference RNN against the ONNX formula written as a loop:
// H_t = tanh(X_t W^T + H_{t-1} R^T + Wb + Rb), for each direction.
TEST(Recurrent, RnnReferenceMatchesLoop) {
  const int64_t T = 3, N = 2, I = 2, H = 3, D = 2;
  std::mt19937 rng(7);
  const std::vector<float> x = uniform(T * N * I, rng), w = uniform(D * H * I, rng),
                           r = uniform(D * H * H, rng), b = uniform(D * 2 * H, rng),
                           h0 = uniform(D * N * H, rng);
  graph::Node n;
  n.op_type = "RNN";
  n.name = "rnn";
  n.attrs["hidden_size"] = H;
  n.attrs["direction"] = std::string("bidirectional");
  n.outputs = {"y", "y_h"};
  const graph::Initializer xt = floats({T, N, I}, x), wt = floats({D, H, I}, w),
                           rt = floats({D, H, H}, r), bt = floats({D, 2 * H}, b),
                           ht = floats({D, N, H}, h0);
  auto out = graph::get_op("RNN").evaluate(n, {&xt, &wt, &rt, &bt, nullptr, &ht});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type.shape, (Ints{T, D, N, H}));
  EXPECT_EQ(out[1].type.shape, (Ints{D, N, H}));
  const std::vector<float> y = out[0].as<float>(), yh = out[1].as<float>();
  for (int64_t d = 0; d < D; ++d)
    for (int64_t bn = 0; bn < N; ++bn) {
      std::vector<float> h(h0.begin() + (d * N + bn) * H, h0.begin() + (d * N + bn + 1) * H);
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = d == 0 ? step : T - 1 - step;
        std::vector<float> next(H);
        for (int64_t k = 0; k < H; ++k) {
          double acc = b[d * 2 * H + k] + b[d * 2 * H + H + k];
          for (int64_t i = 0; i < I; ++i) acc += x[(t * N + bn) * I + i] * w[(d * H + k) * I + i];
          for (int64_t j = 0; j < H; ++j) acc += h[j] * r[(d * H + k) * H + j];
          next[k] = static_cast<float>(std::tanh(acc));
        }
        h = next;
        for (int64_t k = 0; k < H; ++k)
          EXPECT_NEAR(y[((t * D + d) * N + bn) * H + k], h[k], 1e-6) << "t " << t << " d " << d;
      }
      for (int64_t k = 0; k < H; ++k) EXPECT_NEAR(yh[(d * N + bn) * H + k], h[k], 1e-6);
    }
}

}  // namespace
}  // namespace kiln::test
