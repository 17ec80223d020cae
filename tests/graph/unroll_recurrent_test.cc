// unroll_recurrent: LSTM, GRU and RNN nodes become per-step MatMul, Split and
// elementwise nodes that compute what the reference LSTM / GRU computes (the
// interpreter runs the graph before and after), over directions, layouts,
// biases, initial states, peepholes and GRU's linear_before_reset. The
// reference itself is checked against PyTorch by the e2e_coverage tests.
#include "graph/passes/unroll_recurrent.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

struct Case {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = false, peepholes = false;
  int64_t linear_before_reset = 0;
  bool all_outputs = true;
  bool runtime_weights = false;                        // W, R, B and P graph inputs, not constants
  std::map<std::string, graph::Attribute> extra = {};  // activations, clip, ...
  enum Lens { kNoLens, kConstantLens, kRuntimeLens } lens = kNoLens;  // sequence_lens
};

void check(const Case& c, int seed) {
  SCOPED_TRACE(c.op + " " + c.direction + " layout " + std::to_string(c.layout) +
               (c.bias ? " B" : "") + (c.initial ? " h0" : "") + (c.peepholes ? " P" : "") +
               " lbr " + std::to_string(c.linear_before_reset) +
               (c.runtime_weights ? " run-time weights" : ""));
  const int64_t T = 5, N = 2, I = 3, H = 4, D = c.direction == "bidirectional" ? 2 : 1;
  const int64_t G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
  GraphBuilder b(seed);
  std::string x = b.input("x", c.layout ? Ints{N, T, I} : Ints{T, N, I});
  auto weight = [&](const std::string& name, const Ints& shape) {
    return c.runtime_weights ? b.input(name, shape) : b.random_constant(name, shape);
  };
  std::vector<std::string> in = {x, weight("w", {D, G * H, I}), weight("r", {D, G * H, H})};
  in.push_back(c.bias ? weight("b", {D, 2 * G * H}) : "");
  if (c.lens == Case::kConstantLens)
    in.push_back(b.constant("lens", test::tensor_of<int32_t>({N}, {3, T})));
  else if (c.lens == Case::kRuntimeLens)
    in.push_back(b.input("lens", {N}, "int32", 1, T));
  else
    in.push_back("");
  const Ints state = c.layout ? Ints{N, D, H} : Ints{D, N, H};
  in.push_back(c.initial ? b.input("h0", state) : "");
  if (c.op == "LSTM") {
    in.push_back(c.initial ? b.input("c0", state) : "");
    in.push_back(c.peepholes ? weight("p", {D, 3 * H}) : "");
  }
  std::map<std::string, graph::Attribute> attrs = {{"direction", c.direction}, {"hidden_size", H}};
  if (c.layout) attrs["layout"] = c.layout;
  if (c.op == "GRU") attrs["linear_before_reset"] = c.linear_before_reset;
  for (const auto& [k, v] : c.extra) attrs[k] = v;
  const size_t outputs = c.op == "LSTM" ? 3 : 2;
  std::vector<std::string> outs = b.node_n(c.op, in, outputs, attrs);
  for (size_t k = 0; k < outputs; ++k)
    if (c.all_outputs || k == 1) b.output(outs[k]);
  graph::Graph before = b.graph();
  graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::unroll_recurrent(h), 1);
  });
  EXPECT_EQ(test::count_op(g, c.op), 0);
  EXPECT_EQ(test::count_op(g, "MatMul"),
            D * (T + 1) + (c.op == "GRU" && !c.linear_before_reset ? D * T : 0));
}

TEST(UnrollRecurrent, Lstm) {
  int seed = 10;
  for (std::string direction : {"forward", "reverse", "bidirectional"})
    for (int64_t layout : {0, 1}) check({"LSTM", direction, layout}, ++seed);
  check({"LSTM", "bidirectional", 0, /*bias=*/false, /*initial=*/true, /*peepholes=*/true}, 30);
  check({"LSTM", "forward", 1, true, true, true}, 31);
  check({"LSTM", "reverse", 0, true, false, false, 0, /*all_outputs=*/false}, 32);
  check({"LSTM", "bidirectional", 1, true, true, true, 0, true, /*runtime_weights=*/true}, 33);
  check({"LSTM", "forward", 0, false, false, false, 0, true, true}, 34);
}

TEST(UnrollRecurrent, Gru) {
  int seed = 40;
  for (std::string direction : {"forward", "reverse", "bidirectional"})
    for (int64_t lbr : {0, 1}) check({"GRU", direction, 0, true, false, false, lbr}, ++seed);
  check({"GRU", "bidirectional", 1, false, true, false, 1}, 50);
  check({"GRU", "forward", 1, true, true, false, 0}, 51);
  for (int64_t lbr : {0, 1}) {
    check({"GRU", "bidirectional", 0, true, true, false, lbr, true, /*runtime_weights=*/true},
          52 + static_cast<int>(lbr));
    check({"GRU", "reverse", 1, false, false, false, lbr, true, true}, 54 + static_cast<int>(lbr));
  }
}

