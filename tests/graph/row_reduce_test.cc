// Row reductions (Softmax, LayerNormalization, ReduceSum/Mean/Max over the
// innermost axes, GlobalAverage/MaxPool): the compiled kernels against the
// reference evaluate on random inputs, for every ISA's lane count (4, 8, 16)
// and row lengths the 16 partials and the lanes do not divide (1-element
// rows, 7, 31, 33, 257, ...), and the schedule's shape: one row loop with
// every statistic inside it, the partials vectorized.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codegen/codegen.h"
#include "graph/op_registry.h"
#include "op_harness.h"
#include "ops/generic_schedule.h"
#include "schedule/lower.h"

namespace kiln {
namespace {

using graph::Attribute;
using graph::Initializer;
using graph::Node;
using test::expect_same;
using test::random_tensor;
using Ints = std::vector<int64_t>;

Node make_node(const std::string& op, int n_inputs, std::map<std::string, Attribute> attrs = {},
               int n_outputs = 1) {
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

Compiled compute_of(const Node& node, const std::vector<const Initializer*>& inputs) {
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
void check_lanes(const Node& node, const std::vector<const Initializer*>& inputs, int64_t lanes,
                 double rel_tol) {
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

void check_all_lanes(const Node& node, const std::vector<const Initializer*>& inputs,
                     double rel_tol = 1e-5) {
  for (int64_t lanes : {4, 8, 16}) check_lanes(node, inputs, lanes, rel_tol);
}

const Ints kRowLengths = {1, 2, 7, 16, 31, 32, 33, 100, 128, 257};

TEST(RowReduce, SoftmaxLastAxis) {
  std::mt19937_64 rng(31);
  for (int64_t n : kRowLengths)
    for (const Ints& lead : {Ints{3}, Ints{2, 3}, Ints{1}}) {
      Ints shape = lead;
      shape.push_back(n);
      SCOPED_TRACE("softmax " + graph::shape_str(shape));
      // Wide inputs: exp overflows unless the row maximum is right.
      Initializer x = random_tensor("float32", shape, rng, -40, 40);
      check_all_lanes(make_node("Softmax", 1), {&x});
    }
}

TEST(RowReduce, LayerNormOverOneAndTwoAxes) {
  std::mt19937_64 rng(32);
  struct Case {
    Ints shape;
    int64_t axis;
    bool bias;
  };
  std::vector<Case> cases;
  for (int64_t n : kRowLengths) cases.push_back({{3, n}, -1, true});
  cases.push_back({{2, 5, 7}, 1, true});    // 35 values per row through div/mod
  cases.push_back({{2, 4, 16}, 1, false});  // 64
  cases.push_back({{1, 128, 256}, 2, true});
  cases.push_back({{7, 1}, 1, true});
  for (const Case& k : cases) {
    int64_t axis = k.axis < 0 ? k.axis + static_cast<int64_t>(k.shape.size()) : k.axis;
    Ints norm(k.shape.begin() + axis, k.shape.end());
    // An offset mean: a one-pass variance would lose it to cancellation.
    Initializer x = random_tensor("float32", k.shape, rng, 2, 5);
    Initializer scale = random_tensor("float32", norm, rng);
    Initializer bias = random_tensor("float32", norm, rng);
    Node node = make_node("LayerNormalization", k.bias ? 3 : 2, {{"axis", k.axis}});
    SCOPED_TRACE("layernorm " + graph::shape_str(k.shape) + " axis " + std::to_string(k.axis));
    if (k.bias)
      check_all_lanes(node, {&x, &scale, &bias}, 2e-5);
    else
      check_all_lanes(node, {&x, &scale}, 2e-5);
  }
}

TEST(RowReduce, ReduceOpsOverInnermostAxes) {
  std::mt19937_64 rng(33);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
    for (int64_t n : kRowLengths)
      for (int64_t keep : {0, 1}) {
        Ints shape = {4, n};
        SCOPED_TRACE(std::string(op) + " " + graph::shape_str(shape));
        // All negative: a max whose partials start at 0 instead of -inf is wrong.
        Initializer x = random_tensor("float32", shape, rng, -3, -1);
        check_all_lanes(make_node(op, 1, {{"axes", Ints{-1}}, {"keepdims", keep}}), {&x});
      }
    Initializer x = random_tensor("float32", {3, 5, 13}, rng, -3, -1);  // 65 per row
    check_all_lanes(make_node(op, 1, {{"axes", Ints{1, 2}}}), {&x});
  }
}

TEST(RowReduce, GlobalPools) {
  std::mt19937_64 rng(34);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (const Ints& shape : {Ints{1, 5, 7, 7}, Ints{2, 3, 1, 1}, Ints{1, 4, 9, 9}, Ints{1, 3, 40},
                              Ints{1, 64, 14, 14}}) {
      SCOPED_TRACE(std::string(op) + " " + graph::shape_str(shape));
      Initializer x = random_tensor("float32", shape, rng, -3, -1);
      check_all_lanes(make_node(op, 1), {&x});
    }
}

// The schedule's shape for Softmax over [4, 128]: the output's row loop is
// the only root loop nest besides the output, every statistic (maxima, sums
// and their partials) is attached inside it, and each partial stage runs its
// partial axis as vectors inside its reduction loop.
TEST(RowReduce, SoftmaxIsOneRowKernelWithVectorPartials) {
  std::mt19937_64 rng(35);
  Initializer x = random_tensor("float32", {4, 128}, rng);
  Compiled c = compute_of(make_node("Softmax", 1), {&x});
  for (int64_t lanes : {8, 16}) {
    schedule::Schedule sch = ops::schedule_generic(c.outs, lanes);
    int attached = 0, vector_partials = 0;
    for (const schedule::Stage& s : sch.stages()) {
      if (s->is_placeholder() || s->is_output) continue;
      EXPECT_EQ(s->attach, schedule::AttachKind::At) << s->op->name;
      attached += s->attach == schedule::AttachKind::At;
      if (s->op->name.find(".partials") == std::string::npos) continue;
      // [row, ko, (lane group,) lanes]: the vectorized leaf is innermost and
      // follows the reduction loop.
      const auto& leaves = s->leaf_iter_vars;
      ASSERT_GE(leaves.size(), 3u);
      auto a = s->annotations.find(leaves.back().get());
      EXPECT_TRUE(a != s->annotations.end() && a->second == schedule::IterAnnotation::Vectorize);
      const int64_t* extent = ir::as_const_int(leaves.back()->dom.extent);
      EXPECT_TRUE(extent && *extent == lanes);
      bool reduce_before_lanes = false;
      for (size_t i = 0; i + 1 < leaves.size(); ++i)
        reduce_before_lanes = reduce_before_lanes || leaves[i]->kind == ir::IterKind::Reduce;
      EXPECT_TRUE(reduce_before_lanes);
      ++vector_partials;
    }
    EXPECT_EQ(attached, 4);  // max, max partials, sum, sum partials
    EXPECT_EQ(vector_partials, 2);
  }
}

}  // namespace
}  // namespace kiln
