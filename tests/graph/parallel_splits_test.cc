// choose_parallel_splits on hand-made kernel groups: convolutions decide by
// the weight of their activations against their weights, kernels without
// weights follow the producer of their largest activation (views included),
// other templates keep the channel split.
#include "graph/passes/parallel_splits.h"

#include <gtest/gtest.h>

namespace kiln::graph {
namespace {

class SplitGraph {
 public:
  SplitGraph() { g.inputs.push_back({"image", {"float32", {1, 3, 64, 64}}}); }

  void value(const std::string& name, std::vector<int64_t> shape) {
    g.value_info[name] = {"float32", std::move(shape)};
  }
  void weight(const std::string& name, std::vector<int64_t> shape) {
    value(name, shape);
    Initializer w;
    w.type = {"float32", std::move(shape)};
    w.data.resize(static_cast<size_t>(w.type.num_elements()) * 4);
    g.initializers[name] = w;
  }
  // One node, one kernel group: a template's anchor when `templ` is set.
  void kernel(const std::string& templ, std::vector<std::string> inputs, const std::string& output,
              std::vector<int64_t> shape) {
    Node n;
    n.op_type = templ.empty() ? "Add" : "kiln.Template";
    n.name = output + "_node";
    n.inputs = inputs;
    n.outputs = {output};
    if (!templ.empty()) n.attrs["template"] = templ;
    g.nodes.push_back(n);
    value(output, std::move(shape));
    FusedGroup group;
    group.nodes = {g.nodes.size() - 1};
    group.anchor = templ.empty() ? -1 : static_cast<int64_t>(g.nodes.size() - 1);
    group.inputs = std::move(inputs);
    group.outputs = {output};
    groups.push_back(group);
  }

