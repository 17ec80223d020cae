// The shared machinery of the passes that replace a pattern of nodes by one
// node (fuse_layer_norm, fuse_gelu): who produces and who reads each value,
// the one-reader test every intermediate of a pattern must pass, and the
// rewrite itself (the replacement takes the place of the pattern's last node,
// the other nodes and the intermediates' value_info go).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph::passes {

// A pattern found in the graph: its nodes (any order; the rewrite sorts
// them), the values only its nodes read, which go with it, and the node that
// replaces it (reading the pattern's inputs, writing its output).
struct PatternMatch {
  std::vector<size_t> nodes;
  std::vector<std::string> intermediates;
  Node replacement;
};

class PatternRewriter {
 public:
  explicit PatternRewriter(Graph& g);

  // For every node of `anchor_op` (in order) that `match` finds a pattern at
  // and whose nodes no earlier match took, replaces the pattern by its
  // replacement. Returns the number of patterns replaced.
  int rewrite_all(const std::string& anchor_op,
                  const std::function<std::optional<PatternMatch>(size_t)>& match);

 protected:
  // The one node reading `v` (a node reading it twice counts once), when no
  // other node and no graph output reads it.
  std::optional<size_t> only_reader(const std::string& v) const;
  // Every node reading `v`, once each; empty for a graph output.
  std::vector<size_t> readers(const std::string& v) const;
  // The index of the node producing `v`.
  std::optional<size_t> producer_index(const std::string& v) const;
  const Node* producer(const std::string& v) const;
  // A one-element float32 constant's value.
  std::optional<float> scalar_constant(const std::string& v) const;

  Graph& g_;

 private:
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producers_;
};

}  // namespace kiln::graph::passes
