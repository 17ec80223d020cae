// Pooling in NCHW[b]c (kiln_block): the blocked evaluate equals the NCHW one
// on re-laid-out data, the compiled kernels equal evaluate for every lane
// count, and propagate_layout runs MaxPool and GlobalAveragePool between
// blocked convolutions without transforms (a ResNet stem and head).
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "graph/passes/apply_templates.h"
#include "graph/passes/propagate_layout.h"
#include "graph/passes/select_templates.h"
#include "lanes_harness.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::Attribute;
using graph::Graph;
using graph::Initializer;
using test::check_all_lanes;
using test::make_node;
using test::random_tensor;
using Ints = std::vector<int64_t>;

// NCHW [n, c, h, w] -> NCHW[b]c [n, c / b, h, w, b].
Initializer to_blocked(const Initializer& x, int64_t b) {
  const Ints& s = x.type.shape;
  Initializer y = test::make_tensor("float32", {s[0], s[1] / b, s[2], s[3], b});
  std::vector<float> in = x.as<float>(), out(in.size());
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < s[2] * s[3]; ++i)
        out[(((n * (s[1] / b) + c / b) * s[2] * s[3]) + i) * b + c % b] =
            in[(n * s[1] + c) * s[2] * s[3] + i];
  std::memcpy(y.data.data(), out.data(), y.data.size());
  return y;
}

struct PoolCase {
  const char* op;
  std::map<std::string, Attribute> attrs;
};

std::vector<PoolCase> pool_cases() {
  return {
      {"MaxPool",
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {"MaxPool",
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}},
      {"AveragePool", {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}},
      {"AveragePool",
       {{"kernel_shape", Ints{2, 3}},
        {"pads", Ints{0, 1, 1, 1}},
        {"count_include_pad", int64_t{1}}}},
      // Taps past kMaxUnrolledTaps stay loops inside the column loop.
      {"MaxPool",
       {{"kernel_shape", Ints{5, 4}},
        {"strides", Ints{1, 2}},
        {"pads", Ints{2, 1, 2, 2}},
        {"dilations", Ints{1, 2}}}},
      {"GlobalAveragePool", {}},
      {"GlobalMaxPool", {}},
  };
}

TEST(BlockedPool, EvaluateMatchesNchwAndCompiledMatchesEvaluate) {
  std::mt19937_64 rng(41);
  for (int64_t block : {8, 16})
    // {1, 64, 13, 11}: enough rows that the column loop stays nested (the
    // bounds tests unswitched per column, generic_schedule.cc); the others
    // below that, fused.
    for (const Ints& shape :
         {Ints{1, 32, 9, 9}, Ints{2, 16, 7, 5}, Ints{1, 16, 1, 1}, Ints{1, 64, 13, 11}})
      for (const PoolCase& k : pool_cases()) {
        if (shape[1] % block != 0) continue;
        if (shape[2] < 3 && std::string(k.op).find("Global") == std::string::npos) continue;
        SCOPED_TRACE(std::string(k.op) + " " + graph::shape_str(shape) + " block " +
                     std::to_string(block));
        // All negative: a max pool must not see a padded 0.
        Initializer x = random_tensor("float32", shape, rng, -3, -1);
        graph::Node plain = make_node(k.op, 1, k.attrs);
        std::map<std::string, Attribute> battrs = k.attrs;
        battrs["kiln_block"] = block;
        graph::Node blocked = make_node(k.op, 1, battrs);
        Initializer xb = to_blocked(x, block);
        Initializer want = graph::get_op(k.op).evaluate(plain, {&x})[0];
        Initializer got = graph::get_op(k.op).evaluate(blocked, {&xb})[0];
        test::expect_same(got, to_blocked(want, block), 1e-6, "blocked evaluate");
        check_all_lanes(blocked, {&xb});
      }
}

TEST(BlockedPool, RejectsAnInputThatIsNotBlocked) {
  Initializer x = test::make_tensor("float32", {1, 16, 4, 4});
  graph::Node n =
      make_node("MaxPool", 1, {{"kernel_shape", Ints{2, 2}}, {"kiln_block", int64_t{8}}});
  EXPECT_THROW(graph::get_op("MaxPool").evaluate(n, {&x}), std::exception);
}

// ResNet's stem and head: conv -> relu -> maxpool -> (conv + residual) ->
// relu -> global average pool -> flatten. Before: transforms around the
// pools; after: into the first conv and out of the global pool only.
TEST(BlockedPool, PropagateLayoutRunsPoolsBlocked) {
  test::GraphBuilder b(42);
  std::string x = b.input("x", {1, 8, 12, 12});
  std::string y = test::conv(b, "c1", x, 8, 16, 3, test::pads(1));
  y = b.node("Relu", {y}, {}, "relu");
  std::string p =
      b.node("MaxPool", {y},
             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
             "maxpool");
  std::string c2 = test::conv(b, "c2", p, 16, 16, 3, test::pads(1));
  y = b.node("Add", {c2, p}, {}, "residual");
  y = b.node("Relu", {y}, {}, "relu2");
  y = b.node("GlobalAveragePool", {y}, {}, "gap");
  b.output(b.node("Flatten", {y}, {{"axis", int64_t{1}}}, "flatten"));
  Graph applied = test::check_pass_preserves(
      b.graph(), b.inputs(),
      [](Graph& g) { graph::apply_templates(g, graph::select_templates(g), {}, test::host_isa()); },
      1e-4);
  Graph g = test::check_pass_preserves(
      applied, b.inputs(), [](Graph& h) { graph::propagate_layout(h); }, 1e-4);
  EXPECT_EQ(test::count_transforms(g), 2);
  for (const char* name : {"maxpool", "gap", "residual"}) {
    const graph::Node& n = test::node_named(g, name);
    EXPECT_EQ(g.type_of(n.inputs[0])->shape.size(), 5u) << name;
    EXPECT_EQ(g.type_of(n.outputs[0])->shape.size(), 5u) << name;
  }
  EXPECT_TRUE(test::node_named(g, "maxpool").attrs.count("kiln_block"));
}

}  // namespace
}  // namespace kiln