  Graph g;
  std::vector<FusedGroup> groups;
  std::map<std::string, std::vector<std::string>> views;
};

TEST(ParallelSplits, ConvsDecideAndTheRestFollow) {
  SplitGraph s;
  s.weight("w_stem", {2, 1, 3, 3, 3, 16});     // 3.5 KB beside 256 KB of output
  s.weight("w_dw", {2, 1, 3, 3, 1, 16});       // depthwise
  s.weight("w_wide", {32, 32, 1, 1, 16, 16});  // 1 MiB beside 16 KB of activations
  s.weight("w_wino", {2, 2, 6, 6, 16, 16});    // Winograd: any weight
  s.weight("w_bias", {1, 32, 1, 1, 16});       // an Add's constant, larger than its activation
  s.kernel("", {"image"}, "blocked", {1, 1, 64, 64, 3});  // layout transform of an input
  s.kernel("conv2d_NCHWc.x86", {"blocked", "w_stem"}, "stem", {1, 2, 32, 32, 16});
  s.kernel("depthwise_conv2d_NCHWc.x86", {"stem", "w_dw"}, "dw", {1, 2, 32, 32, 16});
  s.kernel("", {"dw"}, "pooled", {1, 2, 4, 4, 16});
  s.kernel("conv2d_NCHWc.x86", {"pooled", "w_wide"}, "wide", {1, 32, 4, 4, 16});
  s.kernel("depthwise_conv2d_NCHWc.x86", {"wide", "w_dw"}, "dw2", {1, 32, 4, 4, 16});
  s.kernel("", {"w_bias", "dw2"}, "biased", {1, 32, 4, 4, 16});
  s.kernel("conv2d_winograd_NCHWc.x86", {"stem", "w_wino"}, "wino", {1, 2, 32, 32, 16});
  s.kernel("", {"wino"}, "after_wino", {1, 2, 32, 32, 16});
  // A concat written in place: its readers follow its first source.
  s.value("joined", {1, 34, 4, 4, 16});
  s.views["joined"] = {"image_never_written", "wide", "pooled"};
  s.kernel("", {"joined"}, "after_join", {1, 34, 4, 4, 16});
  s.views["flat"] = {"pooled"};
  s.value("flat", {1, 512});
  s.kernel("", {"flat"}, "after_flat", {1, 512});

  std::vector<ParallelSplit> splits = choose_parallel_splits(s.g, s.groups, s.views);
  ASSERT_EQ(splits.size(), s.groups.size());
  auto rows = [&](size_t k) { return splits.at(k).rows; };
  auto input_rows = [&](size_t k) { return splits.at(k).input_rows; };
  EXPECT_TRUE(rows(0)) << "a graph input counts as written by rows";
  EXPECT_TRUE(rows(1)) << "the stem's activations outweigh its weights";
  EXPECT_TRUE(input_rows(1));
  EXPECT_TRUE(rows(2)) << "the depthwise conv follows the stem";
  EXPECT_TRUE(rows(3));
  EXPECT_FALSE(rows(4)) << "the wide conv's weights outweigh its activations";
  EXPECT_TRUE(input_rows(4)) << "its input was written by rows (its padding copy follows)";
  EXPECT_FALSE(rows(5)) << "the depthwise conv follows the wide conv";
  EXPECT_FALSE(input_rows(5));
  EXPECT_FALSE(rows(6)) << "an Add follows its activation, not its larger constant";
  EXPECT_FALSE(rows(7)) << "Winograd keeps its channel split";
  EXPECT_TRUE(input_rows(7));
  EXPECT_FALSE(rows(8)) << "a kernel after Winograd follows it";
  EXPECT_FALSE(rows(9)) << "a concat view's reader follows its first written source (wide)";
  EXPECT_TRUE(rows(10)) << "a reshape view's reader follows its source (pooled)";
}

// A squeeze-excitation block: what the global pool reads is written by
// channels, back through the depthwise conv to the expansion conv, whose
// activations alone would have chosen rows; the gate's Mul and the project
// conv after it decide as before.
TEST(ParallelSplits, WhatAWholePlaneReductionReadsIsWrittenByChannels) {
  SplitGraph s;
  s.weight("w_expand", {4, 1, 1, 1, 3, 16});
  s.weight("w_dw", {4, 1, 3, 3, 1, 16});
  s.weight("w_project", {2, 4, 1, 1, 16, 16});
  s.kernel("", {"image"}, "blocked", {1, 1, 64, 64, 3});
  s.kernel("conv2d_NCHWc.x86", {"blocked", "w_expand"}, "expanded", {1, 4, 64, 64, 16});
  s.kernel("depthwise_conv2d_NCHWc.x86", {"expanded", "w_dw"}, "dw", {1, 4, 64, 64, 16});
  s.kernel("", {"dw"}, "squeezed", {1, 4, 1, 1, 16});  // GlobalAveragePool
  s.kernel("", {"dw", "squeezed"}, "gated", {1, 4, 64, 64, 16});
  s.kernel("conv2d_NCHWc.x86", {"gated", "w_project"}, "projected", {1, 2, 64, 64, 16});
  s.kernel("", {"projected"}, "pooled", {1, 2, 32, 32, 16});  // a max pool: planes stay

  std::vector<ParallelSplit> splits = choose_parallel_splits(s.g, s.groups, s.views);
  ASSERT_EQ(splits.size(), 7u);
  EXPECT_TRUE(splits[0].rows) << "the layout transform: nothing downstream wants channels";
  EXPECT_FALSE(splits[1].rows) << "the expansion conv writes what the pool reads, through dw";
  EXPECT_TRUE(splits[1].input_rows);
  EXPECT_FALSE(splits[2].rows) << "the depthwise conv writes what the pool reads";
  EXPECT_FALSE(splits[4].rows) << "the gate follows the depthwise conv";
  EXPECT_TRUE(splits[5].rows) << "the project conv decides by its activations";
  EXPECT_TRUE(splits[6].rows) << "a pool to a smaller plane follows it";
}

}  // namespace
}  // namespace kiln::graph
