// Graph passes: each run on graphs built in C++, checked for the structural
// change it promises and, through run_graph, for unchanged outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fold_batch_norm.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph/passes/simplify.h"
#include "graph/passes/verify_graph.h"
#include "graph_builder.h"
#include "test_ops.h"

namespace kiln {
namespace {

using graph::Graph;
using graph::Initializer;
using test::check_pass_preserves;
using test::count_op;
using test::GraphBuilder;
namespace passes = graph::passes;

class Passes : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_ops(); }
};

// ---- verify_graph ----------------------------------------------------------

TEST_F(Passes, VerifyGraphCatchesBrokenInvariants) {
  GraphBuilder b;
  std::string x = b.input("x", {3});
  std::string y = b.node("KilnTestAffine", {x}, {}, "first");
  std::string z = b.node("KilnTestAffine", {y}, {}, "second");
  b.output(z);
  EXPECT_NO_THROW(passes::verify_graph(b.graph()));
  auto expect_invalid = [](const Graph& g, const std::string& part) {
    try {
      passes::verify_graph(g);
      ADD_FAILURE() << "accepted a graph that should fail with: " << part;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Graph g = b.graph();
  std::swap(g.nodes[0], g.nodes[1]);
  expect_invalid(g, "'second'");
  g = b.graph();
  g.value_info.erase(y);
  expect_invalid(g, "has no value_info");
  g = b.graph();
  g.nodes[1].outputs[0] = y;
  expect_invalid(g, "defined twice");
  g = b.graph();
  g.value_info[z] = {"float32", {4}};
  EXPECT_NO_THROW(passes::verify_graph(g));  // node output types are run_graph's to check
  g.value_info[x] = {"float32", {4}};
  expect_invalid(g, "'x'");
  g = b.graph();
  g.outputs.push_back("ghost");
  expect_invalid(g, "'ghost'");
}

// ---- fold_constants ----------------------------------------------------------

TEST_F(Passes, FoldConstantsFoldsConstantChainsOnly) {
  GraphBuilder b(3);
  std::string x = b.input("x", {8});
  std::string c = b.random_constant("c", {8});
  std::string c2 = b.node("KilnTestAffine", {c}, {{"a", 3.0f}}, "c_times_3");
  std::string c3 = b.node("KilnTestAdd", {c2, c}, {}, "c_plus");
  std::string y = b.node("KilnTestAdd", {x, c3}, {}, "uses_input");
  std::string z = b.node("KilnTestAffine", {y}, {{"b", 1.0f}}, "after_input");
  b.output(z);
  b.output(c2);  // a folded value that is also a graph output keeps its name
  Graph after = check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) {
    auto stats = passes::fold_constants(g);
    EXPECT_EQ(stats.folded, 2);
  });
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].name, "uses_input");
  EXPECT_TRUE(after.initializers.count(c2));
  EXPECT_TRUE(after.initializers.count(c3));
  std::vector<float> cv = b.graph().initializers.at(c).as<float>();
  std::vector<float> folded = after.initializers.at(c3).as<float>();
  for (size_t i = 0; i < cv.size(); ++i) EXPECT_FLOAT_EQ(folded[i], 3 * cv[i] + cv[i]);
}

TEST_F(Passes, FoldConstantsMultiOutputAndOptionalInputs) {
  GraphBuilder b(4);
  std::string x = b.input("x", {3});
  std::string c = b.random_constant("c", {6});
  auto halves = b.node_n("KilnTestSplit2", {c}, 2);
  std::string y = b.node("KilnTestAdd", {x, halves[1]});
  b.output(y);
  Graph after =
      check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::fold_constants(g); });
  EXPECT_EQ(after.nodes.size(), 1u);
  EXPECT_TRUE(after.initializers.count(halves[0]));
  EXPECT_EQ(after.value_info.at(halves[1]), (graph::TensorType{"float32", {3}}));
}

TEST_F(Passes, FoldConstantsLeavesLargeBroadcastsOfSmallConstants) {
  for (int64_t times : {5, 50}) {
    GraphBuilder b(5);
    std::string c = b.random_constant("c", {10});
    std::string t = b.node("KilnTestTile", {c}, {{"times", times}}, "tile");
    std::string x = b.input("x", {10 * times});
    b.output(b.node("KilnTestAdd", {x, t}));
    passes::FoldConstantsOptions options;
    options.max_broadcast_elements = 100;
    Graph after = check_pass_preserves(b.graph(), b.inputs(), [&](Graph& g) {
      auto stats = passes::fold_constants(g, options);
      EXPECT_EQ(stats.skipped_too_large, times * 10 > 100 ? 1 : 0);
    });
    EXPECT_EQ(count_op(after, "KilnTestTile"), times * 10 > 100 ? 1 : 0) << times;
  }
}

