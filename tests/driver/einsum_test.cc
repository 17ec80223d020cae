// Einsum: the reference evaluation against hand-computed values, and whole
// builds (lower_einsum's Transpose / Gather / ReduceSum / MatMul nodes,
// compiled) against that reference over many equations.
#include "graph/op_registry.h"
#include "graph/ops/einsum.h"

#include <gtest/gtest.h>

#include "driver_harness.h"

namespace kiln::test {
namespace {

struct EinsumCase {
  std::string equation;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> out;
};

OnnxBuilder einsum_model(const EinsumCase& c) {
  OnnxBuilder b(13);
  std::vector<std::string> names;
  for (size_t k = 0; k < c.shapes.size(); ++k) {
    std::vector<std::string> dims;
    for (int64_t d : c.shapes[k]) dims.push_back(std::to_string(d));
    names.push_back("x" + std::to_string(k));
    b.input(names.back(), dims);
  }
  std::vector<std::string> out_dims;
  for (int64_t d : c.out) out_dims.push_back(std::to_string(d));
  b.output("y", out_dims);
  attr_string(b.node("Einsum", "es", names, {"y"}), "equation", c.equation);
  return b;
}

TEST(Einsum, CompiledMatchesReference) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}, {3, 5}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}},
      {"bhqd,bhkd->bhqk", {{1, 2, 5, 4}, {1, 2, 6, 4}}, {1, 2, 5, 6}},
      {"ij->ji", {{3, 7}}, {7, 3}},
      {"ij->i", {{3, 7}}, {3}},
      {"...ii->...i", {{2, 3, 3}}, {2, 3}},
      {"i,j->ij", {{3}, {4}}, {3, 4}},
      {"ij,jk", {{3, 4}, {4, 5}}, {3, 5}},  // implicit output: "ik"
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 6}}, {2, 3, 6}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, {2, 4}},
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}},
  };
  for (const EinsumCase& c : cases) {
    SCOPED_TRACE(c.equation);
    check_end_to_end(einsum_model(c), "einsum");
  }
}

TEST(Einsum, ReferenceMatchesHandComputedValues) {
  graph::Node n;
  n.op_type = "Einsum";
  n.name = "es";
  n.attrs["equation"] = std::string("ij,jk->ik");
  graph::Initializer a = graph::Initializer{{"float32", {2, 3}}, {}};
  graph::Initializer b = graph::Initializer{{"float32", {3, 2}}, {}};
  const std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {1, 0, 0, 1, 1, 1};
  a.data.resize(24);
  b.data.resize(24);
  std::memcpy(a.data.data(), av.data(), 24);
  std::memcpy(b.data.data(), bv.data(), 24);
  auto out = graph::get_op("Einsum").evaluate(n, {&a, &b});
  EXPECT_EQ(out.at(0).as<float>(), (std::vector<float>{4, 5, 10, 11}));
  n.attrs["equation"] = std::string("ii");  // the trace
  graph::Initializer m = graph::Initializer{{"float32", {3, 3}}, {}};
  const std::vector<float> mv = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  m.data.resize(36);
  std::memcpy(m.data.data(), mv.data(), 36);
  out = graph::get_op("Einsum").evaluate(n, {&m});
  EXPECT_EQ(out.at(0).type.shape, std::vector<int64_t>{});
  EXPECT_EQ(out.at(0).as<float>(), std::vector<float>{15});
}

TEST(Einsum, BadEquationNamesTheNode) {
  graph::Node n;
  n.op_type = "Einsum";
  n.name = "es";
  n.attrs["equation"] = std::string("ij,jk->ix");
  try {
    graph::op_util::parse_einsum(n, {{2, 3}, {3, 4}});
    ADD_FAILURE() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("'es'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'x' is in no operand"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::test