TEST(UnrollRecurrent, Rnn) {
  int seed = 70;
  for (std::string direction : {"forward", "reverse", "bidirectional"})
    for (int64_t layout : {0, 1}) check({"RNN", direction, layout}, ++seed);
  check({"RNN", "bidirectional", 1, /*bias=*/false, /*initial=*/true}, 80);
  check({"RNN", "reverse", 0, true, true, false, 0, /*all_outputs=*/false}, 81);
  check({"RNN", "bidirectional", 0, true, true, false, 0, true, /*runtime_weights=*/true}, 82);
  check({"RNN", "forward", 1, false, false, false, 0, true, true}, 83);
}

// Every activation ONNX lists, with and without alpha / beta given, LSTM's
// input_forget, and clip:
// the unrolled nodes against the reference.
TEST(UnrollRecurrent, ActivationsAndClip) {
  using Names = std::vector<std::string>;
  using Floats = std::vector<float>;
  const std::vector<std::pair<std::string, Names>> sets = {
      {"RNN", {"Relu"}},
      {"RNN", {"Affine"}},
      {"RNN", {"LeakyRelu"}},
      {"RNN", {"ThresholdedRelu"}},
      {"RNN", {"ScaledTanh"}},
      {"RNN", {"HardSigmoid"}},
      {"RNN", {"Elu"}},
      {"RNN", {"Softsign"}},
      {"RNN", {"Softplus"}},
      {"RNN", {"Sigmoid"}},
      {"GRU", {"HardSigmoid", "Softsign"}},
      {"GRU", {"sigmoid", "LeakyRelu"}},  // names are case-insensitive
      {"LSTM", {"HardSigmoid", "Elu", "ScaledTanh"}},
      {"LSTM", {"Sigmoid", "Affine", "Softplus"}},
  };
  int seed = 90;
  for (const auto& [op, names] : sets)
    for (bool params : {false, true}) {
      Case c{op, "forward", 0};
      c.extra["activations"] = names;
      if (params) {
        c.extra["activation_alpha"] = Floats{0.7f, 0.3f, 1.3f};
        c.extra["activation_beta"] = Floats{0.4f, 0.9f, -0.2f};
      }
      SCOPED_TRACE(names.front() + (params ? " alpha / beta" : ""));
      check(c, ++seed);
    }
  // Bidirectional: one list per direction, or one list for both.
  Case both{"LSTM", "bidirectional", 1};
  both.extra["activations"] = Names{"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Relu", "Softsign"};
  both.extra["activation_alpha"] = Floats{0.3f};
  check(both, 120);
  Case shared{"GRU", "bidirectional", 0, true, true};
  shared.extra["activations"] = Names{"Sigmoid", "Elu"};
  check(shared, 121);
  for (const std::string direction : {"forward", "bidirectional"}) {
    Case coupled{"LSTM", direction, 0, true, true, /*peepholes=*/true};
    coupled.extra["input_forget"] = int64_t{1};
    check(coupled, 125);
  }
  for (const std::string op : {"LSTM", "GRU", "RNN"}) {
    Case clipped{op, "bidirectional", 0, true, true, op == "LSTM"};
    clipped.extra["clip"] = 0.3f;
    check(clipped, 122);
  }
}

// Shorter sequences in the batch: constant or run-time sequence_lens.
TEST(UnrollRecurrent, SequenceLens) {
  int seed = 130;
  for (const std::string op : {"LSTM", "GRU", "RNN"})
    for (std::string direction : {"forward", "reverse", "bidirectional"})
      for (Case::Lens lens : {Case::kConstantLens, Case::kRuntimeLens}) {
        Case c{op, direction, direction == "reverse" ? 1 : 0, true, true, op == "LSTM"};
        c.lens = lens;
        check(c, ++seed);
      }
}

TEST(UnrollRecurrent, UnknownActivationNamesTheNode) {
  GraphBuilder b(61);
  std::string x = b.input("x", {3, 1, 2});
  b.output(b.node_n("RNN",
                    {x, b.random_constant("w", {1, 2, 2}), b.random_constant("r", {1, 2, 2})}, 1,
                    {{"hidden_size", int64_t{2}}}, "rnn_with_swish")[0]);
  graph::Graph g = b.graph();
  g.nodes.at(0).attrs["activations"] = std::vector<std::string>{"Swish"};
  try {
    graph::passes::unroll_recurrent(g);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rnn_with_swish"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Swish"), std::string::npos) << e.what();
  }
}

TEST(UnrollRecurrent, UnsupportedAttributesNameTheNode) {
  GraphBuilder b(60);
  std::string x = b.input("x", {3, 1, 2});
  b.output(b.node_n("LSTM",
                    {x, b.random_constant("w", {1, 8, 2}), b.random_constant("r", {1, 8, 2})}, 1,
                    {{"hidden_size", int64_t{2}}}, "lstm_sideways")[0]);
  graph::Graph g = b.graph();
  g.nodes.at(0).attrs["direction"] = std::string("sideways");  // the reference rejects it too
  try {
    graph::passes::unroll_recurrent(g);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("lstm_sideways"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sideways"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
