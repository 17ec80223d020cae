// Helpers for operator tests: random host tensors, one node compiled through
// the registry's compute + the generic schedule + the JIT, and comparison
// against the registry's evaluate (the reference implementation).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "ir/dtype.h"
#include "ops/generic_schedule.h"
#include "schedule/lower.h"

namespace kiln::test {

// A node of `op` with inputs x0, x1, ... and outputs y0, y1, ..., named
// "<op>_test" (what error messages name).
inline graph::Node make_node(const std::string& op, size_t n_in, size_t n_out = 1) {
  graph::Node n;
  n.op_type = op;
  n.name = op + "_test";
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back("x" + std::to_string(i));
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back("y" + std::to_string(i));
  return n;
}

// The registry's reference evaluation of `n`.
inline std::vector<graph::Initializer> eval(const graph::Node& n,
                                            const std::vector<const graph::Initializer*>& in) {
  return graph::get_op(n.op_type).evaluate(n, in);
}

inline graph::Initializer make_tensor(const std::string& dtype, std::vector<int64_t> shape) {
  graph::Initializer t;
  t.type = {dtype, std::move(shape)};
  t.data.assign(static_cast<size_t>(t.type.num_elements()) * graph::dtype_size(dtype), 0);
  return t;
}

template <typename T>
graph::Initializer tensor_of(std::vector<int64_t> shape, const std::vector<T>& values) {
  graph::Initializer t = make_tensor(graph::detail::dtype_name_of<T>(), std::move(shape));
  EXPECT_EQ(t.data.size(), values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// Uniform in [lo, hi) for float32; integers in [lo, hi] for int types; bool 0/1.
inline graph::Initializer random_tensor(const std::string& dtype, std::vector<int64_t> shape,
                                        std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  graph::Initializer t = make_tensor(dtype, std::move(shape));
  int64_t n = t.type.num_elements();
  if (dtype == "float32") {
    std::uniform_real_distribution<float> d(static_cast<float>(lo), static_cast<float>(hi));
    auto* p = reinterpret_cast<float*>(t.data.data());
    for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
  } else if (dtype == "int64" || dtype == "int32") {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = d(rng);
      if (dtype == "int64")
        reinterpret_cast<int64_t*>(t.data.data())[i] = v;
      else
        reinterpret_cast<int32_t*>(t.data.data())[i] = static_cast<int32_t>(v);
    }
  } else if (dtype == "uint8" || dtype == "int8") {
    std::uniform_int_distribution<int> d(static_cast<int>(lo), static_cast<int>(hi));
    for (int64_t i = 0; i < n; ++i) t.data[i] = static_cast<uint8_t>(d(rng));  // two's complement
  } else if (dtype == "bool") {
    std::uniform_int_distribution<int> d(0, 1);
    for (int64_t i = 0; i < n; ++i) t.data[i] = static_cast<uint8_t>(d(rng));
  } else {
    ADD_FAILURE() << "random_tensor: no generator for " << dtype;
  }
  return t;
}

inline std::vector<ir::Expr> shape_exprs(const std::vector<int64_t>& s) {
  std::vector<ir::Expr> e;
  for (int64_t d : s) e.push_back(ir::Expr(d));
  return e;
}

// Compiles `node` alone (inputs at positions in OpDef::constant_inputs are
// passed as constants, those in type_only_inputs as tensors of their type
// only, the others as kernel arguments), runs it through the
// JIT on `inputs`, and returns its outputs. Output types come from evaluate.
// run_compiled_as: the same with the output types given, for inputs that
// evaluate rejects (a run-time index out of range: the kernel's status is
// then want_status, KILN_STATUS_INDEX_OUT_OF_RANGE).
inline std::vector<graph::Initializer> run_compiled_as(
    const graph::Node& node, const std::vector<const graph::Initializer*>& inputs,
    const std::vector<graph::TensorType>& out_types, int32_t want_status = 0) {
  const graph::OpDef& def = graph::get_op(node.op_type);

  graph::ComputeInputs in;
  std::vector<ir::Tensor> args;
  std::vector<const graph::Initializer*> arg_data;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool is_const = std::find(def.constant_inputs.begin(), def.constant_inputs.end(),
                              static_cast<int>(i)) != def.constant_inputs.end();
    in.constants.push_back(is_const ? inputs[i] : nullptr);
    if (is_const || inputs[i] == nullptr) {
      in.tensors.push_back(nullptr);
      continue;
    }
    ir::Tensor p =
        ir::placeholder(shape_exprs(inputs[i]->type.shape),
                        ir::DataType::parse(inputs[i]->type.dtype), "in" + std::to_string(i));
    in.tensors.push_back(p);
    if (graph::is_type_only_input(def, i)) continue;  // its type only: never an argument
    args.push_back(p);
    arg_data.push_back(inputs[i]);
  }
  std::vector<ir::Tensor> outs = def.compute(node, in, out_types);
  EXPECT_EQ(outs.size(), out_types.size());
  // Inputs the kernel never reads are no arguments (lowering rejects them),
  // as driver/lower_group.cc drops them: an empty index tensor, ...
  std::vector<ir::Tensor> reachable = ir::post_order(outs);
  for (size_t k = args.size(); k-- > 0;)
    if (std::find(reachable.begin(), reachable.end(), args[k]) == reachable.end()) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(k));
      arg_data.erase(arg_data.begin() + static_cast<std::ptrdiff_t>(k));
    }
  for (auto& o : outs) args.push_back(o);

  schedule::Schedule sch = ops::schedule_generic(outs, codegen::Target::host().float_lanes());
  ir::LoweredFunc f = schedule::lower(sch, args, "op_under_test");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());

  std::vector<graph::Initializer> results;
  for (auto& t : out_types) results.push_back(make_tensor(t.dtype, t.shape));
  std::vector<std::vector<uint8_t>> in_copies;
  std::vector<void*> ptrs;
  for (auto* d : arg_data) {
    in_copies.push_back(d->data);
    in_copies.back().resize(in_copies.back().size() + 64);  // never a null pointer
    ptrs.push_back(in_copies.back().data());
  }
  for (auto& r : results) {
    r.data.reserve(r.data.size() + 64);
    ptrs.push_back(r.data.data());
  }
  EXPECT_EQ(mod->get_function("op_under_test")(ptrs.data()), want_status);
  return results;
}

