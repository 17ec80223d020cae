// Indexing operators (graph/ops/indexing.cc): evaluate() against the ONNX
// spec's examples, then compute() (through the registry's compute, the
// generic schedule and the JIT) against evaluate() over shapes, dtypes and
// attributes; constant indices out of range fail the build, run-time ones
// stay in bounds.
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

// Random int64 indices in [-dim, dim).
Initializer random_indices(Shape shape, int64_t dim, std::mt19937_64& rng) {
  return random_tensor("int64", std::move(shape), rng, static_cast<double>(-dim),
                       static_cast<double>(dim - 1));
}

// ---- Size, EyeLike, Trilu -------------------------------------------------------------

TEST(IndexingEval, SizeAndEyeLike) {
  std::mt19937_64 rng(1);
  Initializer x = random_tensor("float32", {2, 3, 4}, rng);
  auto s = eval(make_node("Size", 1), {&x});
  EXPECT_EQ(s[0].type, (graph::TensorType{"int64", {}}));
  EXPECT_EQ(s[0].as<int64_t>(), (std::vector<int64_t>{24}));

  Initializer m = floats({3, 4}, std::vector<float>(12, 5.0f));
  Node e = make_node("EyeLike", 1);
  e.attrs["k"] = int64_t{1};
  EXPECT_EQ(eval(e, {&m})[0].as<float>(), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  e.attrs["k"] = int64_t{-2};
  e.attrs["dtype"] = int64_t{7};  // int64
  auto ei = eval(e, {&m});
  EXPECT_EQ(ei[0].type.dtype, "int64");
  EXPECT_EQ(ei[0].as<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  Initializer r3 = floats({1, 2, 2}, {1, 2, 3, 4});
  EXPECT_THROW(eval(make_node("EyeLike", 1), {&r3}), graph::OpError);
}

// The ONNX spec's Trilu example.
TEST(IndexingEval, Trilu) {
  Initializer x = ints({4, 5}, {4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 9, 4, 0, 8, 7, 4, 3, 4, 2, 4});
  Node up = make_node("Trilu", 1);
  EXPECT_EQ(eval(up, {&x})[0].as<int64_t>(),
            (std::vector<int64_t>{4, 7, 3, 7, 9, 0, 2, 8, 6, 9, 0, 0, 0, 8, 7, 0, 0, 0, 2, 4}));
  Node lo = make_node("Trilu", 2);
  lo.attrs["upper"] = int64_t{0};
  Initializer k = ints({}, {-1});
  EXPECT_EQ(eval(lo, {&x, &k})[0].as<int64_t>(),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9, 4, 0, 0, 0, 4, 3, 4, 0, 0}));
  k = ints({}, {2});
  EXPECT_EQ(eval(up, {&x, &k})[0].as<int64_t>(),
            (std::vector<int64_t>{0, 0, 3, 7, 9, 0, 0, 0, 6, 9, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0}));
}

TEST(IndexingCompiled, SizeEyeLikeTrilu) {
  std::mt19937_64 rng(7);
  Initializer x = random_tensor("float32", {3, 17, 5}, rng);
  check_node(make_node("Size", 1), {&x});
  for (Shape s : {Shape{5, 19}, Shape{17, 3}, Shape{1, 1}})
    for (int64_t k : {0, 2, -3}) {
      Initializer m = random_tensor("float32", s, rng);
      Node e = make_node("EyeLike", 1);
      e.attrs["k"] = k;
      check_node(e, {&m});
      e.attrs["dtype"] = int64_t{6};  // int32
      check_node(e, {&m});
    }
  for (Shape s : {Shape{2, 5, 19}, Shape{17, 3}, Shape{3, 2, 4, 33}})
    for (int64_t upper : {0, 1})
      for (int64_t k : {0, 1, -2, 40}) {
        Initializer m = random_tensor("float32", s, rng);
        Initializer kk = ints({}, {k});
        Node t = make_node("Trilu", 2);
        t.attrs["upper"] = upper;
        check_node(t, {&m, &kk});
      }
  Initializer xi = random_tensor("int64", {4, 9}, rng, -100, 100);
  check_node(make_node("Trilu", 1), {&xi});
}

// ---- OneHot -------------------------------------------------------------------------

