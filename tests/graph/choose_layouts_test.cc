// The graph-level layout choice (graph/passes/choose_layouts.h): the solver
// against brute force on random small problems (chains, residual joins,
// random class graphs), its greedy fallback, and the problem it builds from
// a ResNet-style graph.
#include "graph/passes/choose_layouts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "graph/passes/select_templates.h"
#include "graph_builder.h"

namespace kiln::graph {
namespace {

// A transform's time: proportional to the elements moved, larger between two
// blocked layouts than to or from NCHW, and not symmetric in from/to, to
// catch a swapped argument.
double fake_transform(const std::vector<int64_t>& shape, int64_t from, int64_t to) {
  double elems = 1;
  for (int64_t d : shape) elems *= static_cast<double>(d);
  return elems * 1e-6 * (from && to ? 1.5 : 1.0) + (to == 0 ? 0.01 : 0.0) + 0.001 * from;
}

// Whether the writers of every free class whose writers share some block
// agree (the solver's rule: such a join is never NCHW).
bool joins_agree(const LayoutProblem& p, const std::vector<size_t>& choice) {
  std::map<int, std::set<int64_t>> shared;  // class -> blocks all its writers offer
  std::map<int, std::set<int64_t>> chosen;
  for (size_t i = 0; i < p.convs.size(); ++i) {
    const LayoutConv& c = p.convs[i];
    if (p.fixed[static_cast<size_t>(c.out_class)]) continue;
    std::set<int64_t> offered;
    for (const LayoutOption& o : c.options) offered.insert(o.out_block);
    auto it = shared.find(c.out_class);
    if (it == shared.end()) {
      shared[c.out_class] = offered;
    } else {
      std::set<int64_t> both;
      for (int64_t b : it->second)
        if (offered.count(b)) both.insert(b);
      it->second = both;
    }
    chosen[c.out_class].insert(c.options[choice[i]].out_block);
  }
  for (const auto& [k, blocks] : chosen)
    if (blocks.size() > 1 && !shared[k].empty()) return false;
  return true;
}

// Every combination of options the solver's rules allow; the cheapest.
double brute_force(const LayoutProblem& p, std::vector<size_t>* best_choice) {
  std::vector<size_t> choice(p.convs.size(), 0);
  double best = std::numeric_limits<double>::infinity();
  for (;;) {
    double c =
        joins_agree(p, choice) ? layout_cost(p, choice) : std::numeric_limits<double>::infinity();
    if (c < best) {
      best = c;
      *best_choice = choice;
    }
    size_t k = 0;
    while (k < choice.size() && ++choice[k] == p.convs[k].options.size()) choice[k++] = 0;
    if (k == choice.size()) return best;
  }
}

// A random problem: `classes` classes (class 0 fixed: the graph input;
// sometimes the last one too: an NCHW consumer), each conv reading a class
// before the one it writes (a DAG; several writers of a class make a join),
// with 1-3 options whose blocks come from {8, 16, 32}.
LayoutProblem random_problem(std::mt19937& rng, int convs, int classes, bool chain) {
  LayoutProblem p;
  p.fixed.assign(static_cast<size_t>(classes), false);
  p.fixed[0] = true;
  if (classes > 3 && rng() % 4 == 0) p.fixed[static_cast<size_t>(classes) - 1] = true;
  p.transform_ms = fake_transform;
  const int64_t blocks[] = {8, 16, 32};
  // One shape per class: a class is one tensor (and what elementwise ops make of it).
  std::vector<std::vector<int64_t>> shape;
  for (int k = 0; k < classes; ++k)
    shape.push_back({1, 64, 14 + static_cast<int64_t>(rng() % 3) * 14, 28});
  std::uniform_real_distribution<double> ms(0.05, 0.5);
  for (int i = 0; i < convs; ++i) {
    LayoutConv c;
    c.name = "conv" + std::to_string(i);
    if (chain) {
      c.in_class = i % classes;
      c.out_class = (i + 1) % classes == 0 ? classes - 1 : (i + 1) % classes;
    } else {
      c.out_class = 1 + static_cast<int>(rng() % static_cast<unsigned>(classes - 1));
      c.in_class = static_cast<int>(rng() % static_cast<unsigned>(c.out_class));
    }
    c.in_shape = shape[static_cast<size_t>(c.in_class)];
    c.out_shape = shape[static_cast<size_t>(c.out_class)];
    int n = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n; ++k)
      c.options.push_back({ms(rng), blocks[rng() % 3], blocks[rng() % 3]});
    p.convs.push_back(std::move(c));
  }
  return p;
}

TEST(ChooseLayouts, ChainMatchesBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    int convs = 1 + static_cast<int>(rng() % 6);
    LayoutProblem p = random_problem(rng, convs, convs + 1, true);
    std::vector<size_t> bf;
    double want = brute_force(p, &bf);
    LayoutSolution s = solve_layouts(p);
    EXPECT_TRUE(s.exact);
    ASSERT_EQ(s.choice.size(), p.convs.size());
    EXPECT_NEAR(s.total_ms, want, 1e-9) << "trial " << trial;
    EXPECT_NEAR(layout_cost(p, s.choice), s.total_ms, 1e-12);
  }
}