TEST_F(Passes, FoldConstantsNamesTheNodeThatFails) {
  GraphBuilder b;
  std::string c = b.random_constant("c", {2});
  Graph g = b.graph();
  g.nodes.push_back({"KilnTestFail", "", "doomed", {c}, {"d"}, {}});
  g.value_info["d"] = {"float32", {2}};
  g.outputs = {"d"};
  try {
    passes::fold_constants(g);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'doomed'"), std::string::npos) << e.what();
  }
}

// ---- eliminate_dead_code ---------------------------------------------------

TEST_F(Passes, EliminateDeadCodeRemovesUnreachableNodesAndConstants) {
  GraphBuilder b(6);
  std::string x = b.input("x", {4});
  std::string unused_in = b.input("unused", {2});
  std::string w = b.random_constant("w", {4});
  std::string dead_w = b.random_constant("dead_w", {4});
  b.random_constant("orphan", {7});
  std::string y = b.node("KilnTestAdd", {x, w}, {}, "live_add");
  std::string d1 = b.node("KilnTestAdd", {y, dead_w}, {}, "dead_add");
  b.node("KilnTestAffine", {d1}, {}, "dead_affine");
  auto halves = b.node_n("KilnTestSplit2", {y}, 2, {}, "half_live_split");
  std::string z = b.node("KilnTestAffine", {halves[0]}, {{"a", 2.0f}}, "live_affine");
  b.output(z);
  Graph after = check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) {
    auto stats = passes::eliminate_dead_code(g);
    EXPECT_EQ(stats.nodes_removed, 2);
    EXPECT_EQ(stats.initializers_removed, 2);
  });
  std::vector<std::string> names;
  for (const auto& n : after.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"live_add", "half_live_split", "live_affine"}));
  EXPECT_EQ(after.initializers.size(), 1u);
  EXPECT_TRUE(after.initializers.count(w));
  EXPECT_FALSE(after.value_info.count(d1));
  EXPECT_FALSE(after.value_info.count("orphan"));
  EXPECT_EQ(after.inputs.size(), 2u);  // the interface stays
  (void)unused_in;
}

TEST_F(Passes, EliminateDeadCodeKeepsConstantGraphOutputs) {
  GraphBuilder b;
  std::string x = b.input("x", {2});
  std::string c = b.random_constant("c", {2});
  b.output(b.node("KilnTestAffine", {x}));
  b.output(c);
  Graph after =
      check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::eliminate_dead_code(g); });
  EXPECT_TRUE(after.initializers.count(c));
}

// ---- memory_plan -------------------------------------------------------------

// Live range of every value as [first step, last step] (externals: the whole run).
std::map<std::string, std::pair<int, int>> live_ranges(const passes::MemoryPlanRequest& r) {
  std::map<std::string, std::pair<int, int>> live;
  const int end = static_cast<int>(r.steps.size());
  for (int k = 0; k < end; ++k) {
    for (const auto& o : r.steps[k].outputs) live[o] = {k, k};
    for (const auto& i : r.steps[k].inputs) live[i].second = k;
  }
  for (const auto& e : r.external) live[e] = {-1, end};
  return live;
}

// The plan's values that share bytes while both are live, except declared aliases.
void expect_no_live_overlap(const passes::MemoryPlanRequest& r, const passes::MemoryPlan& p) {
  auto live = live_ranges(r);
  // Alias chains share storage by design: give each value its root.
  std::map<std::string, std::string> root;
  for (const auto& a : r.aliases)
    if (!r.external.count(a.output)) root[a.output] = a.input;
  auto root_of = [&](std::string v) {
    while (root.count(v)) v = root[v];
    return v;
  };
  // An alias keeps its root's storage alive: extend the root's range.
  for (const auto& [v, range] : live) {
    auto& rr = live[root_of(v)];
    rr.second = std::max(rr.second, range.second);
  }
  for (const auto& [a, ra] : live)
    for (const auto& [b, rb] : live) {
      if (a >= b || root_of(a) == root_of(b)) continue;
      const auto& sa = p.values.at(a);
      const auto& sb = p.values.at(b);
      if (sa.storage != sb.storage) continue;
      auto la = live[root_of(a)], lb = live[root_of(b)];
      bool time_overlap = !(la.second < lb.first || lb.second < la.first);
      bool byte_overlap =
          sa.offset < sb.offset + r.sizes.at(b) && sb.offset < sa.offset + r.sizes.at(a);
      EXPECT_FALSE(time_overlap && byte_overlap)
          << a << " and " << b << " share storage " << sa.storage;
    }
  for (const auto& [v, s] : p.values)
    EXPECT_LE(s.offset + r.sizes.at(v), p.storages.at(s.storage).size) << v;
  // External values own their storage: only views declared as their aliases join them.
  for (const auto& e : r.external) {
    const auto& s = p.values.at(e);
    EXPECT_TRUE(p.storages[s.storage].external) << e;
    for (const auto& [v, sv] : p.values)
      if (v != e && sv.storage == s.storage) {
        EXPECT_EQ(root_of(v), e) << v << " shares " << e;
      }
  }
}

size_t no_reuse_bytes(const passes::MemoryPlanRequest& r) {
  size_t total = 0;
  for (const auto& [v, s] : r.sizes)
    if (!r.external.count(v)) total += s;
  return total;
}