TEST(IndexingEval, OneHot) {
  // The spec's negative indices example: -7 and -8 wrap to 3 and 2.
  Initializer idx = ints({3}, {0, -7, -8});
  Initializer depth = floats({}, {10});
  Initializer values = floats({2}, {1, 3});
  auto y = eval(make_node("OneHot", 3), {&idx, &depth, &values});
  ASSERT_EQ(y[0].type.shape, (Shape{3, 10}));
  std::vector<float> want(30, 1);
  want[0] = want[13] = want[22] = 3;
  EXPECT_EQ(y[0].as<float>(), want);
  // axis 0 and an index out of range (all off-values).
  Node ax = make_node("OneHot", 3);
  ax.attrs["axis"] = int64_t{0};
  Initializer idx2 = ints({2}, {1, 5});
  Initializer d3 = ints({1}, {3});
  Initializer v2 = ints({2}, {0, 1});
  EXPECT_EQ(eval(ax, {&idx2, &d3, &v2})[0].as<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
  Initializer bad_depth = ints({1}, {0});
  EXPECT_THROW(eval(ax, {&idx2, &bad_depth, &v2}), graph::OpError);
}

TEST(IndexingCompiled, OneHot) {
  std::mt19937_64 rng(11);
  for (Shape s : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}})
    for (int64_t axis : {0, -1, 1})
      for (int64_t depth : {1, 5, 17}) {
        Initializer idx = random_tensor("int64", s, rng, -depth - 2, depth + 2);  // some outside
        Initializer d = ints({}, {depth});
        Initializer v = floats({2}, {-0.5f, 2.0f});
        Node n = make_node("OneHot", 3);
        n.attrs["axis"] = axis;
        check_node(n, {&idx, &d, &v});
      }
  Initializer fidx = floats({4}, {1.0f, 2.7f, -1.0f, 9.0f});
  Initializer d = floats({}, {4});
  Initializer v = ints({2}, {5, 9});
  check_node(make_node("OneHot", 3), {&fidx, &d, &v});
}

// ---- GatherElements, GatherND ----------------------------------------------------------

TEST(IndexingEval, GatherElements) {
  Initializer d1 = floats({2, 2}, {1, 2, 3, 4});
  Initializer i1 = ints({2, 2}, {0, 0, 1, 0});
  Node n = make_node("GatherElements", 2);
  n.attrs["axis"] = int64_t{1};
  EXPECT_EQ(eval(n, {&d1, &i1})[0].as<float>(), (std::vector<float>{1, 1, 4, 3}));
  Initializer d2 = floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Initializer i2 = ints({2, 3}, {1, 2, 0, 2, 0, 0});
  Node n0 = make_node("GatherElements", 2);
  EXPECT_EQ(eval(n0, {&d2, &i2})[0].as<float>(), (std::vector<float>{4, 8, 3, 7, 2, 3}));
  Initializer neg = ints({2, 3}, {-1, -2, 0, -2, 0, 0});
  EXPECT_EQ(eval(n0, {&d2, &neg})[0].as<float>(), (std::vector<float>{7, 5, 3, 4, 2, 3}));
  Initializer bad = ints({2, 3}, {3, 0, 0, 0, 0, 0});
  EXPECT_THROW(eval(n0, {&d2, &bad}), graph::OpError);
}

