// run_graph: whole graphs against results recomputed by hand, graph outputs
// that are inputs or constants, multi-output nodes, and errors that name the
// input or node at fault.
#include "graph/interpreter.h"

#include <gtest/gtest.h>

#include "graph_builder.h"
#include "test_ops.h"

namespace kiln {
namespace {

using graph::Initializer;
using test::GraphBuilder;

class Interpreter : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_ops(); }
};

// Expects `f` to throw std::runtime_error whose message contains every part.
template <typename F>
void expect_error(F f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST_F(Interpreter, DiamondMatchesHandComputation) {
  for (int64_t n : {1, 7, 64}) {
    GraphBuilder b(n);
    std::string x = b.input("x", {n});
    std::string c = b.random_constant("c", {n});
    std::string l = b.node("KilnTestAffine", {x}, {{"a", 2.0f}, {"b", 1.0f}});
    std::string r = b.node("KilnTestAdd", {x, c});
    std::string s = b.node("KilnTestAdd", {l, r});
    std::string t = b.node("KilnTestAffine", {s}, {{"a", -0.5f}});
    b.output(t);
    b.output(l);
    auto in = b.inputs();
    auto out = graph::run_graph(b.graph(), in);
    ASSERT_EQ(out.size(), 2u);
    std::vector<float> xv = in["x"].as<float>(), cv = b.graph().initializers.at("c").as<float>();
    std::vector<float> tv = out[t].as<float>(), lv = out[l].as<float>();
    for (int64_t i = 0; i < n; ++i) {
      float li = 2 * xv[i] + 1;
      EXPECT_FLOAT_EQ(lv[i], li);
      EXPECT_FLOAT_EQ(tv[i], -0.5f * (li + (xv[i] + cv[i])));
    }
  }
}

// Registry operators end to end: Gemm -> Relu -> MatMul -> Add -> Softmax
// against plain loops in double.
TEST_F(Interpreter, MlpWithRegistryOpsMatchesPlainLoops) {
  for (int64_t m : {1, 3}) {
    const int64_t k = 5, h = 4, n = 3;
    GraphBuilder b(m + 100);
    std::string x = b.input("x", {m, k});
    std::string w1 = b.random_constant("w1", {h, k}), b1 = b.random_constant("b1", {h});
    std::string w2 = b.random_constant("w2", {h, n}), b2 = b.random_constant("b2", {n});
    std::string y = b.node("Gemm", {x, w1, b1}, {{"transB", int64_t{1}}});
    y = b.node("Relu", {y});
    y = b.node("Add", {b.node("MatMul", {y, w2}), b2});
    y = b.node("Softmax", {y}, {{"axis", int64_t{-1}}});
    b.output(y);
    auto in = b.inputs();
    auto out = graph::run_graph(b.graph(), in);
    const auto& init = b.graph().initializers;
    std::vector<float> xv = in[x].as<float>(), w1v = init.at(w1).as<float>(),
                       b1v = init.at(b1).as<float>(), w2v = init.at(w2).as<float>(),
                       b2v = init.at(b2).as<float>(), yv = out[y].as<float>();
    ASSERT_EQ(yv.size(), static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      std::vector<double> hid(h), logits(n);
      for (int64_t j = 0; j < h; ++j) {
        double acc = b1v[j];
        for (int64_t q = 0; q < k; ++q) acc += double(xv[i * k + q]) * w1v[j * k + q];
        hid[j] = std::max(acc, 0.0);
      }
      double total = 0;
      for (int64_t c = 0; c < n; ++c) {
        double acc = b2v[c];
        for (int64_t j = 0; j < h; ++j) acc += hid[j] * w2v[j * n + c];
        logits[c] = std::exp(acc);
        total += logits[c];
      }
      for (int64_t c = 0; c < n; ++c) EXPECT_NEAR(yv[i * n + c], logits[c] / total, 1e-6);
    }
  }
}

TEST_F(Interpreter, OutputsThatAreInputsOrConstantsAndMultiOutputNodes) {
  GraphBuilder b;
  std::string x = b.input("x", {6});
  std::string c = b.random_constant("c", {3});
  auto halves = b.node_n("KilnTestSplit2", {x}, 2);
  std::string y = b.node("KilnTestAdd", {halves[1], c});  // halves[0] is never read
  b.output(y);
  b.output(x);
  b.output(c);
  auto in = b.inputs();
  auto out = graph::run_graph(b.graph(), in);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[x].data, in[x].data);
  EXPECT_EQ(out[c].data, b.graph().initializers.at(c).data);
  std::vector<float> xv = in[x].as<float>(), cv = out[c].as<float>(), yv = out[y].as<float>();
  ASSERT_EQ(yv.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(yv[i], xv[3 + i] + cv[i]);
}

TEST_F(Interpreter, ValueReadByManyNodesStaysAliveUntilTheLast) {
  GraphBuilder b;
  std::string x = b.input("x", {5});
  std::string a = b.node("KilnTestAffine", {x}, {{"a", 3.0f}});
  std::string p = b.node("KilnTestAdd", {a, a});
  std::string q = b.node("KilnTestAdd", {p, a});
  std::string r = b.node("KilnTestAdd", {q, x});
  b.output(r);
  auto in = b.inputs();
  auto out = graph::run_graph(b.graph(), in);
  std::vector<float> xv = in[x].as<float>(), rv = out[r].as<float>();
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(rv[i], 9 * xv[i] + xv[i]);
}

TEST_F(Interpreter, InputErrorsNameTheInput) {
  GraphBuilder b;
  std::string x = b.input("image", {2, 3});
  b.output(b.node("KilnTestAffine", {x}));
  const graph::Graph& g = b.graph();
  expect_error([&] { graph::run_graph(g, {}); }, {"'image'", "no value"});
  auto wrong = b.inputs();
  wrong["image"] = test::make_tensor("float32", {3, 2});
  expect_error([&] { graph::run_graph(g, wrong); }, {"'image'", "[3, 2]", "[2, 3]"});
  wrong["image"] = test::make_tensor("int64", {2, 3});
  expect_error([&] { graph::run_graph(g, wrong); }, {"'image'", "int64"});
  auto extra = b.inputs();
  extra["mask"] = test::make_tensor("float32", {1});
  expect_error([&] { graph::run_graph(g, extra); }, {"'mask'", "not an input"});
}

TEST_F(Interpreter, NodeErrorsNameTheNode) {
  {
    GraphBuilder b;
    std::string x = b.input("x", {4});
    std::string y = b.node("KilnTestAffine", {x});
    graph::Graph g = b.graph();
    graph::Node bad{"KilnTestFail", "", "the_bad_one", {y}, {"z"}, {}};
    g.nodes.push_back(bad);
    g.value_info["z"] = {"float32", {4}};
    g.outputs = {"z"};
    expect_error([&] { graph::run_graph(g, b.inputs()); },
                 {"'the_bad_one'", "KilnTestFail", "always fails"});
    g.nodes.back().op_type = "NoSuchOperator";
    expect_error([&] { graph::run_graph(g, b.inputs()); }, {"'the_bad_one'", "NoSuchOperator"});
    g.nodes.back() = graph::Node{"KilnTestAffine", "", "reads_early", {"later"}, {"z"}, {}};
    expect_error([&] { graph::run_graph(g, b.inputs()); }, {"'reads_early'", "'later'"});
  }
  {  // a stale value_info (what a buggy pass would leave) is caught at its node
    GraphBuilder b;
    std::string x = b.input("x", {4});
    std::string y = b.node("KilnTestAffine", {x}, {}, "scale");
    b.output(y);
    graph::Graph g = b.graph();
    g.value_info[y] = {"float32", {2, 2}};
    expect_error([&] { graph::run_graph(g, b.inputs()); }, {"'scale'", "[4]", "[2, 2]"});
  }
  {
    GraphBuilder b;
    std::string x = b.input("x", {4});
    b.node("KilnTestAffine", {x});
    graph::Graph g = b.graph();
    g.outputs = {"nowhere"};
    expect_error([&] { graph::run_graph(g, b.inputs()); }, {"'nowhere'"});
  }
}

}  // namespace
}  // namespace kiln