TEST_F(Passes, MemoryPlanChainReusesStorage) {
  passes::MemoryPlanRequest r;
  r.sizes["in"] = 400;
  r.sizes["w"] = 100;
  std::string prev = "in";
  for (int i = 0; i < 10; ++i) {
    std::string v = "t" + std::to_string(i);
    r.sizes[v] = 400 + 8 * (i % 3);
    r.steps.push_back({{prev, "w"}, {v}});
    prev = v;
  }
  r.steps.push_back({{prev}, {"out"}});
  r.sizes["out"] = 400;
  r.external = {"in", "w", "out"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  // A chain needs two buffers that ping-pong.
  EXPECT_LE(p.internal_bytes(), 2u * 416u);
  EXPECT_LT(p.internal_bytes(), no_reuse_bytes(r));
  EXPECT_EQ(p.total_bytes(), p.internal_bytes() + 900u);
}

TEST_F(Passes, MemoryPlanResidualDiamond) {
  // x -> a -> b -> c = add(b, x1) with x1 (skip) alive across the block, repeated.
  passes::MemoryPlanRequest r;
  r.sizes["x"] = 1000;
  std::string skip = "x";
  for (int blk = 0; blk < 4; ++blk) {
    std::string s = std::to_string(blk);
    r.steps.push_back({{skip}, {"a" + s}});
    r.steps.push_back({{"a" + s}, {"b" + s}});
    r.steps.push_back({{"b" + s, skip}, {"c" + s}});
    r.sizes["a" + s] = 500;
    r.sizes["b" + s] = 1000;
    r.sizes["c" + s] = 1000;
    skip = "c" + s;
  }
  r.steps.push_back({{skip}, {"y"}});
  r.sizes["y"] = 10;
  r.external = {"x", "y"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  EXPECT_LT(p.internal_bytes(), no_reuse_bytes(r) / 2);
  for (const auto& e : r.external) EXPECT_EQ(p.storages[p.values.at(e).storage].size, r.sizes[e]);
}

TEST_F(Passes, MemoryPlanRandomGraphsNeverOverlapLiveValues) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    passes::MemoryPlanRequest r;
    std::vector<std::string> values = {"in0", "in1", "p0"};
    r.external = {"in0", "in1", "p0"};
    std::uniform_int_distribution<size_t> size(1, 4096);
    for (auto& v : values) r.sizes[v] = size(rng);
    int steps = 1 + rng() % 30;
    for (int k = 0; k < steps; ++k) {
      passes::PlanStep s;
      int reads = 1 + rng() % 3;
      for (int i = 0; i < reads; ++i) s.inputs.push_back(values[rng() % values.size()]);
      int writes = 1 + rng() % 2;
      for (int i = 0; i < writes; ++i) {
        std::string v = "v" + std::to_string(k) + "_" + std::to_string(i);
        r.sizes[v] = size(rng);
        s.outputs.push_back(v);
        if (i == 0 && rng() % 4 == 0) {  // a reshape of the first input: same bytes
          r.sizes[v] = r.sizes[s.inputs[0]];
          r.aliases.push_back({v, s.inputs[0], 0});
        }
      }
      for (auto& v : s.outputs) values.push_back(v);
      r.steps.push_back(s);
    }
    r.external.insert(values.back());  // a graph output
    auto p = passes::plan_memory(r);
    expect_no_live_overlap(r, p);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

TEST_F(Passes, MemoryPlanAliasesShareStorageAndKeepItAlive) {
  passes::MemoryPlanRequest r;
  r.sizes = {{"x", 64}, {"a", 256}, {"a2", 256}, {"b", 256}, {"c", 256}, {"y", 64}};
  r.steps = {
      {{"x"}, {"a"}}, {{"a"}, {"a2"}}, {{"a2"}, {"b"}}, {{"b", "a2"}, {"c"}}, {{"c"}, {"y"}}};
  r.aliases = {{"a2", "a", 0}};
  r.external = {"x", "y"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  EXPECT_EQ(p.values.at("a2").storage, p.values.at("a").storage);
  EXPECT_NE(p.values.at("b").storage, p.values.at("a").storage);  // a2 is read with b
  EXPECT_NE(p.values.at("c").storage, p.values.at("a").storage);  // read in c's own step
}

TEST_F(Passes, MemoryPlanRejectsInconsistentRequests) {
  passes::MemoryPlanRequest r;
  r.sizes = {{"x", 4}, {"y", 4}};
  r.steps = {{{"x"}, {"y"}}};
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // x never produced
  r.external = {"x"};
  EXPECT_NO_THROW(passes::plan_memory(r));
  r.steps.push_back({{"x"}, {"y"}});
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // y produced twice
  r.steps.pop_back();
  r.sizes.erase("y");
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // no size
  r.sizes["y"] = 8;
  r.aliases = {{"y", "x", 0}};
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // 8 bytes do not fit in x
}

}  // namespace
}  // namespace kiln