TEST(IndexingEval, GatherND) {
  Node n = make_node("GatherND", 2);
  Initializer d = ints({2, 2}, {0, 1, 2, 3});
  Initializer i = ints({2, 2}, {0, 0, 1, 1});
  EXPECT_EQ(eval(n, {&d, &i})[0].as<int64_t>(), (std::vector<int64_t>{0, 3}));
  i = ints({2, 1}, {1, 0});
  EXPECT_EQ(eval(n, {&d, &i})[0].as<int64_t>(), (std::vector<int64_t>{2, 3, 0, 1}));
  Initializer d3 = ints({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  i = ints({2, 2}, {0, 1, 1, 0});
  EXPECT_EQ(eval(n, {&d3, &i})[0].as<int64_t>(), (std::vector<int64_t>{2, 3, 4, 5}));
  i = ints({2, 1, 2}, {0, 1, 1, 0});
  auto y = eval(n, {&d3, &i});
  EXPECT_EQ(y[0].type.shape, (Shape{2, 1, 2}));
  EXPECT_EQ(y[0].as<int64_t>(), (std::vector<int64_t>{2, 3, 4, 5}));
  Node b = make_node("GatherND", 2);
  b.attrs["batch_dims"] = int64_t{1};
  i = ints({2, 1}, {1, 0});
  y = eval(b, {&d3, &i});
  EXPECT_EQ(y[0].type.shape, (Shape{2, 2}));
  EXPECT_EQ(y[0].as<int64_t>(), (std::vector<int64_t>{2, 3, 4, 5}));
  i = ints({2, 1}, {2, 0});
  EXPECT_THROW(eval(b, {&d3, &i}), graph::OpError);
}

TEST(IndexingCompiled, GatherElementsAndND) {
  std::mt19937_64 rng(3);
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  for (Case c : {Case{{5, 19}, {5, 7}, 1}, Case{{4, 3, 17}, {6, 3, 17}, -3},
                 Case{{3, 8, 5}, {2, 8, 9}, -1}, Case{{33}, {40}, 0}}) {
    Initializer x = random_tensor("float32", c.data, rng);
    int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
    Initializer i = random_indices(c.indices, c.data[a], rng);
    Node n = make_node("GatherElements", 2);
    n.attrs["axis"] = c.axis;
    check_node(n, {&x, &i});
    Initializer i32 = random_tensor("int32", c.indices, rng, static_cast<double>(-c.data[a]),
                                    static_cast<double>(c.data[a] - 1));
    check_node(n, {&x, &i32});  // int32 indices
  }
  struct NdCase {
    Shape data, indices;
    int64_t batch_dims;
  };
  for (NdCase c :
       {NdCase{{5, 19}, {7, 2}, 0}, NdCase{{4, 6, 17}, {3, 1}, 0}, NdCase{{4, 6, 17}, {4, 5, 2}, 1},
        NdCase{{2, 3, 4, 9}, {2, 3, 1}, 2}, NdCase{{3, 5, 7}, {2, 2, 3}, 0}}) {
    Initializer x = random_tensor("float32", c.data, rng);
    // Indices in range of the smallest addressed dim, so one draw fits every coordinate.
    int64_t dim = *std::min_element(c.data.begin() + c.batch_dims, c.data.end());
    Initializer i = random_indices(c.indices, dim, rng);
    Node n = make_node("GatherND", 2);
    n.attrs["batch_dims"] = c.batch_dims;
    check_node(n, {&x, &i});
  }
}

// ---- ScatterElements, ScatterND ------------------------------------------------------------

TEST(IndexingEval, ScatterElements) {
  Initializer d = floats({3, 3}, std::vector<float>(9, 0));
  Initializer i = ints({2, 3}, {1, 0, 2, 0, 2, 1});
  Initializer u = floats({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  EXPECT_EQ(eval(make_node("ScatterElements", 3), {&d, &i, &u})[0].as<float>(),
            (std::vector<float>{2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f}));
  Initializer d1 = floats({1, 5}, {1, 2, 3, 4, 5});
  Initializer i1 = ints({1, 2}, {1, 3});
  Initializer u1 = floats({1, 2}, {1.1f, 2.1f});
  Node ax = make_node("ScatterElements", 3);
  ax.attrs["axis"] = int64_t{1};
  EXPECT_EQ(eval(ax, {&d1, &i1, &u1})[0].as<float>(), (std::vector<float>{1, 1.1f, 3, 2.1f, 5}));
  Initializer dup = ints({1, 2}, {1, 1});
  ax.attrs["reduction"] = std::string("add");
  EXPECT_EQ(eval(ax, {&d1, &dup, &u1})[0].as<float>(),
            (std::vector<float>{1, 2 + 1.1f + 2.1f, 3, 4, 5}));
  ax.attrs["reduction"] = std::string("mul");
  EXPECT_EQ(eval(ax, {&d1, &dup, &u1})[0].as<float>(),
            (std::vector<float>{1, 2 * 1.1f * 2.1f, 3, 4, 5}));
  ax.attrs["reduction"] = std::string("sub");
  EXPECT_THROW(eval(ax, {&d1, &dup, &u1}), graph::OpError);
}

TEST(IndexingEval, ScatterND) {
  Initializer d = floats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Initializer i = ints({4, 1}, {4, 3, 1, 7});
  Initializer u = floats({4}, {9, 10, 11, 12});
  EXPECT_EQ(eval(make_node("ScatterND", 3), {&d, &i, &u})[0].as<float>(),
            (std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12}));
  Node add = make_node("ScatterND", 3);
  add.attrs["reduction"] = std::string("add");
  Initializer dup = ints({2, 1}, {0, 0});
  Initializer u2 = floats({2}, {5, 6});
  EXPECT_EQ(eval(add, {&d, &dup, &u2})[0].as<float>(),
            (std::vector<float>{12, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(IndexingCompiled, ScatterElements) {
  std::mt19937_64 rng(5);
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  for (const char* red : {"none", "add", "mul", "max", "min"})
    for (Case c : {Case{{5, 19}, {5, 7}, 1}, Case{{4, 3, 17}, {2, 3, 17}, -3},
                   Case{{3, 8, 5}, {2, 5, 3}, -1}, Case{{33}, {9}, 0}}) {
      int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
      Initializer x = random_tensor("int64", c.data, rng, -9, 9);
      Initializer i = random_indices(c.indices, c.data[a], rng);
      Initializer u = random_tensor("int64", c.indices, rng, -9, 9);
      Node n = make_node("ScatterElements", 3);
      n.attrs["axis"] = c.axis;
      n.attrs["reduction"] = std::string(red);
      check_node(n, {&x, &i, &u});
      Initializer xf = random_tensor("float32", c.data, rng);
      Initializer uf = random_tensor("float32", c.indices, rng);
      check_node(n, {&xf, &i, &uf});
    }
}

TEST(IndexingCompiled, ScatterND) {
  std::mt19937_64 rng(9);
  struct Case {
    Shape data, indices;
  };
  for (const char* red : {"none", "add", "mul"})
    for (Case c : {Case{{8}, {4, 1}}, Case{{4, 5, 19}, {3, 2}}, Case{{4, 5, 3}, {2, 2, 3}},
                   Case{{6, 17}, {5, 1}}, Case{{3, 4}, {1, 0}}}) {
      int64_t k = c.indices.back();
      int64_t dim = k == 0 ? 1 : *std::min_element(c.data.begin(), c.data.begin() + k);
      Shape us(c.indices.begin(), c.indices.end() - 1);
      us.insert(us.end(), c.data.begin() + k, c.data.end());
      Initializer x = random_tensor("float32", c.data, rng);
      Initializer i = random_indices(c.indices, dim, rng);
      Initializer u = random_tensor("float32", us, rng);
      Node n = make_node("ScatterND", 3);
      n.attrs["reduction"] = std::string(red);
      check_node(n, {&x, &i, &u});
    }
}

// ---- ReverseSequence ----------------------------------------------------------------

TEST(IndexingEval, ReverseSequence) {
  // The spec's examples: time-major, then batch-major.
  Initializer t = ints({4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
  Initializer lens = ints({4}, {4, 3, 2, 1});
  Node n = make_node("ReverseSequence", 2);
  EXPECT_EQ(eval(n, {&t, &lens})[0].as<int64_t>(),
            (std::vector<int64_t>{3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
  Initializer x = ints({4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Node b = make_node("ReverseSequence", 2);
  b.attrs["batch_axis"] = int64_t{0};
  b.attrs["time_axis"] = int64_t{1};
  lens = ints({4}, {1, 2, 3, 4});
  EXPECT_EQ(eval(b, {&x, &lens})[0].as<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}));
  lens = ints({4}, {1, 2, 3, 5});
  EXPECT_THROW(eval(b, {&x, &lens}), graph::OpError);
}

TEST(IndexingCompiled, ReverseSequence) {
  std::mt19937_64 rng(13);
  for (Shape s : {Shape{7, 3}, Shape{5, 4, 19}, Shape{9, 2, 3, 5}})
    for (int64_t time : {0, 1}) {
      Initializer x = random_tensor("float32", s, rng);
      int64_t batch = 1 - time;
      Initializer lens = random_tensor("int64", {s[batch]}, rng, 0, static_cast<double>(s[time]));
      Node n = make_node("ReverseSequence", 2);
      n.attrs["time_axis"] = time;
      n.attrs["batch_axis"] = batch;
      check_node(n, {&x, &lens});
    }
}

// ---- indices out of range ----------------------------------------------------------------

// A constant index out of range fails the build: compute checks it.
TEST(IndexingErrors, ConstantIndexOutOfRangeFailsCompute) {
  const graph::OpDef& def = graph::get_op("GatherElements");
  Node n = make_node("GatherElements", 2);
  ir::Tensor x =
      ir::placeholder({ir::Expr(int64_t{3}), ir::Expr(int64_t{4})}, ir::DataType::f32(), "x");
  ir::Tensor i =
      ir::placeholder({ir::Expr(int64_t{1}), ir::Expr(int64_t{4})}, ir::DataType::i64(), "i");
  Initializer bad = ints({1, 4}, {0, 1, 3, 2});  // 3 is outside axis 0 of size 3
  graph::ComputeInputs in{{x, i}, {nullptr, &bad}};
  try {
    def.compute(n, in, {{"float32", {1, 4}}});
    FAIL() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("GatherElements_test"), std::string::npos) << e.what();
  }
  Initializer good = ints({1, 4}, {0, 1, -3, 2});
  graph::ComputeInputs ok{{x, i}, {nullptr, &good}};
  EXPECT_NO_THROW(def.compute(n, ok, {{"float32", {1, 4}}}));

  const graph::OpDef& sdef = graph::get_op("ScatterND");
  Node s = make_node("ScatterND", 3);
  ir::Tensor si =
      ir::placeholder({ir::Expr(int64_t{1}), ir::Expr(int64_t{1})}, ir::DataType::i64(), "si");
  ir::Tensor su =
      ir::placeholder({ir::Expr(int64_t{1}), ir::Expr(int64_t{4})}, ir::DataType::f32(), "su");
  Initializer sbad = ints({1, 1}, {-4});
  graph::ComputeInputs sin{{x, si, su}, {nullptr, &sbad, nullptr}};
  EXPECT_THROW(sdef.compute(s, sin, {{"float32", {3, 4}}}), graph::OpError);
}

// A run-time index out of range fails the kernel with
// KILN_STATUS_INDEX_OUT_OF_RANGE, and never reads out of bounds: the read is
// clamped into the axis. ReverseSequence's lengths are clamped into [0, T].
TEST(IndexingErrors, RuntimeIndexOutOfRangeFailsTheKernel) {
  Initializer x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Initializer i = ints({2, 3}, {0, 1000000, -1000000, 1, -1, 1});
  Node g = make_node("GatherElements", 2);
  g.attrs["axis"] = int64_t{1};
  auto got =
      test::run_compiled_as(g, {&x, &i}, {{"float32", {2, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(got[0].as<float>(), (std::vector<float>{1, 3, 1, 5, 6, 5}));  // clamped reads

  Node s = make_node("ScatterElements", 3);
  s.attrs["axis"] = int64_t{1};
  Initializer u = floats({2, 3}, {10, 20, 30, 40, 50, 60});
  test::run_compiled_as(s, {&x, &i, &u}, {{"float32", {2, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);

  Initializer lens = ints({3}, {7, -2, 1});
  Node r = make_node("ReverseSequence", 2);
  auto rs = test::run_compiled_as(r, {&x, &lens}, {{"float32", {2, 3}}});
  EXPECT_EQ(rs[0].as<float>(), (std::vector<float>{4, 2, 3, 1, 5, 6}));

  // OneHot: out of range is no error (ONNX: a row of off-values).
  Initializer oh = ints({2}, {7, -9});
  Initializer depth = ints({}, {5});
  Initializer values = floats({2}, {0, 1});
  auto o =
      test::run_compiled_as(make_node("OneHot", 3), {&oh, &depth, &values}, {{"float32", {2, 5}}});
  EXPECT_EQ(o[0].as<float>(), std::vector<float>(10, 0.f));
}

// Every indexing operator on an axis of 5: 7 and -9 fail the kernel, -5 and
// 4 (the first and the last element) are read.
TEST(IndexingErrors, RuntimeIndexOnAnAxisOfFive) {
  std::mt19937_64 rng(65);
  Initializer x = random_tensor("float32", {5, 3}, rng);
  for (int64_t bad : {int64_t{7}, int64_t{-9}, int64_t{5}, int64_t{-6}}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Initializer i = ints({1, 3}, {0, bad, 1});
    Node g = make_node("Gather", 2);
    test::run_compiled_as(g, {&x, &i}, {{"float32", {1, 3, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
    Node ge = make_node("GatherElements", 2);
    test::run_compiled_as(ge, {&x, &i}, {{"float32", {1, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
    Initializer t = ints({3, 1}, {0, bad, 1});
    Node nd = make_node("GatherND", 2);
    test::run_compiled_as(nd, {&x, &t}, {{"float32", {3, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
    Initializer u = random_tensor("float32", {1, 3}, rng);
    Node se = make_node("ScatterElements", 3);
    test::run_compiled_as(se, {&x, &i, &u}, {{"float32", {5, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
    Initializer un = random_tensor("float32", {3, 3}, rng);
    Node sn = make_node("ScatterND", 3);
    test::run_compiled_as(sn, {&x, &t, &un}, {{"float32", {5, 3}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
  }
  Initializer i = ints({1, 3}, {-5, 4, 2});
  Initializer t = ints({3, 1}, {-5, 4, 2});
  Initializer u = random_tensor("float32", {1, 3}, rng);
  Initializer un = random_tensor("float32", {3, 3}, rng);
  check_node(make_node("Gather", 2), {&x, &i});
  check_node(make_node("GatherElements", 2), {&x, &i});
  check_node(make_node("GatherND", 2), {&x, &t});
  check_node(make_node("ScatterElements", 3), {&x, &i, &u});
  check_node(make_node("ScatterND", 3), {&x, &t, &un});
}

// An axis of one: the clamp of the read into [0, 0] is a constant, and the
// check must survive it (1 and -2 fail the kernel; 0 and -1 read element 0).
TEST(IndexingErrors, RuntimeIndexOnAnAxisOfOne) {
  std::mt19937_64 rng(69);
  Initializer x = random_tensor("float32", {1, 3}, rng);
  for (int64_t bad : {int64_t{1}, int64_t{-2}}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    Initializer i = ints({1, 3}, {0, bad, -1});
    test::run_compiled_as(make_node("Gather", 2), {&x, &i}, {{"float32", {1, 3, 3}}},
                          KILN_STATUS_INDEX_OUT_OF_RANGE);
    test::run_compiled_as(make_node("GatherElements", 2), {&x, &i}, {{"float32", {1, 3}}},
                          KILN_STATUS_INDEX_OUT_OF_RANGE);
  }
  Initializer i = ints({1, 3}, {0, -1, 0});
  check_node(make_node("Gather", 2), {&x, &i});
  check_node(make_node("GatherElements", 2), {&x, &i});
}

// Vectorized gathers along the contiguous axis: the lanes of a partial
// vector (19 = 2 x 8 + 3, or 16 + 3) that lie past the end never report an
// index, and a bad index in the tail is found.
TEST(IndexingErrors, RuntimeIndexCheckInVectorTail) {
  std::mt19937_64 rng(66);
  Initializer x = random_tensor("float32", {4, 19}, rng);
  Initializer i = random_tensor("int64", {4, 19}, rng, -19, 18);
  Node g = make_node("GatherElements", 2);
  g.attrs["axis"] = int64_t{1};
  check_node(g, {&x, &i});
  for (size_t at : {size_t{0}, size_t{18}, size_t{4 * 19 - 1}}) {
    std::vector<int64_t> v = i.as<int64_t>();
    v[at] = 19;
    Initializer bad = ints({4, 19}, v);
    test::run_compiled_as(g, {&x, &bad}, {{"float32", {4, 19}}}, KILN_STATUS_INDEX_OUT_OF_RANGE);
  }
}

// A constant Gather index out of range fails the build naming the node, the
// index and the axis (Gather is checked like the other indexing operators).
TEST(IndexingErrors, ConstantGatherIndexOutOfRange) {
  const graph::OpDef& def = graph::get_op("Gather");
  Node n = make_node("Gather", 2);
  ir::Tensor x =
      ir::placeholder({ir::Expr(int64_t{5}), ir::Expr(int64_t{3})}, ir::DataType::f32(), "x");
  ir::Tensor i = ir::placeholder({ir::Expr(int64_t{1})}, ir::DataType::i64(), "i");
  Initializer bad = ints({1}, {99});
  graph::ComputeInputs in{{x, i}, {nullptr, &bad}};
  try {
    def.compute(n, in, {{"float32", {1, 3}}});
    FAIL() << "no error";
  } catch (const graph::OpError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("Gather_test"), std::string::npos) << what;
    EXPECT_NE(what.find("index 99 is out of range for axis 0 of size 5"), std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace kiln