TEST(ChooseLayouts, DagWithJoinsMatchesBruteForce) {
  std::mt19937 rng(5);
  std::ptrdiff_t joins_nchw = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int convs = 2 + static_cast<int>(rng() % 6);
    int classes = 2 + static_cast<int>(rng() % 4);
    LayoutProblem p = random_problem(rng, convs, classes, false);
    std::vector<size_t> bf;
    double want = brute_force(p, &bf);
    LayoutSolution s = solve_layouts(p);
    EXPECT_TRUE(s.exact);
    EXPECT_NEAR(s.total_ms, want, 1e-9) << "trial " << trial;
    EXPECT_TRUE(joins_agree(p, s.choice));
    // A blocked class's writers all use its block.
    for (const LayoutConv& c : p.convs)
      if (s.block[c.out_class] != 0)
        EXPECT_EQ(c.options[s.choice[&c - p.convs.data()]].out_block, s.block[c.out_class]);
    joins_nchw += std::count(s.block.begin() + 1, s.block.end(), 0);
  }
  EXPECT_GT(joins_nchw, 0);  // joins without a shared block (NCHW) were exercised
}

TEST(ChooseLayouts, GreedyFallbackIsFeasibleAndNoWorseThanPerConvBest) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    LayoutProblem p = random_problem(rng, 6, 4, false);
    std::vector<size_t> bf;
    double want = brute_force(p, &bf);
    p.max_table = 0;  // every elimination table is too large
    LayoutSolution s = solve_layouts(p);
    EXPECT_FALSE(s.exact);
    EXPECT_GE(s.total_ms, want - 1e-9);
    EXPECT_TRUE(std::isfinite(s.total_ms)) << "trial " << trial;
  }
}

// The textbook case: a fast config with other blocks loses to the transforms
// it needs, unless it is faster by more than their cost.
TEST(ChooseLayouts, TransformCostDecides) {
  LayoutProblem p;
  p.fixed = {true, false, false};
  p.transform_ms = [](const std::vector<int64_t>&, int64_t from, int64_t to) {
    return from == 0 || to == 0 ? 0.0 : 1.0;  // only block-to-block transforms cost
  };
  p.convs.push_back({"a", 0, 1, {1, 64, 8, 8}, {{2.0, 16, 16}, {1.5, 8, 8}}});
  p.convs.push_back({"b", 1, 2, {1, 64, 8, 8}, {{2.0, 16, 16}, {1.8, 8, 16}}});
  LayoutSolution s = solve_layouts(p);
  // a=8 (1.5) then b reading 8: 1.8 without a transform -> 3.3.
  EXPECT_NEAR(s.total_ms, 3.3, 1e-12);
  EXPECT_EQ(s.choice, (std::vector<size_t>{1, 1}));
  p.convs[1].options[1].ms = 2.9;  // now b's 8-in config is slow: a=16, b=16 -> 4.0
  s = solve_layouts(p);
  EXPECT_NEAR(s.total_ms, 4.0, 1e-12);
  EXPECT_EQ(s.choice, (std::vector<size_t>{0, 0}));
}

