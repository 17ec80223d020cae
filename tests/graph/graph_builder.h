// Builds graph::Graph models directly in C++ for the pass and interpreter
// tests. Every value keeps a sample tensor (random graph inputs, the given
// constants, and each node's result from the registry's evaluate), so that
// value_info is exact by construction and the samples double as the inputs
// of run_graph.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/interpreter.h"
#include "graph/op_registry.h"
#include "graph/passes/verify_graph.h"
#include "op_harness.h"

namespace kiln::test {

class GraphBuilder {
 public:
  explicit GraphBuilder(uint64_t seed = 1) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }

  // A graph input with random float data in [-1, 1) (or ints in [lo, hi]).
  std::string input(const std::string& name, std::vector<int64_t> shape,
                    const std::string& dtype = "float32", double lo = -1, double hi = 1) {
    graph::Initializer v = random_tensor(dtype, shape, rng_, lo, hi);
    g_.inputs.push_back({name, v.type});
    g_.value_info[name] = v.type;
    samples_[name] = std::move(v);
    return name;
  }

  std::string constant(const std::string& name, graph::Initializer v) {
    g_.value_info[name] = v.type;
    g_.initializers[name] = v;
    samples_[name] = std::move(v);
    return name;
  }

  std::string random_constant(const std::string& name, std::vector<int64_t> shape, double lo = -1,
                              double hi = 1) {
    return constant(name, random_tensor("float32", std::move(shape), rng_, lo, hi));
  }

  std::string ints(const std::string& name, std::vector<int64_t> values) {
    int64_t n = static_cast<int64_t>(values.size());
    return constant(name, tensor_of<int64_t>({n}, values));
  }

  // Adds a node named `<op_type>_<k>`; outputs are named `<node>_out<i>`
  // (or `<node>` for a single output). Its types come from evaluating it on
  // the samples of its inputs. Returns the output names.
  std::vector<std::string> node_n(const std::string& op_type, std::vector<std::string> inputs,
                                  size_t num_outputs,
                                  std::map<std::string, graph::Attribute> attrs = {},
                                  const std::string& name = "") {
    graph::Node n;
    n.op_type = op_type;
    n.name = name.empty() ? op_type + "_" + std::to_string(g_.nodes.size()) : name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (size_t i = 0; i < num_outputs; ++i)
      n.outputs.push_back(num_outputs == 1 ? n.name : n.name + "_out" + std::to_string(i));
    std::vector<const graph::Initializer*> args;
    for (const std::string& in : n.inputs) args.push_back(in.empty() ? nullptr : &samples_.at(in));
    std::vector<graph::Initializer> results = graph::get_op(op_type).evaluate(n, args);
    for (size_t i = 0; i < num_outputs; ++i) {
      g_.value_info[n.outputs[i]] = results[i].type;
      samples_[n.outputs[i]] = std::move(results[i]);
    }
    g_.nodes.push_back(n);
    return n.outputs;
  }

  std::string node(const std::string& op_type, std::vector<std::string> inputs,
                   std::map<std::string, graph::Attribute> attrs = {},
                   const std::string& name = "") {
    return node_n(op_type, std::move(inputs), 1, std::move(attrs), name)[0];
  }

  void output(const std::string& value) { g_.outputs.push_back(value); }

  const graph::Graph& graph() const { return g_; }
  graph::Graph& graph() { return g_; }

  // The sample of every graph input: what run_graph takes.
  std::map<std::string, graph::Initializer> inputs() const {
    std::map<std::string, graph::Initializer> m;
    for (const auto& in : g_.inputs) m[in.name] = samples_.at(in.name);
    return m;
  }

 private:
  graph::Graph g_;
  std::map<std::string, graph::Initializer> samples_;
  std::mt19937_64 rng_;
};

// Max |a - b| / max(1, |b|) over float32 elements (exact compare for others).
inline void expect_same_outputs(const std::map<std::string, graph::Initializer>& got,
                                const std::map<std::string, graph::Initializer>& want,
                                double rel_tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << "missing output " << name;
    const graph::Initializer& v = it->second;
    ASSERT_EQ(v.type, w.type) << name;
    if (w.type.dtype != "float32") {
      EXPECT_EQ(v.data, w.data) << name;
      continue;
    }
    std::vector<float> a = v.as<float>(), b = w.as<float>();
    double worst = 0;
    size_t nans = 0;  // std::max drops a NaN: counted apart
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) || std::isnan(b[i])) {
        nans += std::isnan(a[i]) != std::isnan(b[i]);
        continue;
      }
      worst =
          std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
    }
    EXPECT_LE(worst, rel_tol) << "output " << name;
    EXPECT_EQ(nans, 0u) << "output " << name << ": NaN in one result only";
  }
}

// Runs `pass` on a copy of `g`, checks the graph invariants and that run_graph
// gives the same outputs before and after; returns the transformed graph.
template <typename Pass>
graph::Graph check_pass_preserves(const graph::Graph& g,
                                  const std::map<std::string, graph::Initializer>& inputs,
                                  Pass pass, double rel_tol = 1e-5) {
  graph::passes::verify_graph(g);
  auto before = graph::run_graph(g, inputs);
  graph::Graph after = g;
  pass(after);
  EXPECT_NO_THROW(graph::passes::verify_graph(after));
  expect_same_outputs(graph::run_graph(after, inputs), before, rel_tol);
  return after;
}

inline int count_op(const graph::Graph& g, const std::string& op_type) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.op_type == op_type;
  return n;
}

}  // namespace kiln::test
