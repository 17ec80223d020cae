// Ordering operators (graph/ops/ordering.cc): evaluate() against the ONNX
// spec's examples, then compute() (through the registry's compute, the
// generic schedule and the JIT) against evaluate() over shapes, dtypes and
// attributes, ties included; TopK through both of its kernels (selection
// rounds for small k, the sorting network for k near n).
#include <gtest/gtest.h>

#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::check_node;
using test::eval;
using test::make_node;
using test::random_tensor;
using test::tensor_of;
using Shape = std::vector<int64_t>;

Initializer ints(Shape shape, std::vector<int64_t> v) { return tensor_of<int64_t>(shape, v); }
Initializer floats(Shape shape, std::vector<float> v) { return tensor_of<float>(shape, v); }

// Small integers as float32: many ties.
Initializer tied_floats(Shape shape, std::mt19937_64& rng) {
  Initializer t = random_tensor("int64", shape, rng, -3, 3);
  std::vector<float> v;
  for (int64_t e : t.as<int64_t>()) v.push_back(static_cast<float>(e));
  return floats(std::move(shape), v);
}

// ---- ArgMax, ArgMin -------------------------------------------------------------------

// The spec's examples.
TEST(OrderingEval, ArgMaxArgMin) {
  Initializer x = floats({2, 2}, {2, 1, 3, 10});
  Node n = make_node("ArgMax", 1);
  auto y = eval(n, {&x});
  EXPECT_EQ(y[0].type, (graph::TensorType{"int64", {1, 2}}));
  EXPECT_EQ(y[0].as<int64_t>(), (std::vector<int64_t>{1, 1}));
  n.attrs["axis"] = int64_t{1};
  EXPECT_EQ(eval(n, {&x})[0].as<int64_t>(), (std::vector<int64_t>{0, 1}));
  n.attrs["keepdims"] = int64_t{0};
  EXPECT_EQ(eval(n, {&x})[0].type.shape, (Shape{2}));
  Initializer tie = floats({2, 2}, {2, 2, 3, 10});
  Node last = make_node("ArgMax", 1);
  last.attrs["axis"] = int64_t{1};
  EXPECT_EQ(eval(last, {&tie})[0].as<int64_t>(), (std::vector<int64_t>{0, 1}));
  last.attrs["select_last_index"] = int64_t{1};
  EXPECT_EQ(eval(last, {&tie})[0].as<int64_t>(), (std::vector<int64_t>{1, 1}));
  Node mn = make_node("ArgMin", 1);
  mn.attrs["axis"] = int64_t{-1};
  EXPECT_EQ(eval(mn, {&tie})[0].as<int64_t>(), (std::vector<int64_t>{0, 0}));
  mn.attrs["select_last_index"] = int64_t{1};
  EXPECT_EQ(eval(mn, {&tie})[0].as<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(OrderingCompiled, ArgMaxArgMin) {
  std::mt19937_64 rng(21);
  for (const char* op : {"ArgMax", "ArgMin"})
    for (Shape s : {Shape{37}, Shape{3, 17}, Shape{2, 5, 19}, Shape{4, 1, 33}})
      for (int64_t axis = -static_cast<int64_t>(s.size()); axis < 0; ++axis)
        for (int64_t keep : {0, 1})
          for (int64_t last : {0, 1}) {
            Node n = make_node(op, 1);
            n.attrs["axis"] = axis;
            n.attrs["keepdims"] = keep;
            n.attrs["select_last_index"] = last;
            Initializer x = tied_floats(s, rng);
            check_node(n, {&x});
            Initializer xi = random_tensor("int64", s, rng, -5, 5);
            check_node(n, {&xi});
          }
}

// ---- Hardmax -----------------------------------------------------------------------

TEST(OrderingEval, Hardmax) {
  Initializer x = floats({4, 4}, {3, 0, 1, 2, 2, 5, 1, 0, 0, 1, 3, 2, 0, 1, 2, 3});
  EXPECT_EQ(eval(make_node("Hardmax", 1), {&x})[0].as<float>(),
            (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  Initializer tie = floats({1, 4}, {2, 2, 2, 1});  // the first maximum
  EXPECT_EQ(eval(make_node("Hardmax", 1), {&tie})[0].as<float>(), (std::vector<float>{1, 0, 0, 0}));
  Node a0 = make_node("Hardmax", 1);
  a0.attrs["axis"] = int64_t{0};
  EXPECT_EQ(eval(a0, {&x})[0].as<float>(),
            (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
}

TEST(OrderingCompiled, Hardmax) {
  std::mt19937_64 rng(22);
  for (Shape s : {Shape{37}, Shape{3, 17}, Shape{2, 5, 19}, Shape{4, 3, 33}})
    for (int64_t axis = -static_cast<int64_t>(s.size()); axis < static_cast<int64_t>(s.size());
         ++axis) {
      Node n = make_node("Hardmax", 1);
      n.attrs["axis"] = axis;
      Initializer x = tied_floats(s, rng);
      check_node(n, {&x});
    }
}

// ---- CumSum --------------------------------------------------------------------------

TEST(OrderingEval, CumSum) {
  Initializer x = floats({5}, {1, 2, 3, 4, 5});
  Initializer axis = ints({}, {0});
  auto run = [&](int64_t exclusive, int64_t reverse) {
    Node n = make_node("CumSum", 2);
    n.attrs["exclusive"] = exclusive;
    n.attrs["reverse"] = reverse;
    return eval(n, {&x, &axis})[0].as<float>();
  };
  EXPECT_EQ(run(0, 0), (std::vector<float>{1, 3, 6, 10, 15}));
  EXPECT_EQ(run(1, 0), (std::vector<float>{0, 1, 3, 6, 10}));
  EXPECT_EQ(run(0, 1), (std::vector<float>{15, 14, 12, 9, 5}));
  EXPECT_EQ(run(1, 1), (std::vector<float>{14, 12, 9, 5, 0}));
  Initializer m = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Initializer a1 = ints({1}, {-1});
  EXPECT_EQ(eval(make_node("CumSum", 2), {&m, &a1})[0].as<float>(),
            (std::vector<float>{1, 3, 6, 4, 9, 15}));
  Initializer a0 = ints({1}, {0});
  EXPECT_EQ(eval(make_node("CumSum", 2), {&m, &a0})[0].as<float>(),
            (std::vector<float>{1, 2, 3, 5, 7, 9}));
}

TEST(OrderingCompiled, CumSum) {
  std::mt19937_64 rng(23);
  for (Shape s : {Shape{1}, Shape{37}, Shape{3, 17}, Shape{2, 64, 19}, Shape{4, 3, 33}})
    for (int64_t axis = -static_cast<int64_t>(s.size()); axis < static_cast<int64_t>(s.size());
         ++axis)
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1}) {
          Node n = make_node("CumSum", 2);
          n.attrs["exclusive"] = exclusive;
          n.attrs["reverse"] = reverse;
          Initializer a = ints({}, {axis});
          Initializer x = random_tensor("float32", s, rng);
          check_node(n, {&x, &a}, 1e-5);
          Initializer xi = random_tensor("int64", s, rng, -1000, 1000);
          check_node(n, {&xi, &a});            // integers: exact
          if (exclusive != reverse) continue;  // int32 as well, in half the cases
          Initializer x32 = random_tensor("int32", s, rng, -1000, 1000);
          check_node(n, {&x32, &a});
        }
}

// ---- TopK ------------------------------------------------------------------------------

TEST(OrderingEval, TopK) {
  Initializer x = floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Initializer k = ints({1}, {3});
  auto y = eval(make_node("TopK", 2, 2), {&x, &k});
  EXPECT_EQ(y[0].as<float>(), (std::vector<float>{3, 2, 1, 7, 6, 5, 11, 10, 9}));
  EXPECT_EQ(y[1].as<int64_t>(), (std::vector<int64_t>{3, 2, 1, 3, 2, 1, 3, 2, 1}));
  Initializer xs = floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8});
  Node small = make_node("TopK", 2, 2);
  small.attrs["largest"] = int64_t{0};
  y = eval(small, {&xs, &k});
  EXPECT_EQ(y[0].as<float>(), (std::vector<float>{0, 1, 2, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(y[1].as<int64_t>(), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 2, 1}));
  // Ties: the lower index first.
  Initializer tie = floats({5}, {1, 3, 3, 2, 3});
  Initializer k2 = ints({1}, {4});
  y = eval(make_node("TopK", 2, 2), {&tie, &k2});
  EXPECT_EQ(y[0].as<float>(), (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(y[1].as<int64_t>(), (std::vector<int64_t>{1, 2, 4, 3}));
  Initializer big = ints({1}, {6});
  EXPECT_THROW(eval(make_node("TopK", 2, 2), {&tie, &big}), graph::OpError);
}

TEST(OrderingCompiled, TopK) {
  std::mt19937_64 rng(24);
  for (Shape s : {Shape{1}, Shape{37}, Shape{3, 17}, Shape{2, 64, 3}, Shape{4, 3, 33}})
    for (int64_t axis = -static_cast<int64_t>(s.size()); axis < 0; ++axis) {
      const int64_t n = s[static_cast<size_t>(axis + static_cast<int64_t>(s.size()))];
      for (int64_t k : {int64_t{1}, std::min<int64_t>(3, n), n})
        for (int64_t largest : {0, 1}) {
          Node node = make_node("TopK", 2, 2);
          node.attrs["axis"] = axis;
          node.attrs["largest"] = largest;
          Initializer kk = ints({1}, {k});
          Initializer x = tied_floats(s, rng);
          check_node(node, {&x, &kk});
          if (largest == 0) continue;  // distinct values: one direction is enough
          Initializer xf = random_tensor("float32", s, rng);
          check_node(node, {&xf, &kk});
        }
    }
  Initializer xi = random_tensor("int64", {5, 100}, rng, -20, 20);
  Initializer k = ints({1}, {10});
  check_node(make_node("TopK", 2, 2), {&xi, &k});
}

}  // namespace
}  // namespace kiln