TEST(ChooseLayouts, RejectsConvWithoutOptions) {
  LayoutProblem p;
  p.fixed = {true, false};
  p.transform_ms = fake_transform;
  p.convs.push_back({"lonely", 0, 1, {1, 8, 4, 4}, {}});
  EXPECT_THROW(solve_layouts(p), std::invalid_argument);
}

// A ResNet basic block with a downsample: the join forces conv2's and the
// downsample's output blocks to agree; with candidates whose per-workload
// best disagree, the choice must agree and cost no more than the baseline.
TEST(ChooseLayouts, ResidualBlockOfAGraph) {
  test::GraphBuilder b(7);
  std::string x = b.input("x", {1, 16, 8, 8});
  auto conv = [&](const std::string& in, int64_t ic, int64_t oc, int64_t k, int64_t stride,
                  const std::string& name) {
    std::string w = b.random_constant(name + "_w", {oc, ic, k, k});
    int64_t pad = k / 2;
    return b.node_n("Conv", {in, w}, 1,
                    {{"kernel_shape", std::vector<int64_t>{k, k}},
                     {"strides", std::vector<int64_t>{stride, stride}},
                     {"pads", std::vector<int64_t>{pad, pad, pad, pad}}},
                    name)[0];
  };
  std::string stem = conv(x, 16, 32, 3, 1, "stem");
  std::string r0 = b.node_n("Relu", {stem}, 1, {}, "relu0")[0];
  std::string c1 = conv(r0, 32, 64, 3, 2, "c1");
  std::string r1 = b.node_n("Relu", {c1}, 1, {}, "relu1")[0];
  std::string c2 = conv(r1, 64, 64, 3, 1, "c2");
  std::string ds = conv(r0, 32, 64, 1, 2, "ds");
  std::string sum = b.node_n("Add", {c2, ds}, 1, {}, "add")[0];
  std::string out = b.node_n("Relu", {sum}, 1, {}, "relu2")[0];
  b.output(out);
  Graph g = b.graph();
  std::vector<TemplateSelection> sel = select_templates(g);
  ASSERT_GE(sel.size(), 4u);

  // Two candidates per workload: blocks 16 and blocks 8, the 8 one faster
  // for c2 and the 16 one faster for ds: their per-workload bests disagree.
  std::map<std::string, std::vector<ConfigCandidate>> cands;
  std::map<std::string, std::string> baseline;
  for (const TemplateSelection& s : sel) {
    bool c2_node = s.node == "c2";
    for (const ops::Workload& w : s.implementations) {
      std::string k = w.key();
      cands[k] = {{"{\"b\":16}", c2_node ? 1.0 : 0.5, 16, 16},
                  {"{\"b\":8}", c2_node ? 0.7 : 0.9, 8, 8}};
      baseline[k] = c2_node ? "{\"b\":8}" : "{\"b\":16}";
    }
  }
  auto transform = [](const std::vector<int64_t>& s, int64_t, int64_t) {
    return static_cast<double>(s[1] * s[2] * s[3]) * 1e-3;  // 1 ms for 64x4x4
  };
  LayoutChoice c = choose_layouts(g, sel, cands, baseline, transform);
  EXPECT_EQ(c.convs, 4u);
  EXPECT_TRUE(c.exact);
  ASSERT_TRUE(c.configs.count("c2") && c.configs.count("ds"));
  // c2 and ds write the Add's two inputs: one class, one block.
  EXPECT_EQ(c.configs["c2"].second, c.configs["ds"].second);
  EXPECT_LT(c.predicted_ms, c.baseline_ms);
  EXPECT_GT(c.changed, 0u);
}

}  // namespace
}  // namespace kiln::graph
