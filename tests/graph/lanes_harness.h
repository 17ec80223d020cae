// Operator tests across every ISA's lane count: one node's compute, scheduled
// by the generic schedule for lanes 4, 8 and 16 (NEON, AVX2, AVX-512), run on
// the host's JIT and compared with the node's evaluate (the reference).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "graph/op_registry.h"
#include "op_harness.h"
#include "ops/generic_schedule.h"
#include "schedule/lower.h"

namespace kiln::test {

using graph::Attribute;
using graph::Initializer;
using graph::Node;

inline Node make_node(const std::string& op, int n_inputs,
                      std::map<std::string, Attribute> attrs = {}, int n_outputs = 1) {
  Node n;
  n.op_type = op;
  n.name = op + "_under_test";
  for (int i = 0; i < n_inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (int i = 0; i < n_outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  n.attrs = std::move(attrs);
  return n;
}

// The node's compute, scheduled by the generic schedule for `lanes`, its
// tensors and its outputs' types.
struct Compiled {
  std::vector<ir::Tensor> args, outs;
  std::vector<graph::TensorType> out_types;
};

inline Compiled compute_of(const Node& node, const std::vector<const Initializer*>& inputs) {
  const graph::OpDef& def = graph::get_op(node.op_type);
  Compiled c;
  for (const Initializer& e : def.evaluate(node, inputs)) c.out_types.push_back(e.type);
  graph::ComputeInputs in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::Tensor p = ir::placeholder(test::shape_exprs(inputs[i]->type.shape), ir::DataType::f32(),
                                   "in" + std::to_string(i));
    in.tensors.push_back(p);
    in.constants.push_back(nullptr);
    c.args.push_back(p);
  }
  c.outs = def.compute(node, in, c.out_types);
  for (const ir::Tensor& o : c.outs) c.args.push_back(o);
  return c;
}

// Runs the node compiled for `lanes` (float32 inputs, all kernel arguments)
// and compares every output with evaluate. Inputs are copied into buffers of
// exactly their size, so a read past a row's end is not hidden by slack.
inline void check_lanes(const Node& node, const std::vector<const Initializer*>& inputs,
                        int64_t lanes, double rel_tol) {
  SCOPED_TRACE("lanes " + std::to_string(lanes));
  Compiled c = compute_of(node, inputs);
  schedule::Schedule sch = ops::schedule_generic(c.outs, lanes);
  ir::LoweredFunc f = schedule::lower(sch, c.args, "row_under_test");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  std::vector<std::vector<float>> bufs;
  std::vector<void*> ptrs;
  for (const Initializer* x : inputs) {
    std::vector<float> v = x->as<float>();
    bufs.push_back(v.empty() ? std::vector<float>(1) : v);
  }
  for (const graph::TensorType& t : c.out_types)
    bufs.emplace_back(static_cast<size_t>(std::max<int64_t>(t.num_elements(), 1)), -7.0f);
  for (auto& b : bufs) ptrs.push_back(b.data());
  ASSERT_EQ(mod->get_function("row_under_test")(ptrs.data()), 0);
  std::vector<Initializer> want = graph::get_op(node.op_type).evaluate(node, inputs);
  for (size_t i = 0; i < want.size(); ++i) {
    Initializer got = test::make_tensor("float32", want[i].type.shape);
    std::memcpy(got.data.data(), bufs[inputs.size() + i].data(), got.data.size());
    expect_same(got, want[i], rel_tol, node.op_type + " output " + std::to_string(i));
  }
}

inline void check_all_lanes(const Node& node, const std::vector<const Initializer*>& inputs,
                            double rel_tol = 1e-5) {
  for (int64_t lanes : {4, 8, 16}) check_lanes(node, inputs, lanes, rel_tol);
}

}  // namespace kiln::test