inline std::vector<graph::Initializer> run_compiled(
    const graph::Node& node, const std::vector<const graph::Initializer*>& inputs) {
  std::vector<graph::Initializer> expected = graph::get_op(node.op_type).evaluate(node, inputs);
  std::vector<graph::TensorType> out_types;
  for (auto& e : expected) out_types.push_back(e.type);
  return run_compiled_as(node, inputs, out_types);
}

// max |a - b| / max(|b|, tiny) over float32 tensors; exact equality for others.
inline void expect_same(const graph::Initializer& got, const graph::Initializer& want,
                        double rel_tol = 1e-5, const std::string& what = "") {
  ASSERT_EQ(got.type, want.type) << what;
  if (want.type.dtype != "float32") {
    EXPECT_EQ(got.data, want.data) << what;
    return;
  }
  auto* a = reinterpret_cast<const float*>(got.data.data());
  auto* b = reinterpret_cast<const float*>(want.data.data());
  int64_t n = want.type.num_elements();
  double max_ref = 1e-30, max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(b[i]) != std::isnan(a[i])) {
      ADD_FAILURE() << what << ": NaN mismatch at " << i;
      return;
    }
    if (std::isnan(b[i])) continue;
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_LE(max_err / max_ref, rel_tol) << what << ": max abs error " << max_err;
}

// Compiles and evaluates `node` on `inputs` and compares every output.
inline void check_node(const graph::Node& node,
                       const std::vector<const graph::Initializer*>& inputs,
                       double rel_tol = 1e-5) {
  const graph::OpDef& def = graph::get_op(node.op_type);
  auto want = def.evaluate(node, inputs);
  auto got = run_compiled(node, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    expect_same(got[i], want[i], rel_tol, node.op_type + " output " + std::to_string(i));
}

}  // namespace kiln::test
