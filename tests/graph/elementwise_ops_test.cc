// Elementwise operators: evaluate() against hand-computed values and an
// independent naive broadcasting reference, then compute() (through the JIT)
// against evaluate() over shape and attribute sweeps.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
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

Initializer bools(Shape shape, const std::vector<int>& v) {
  Initializer t = test::make_tensor("bool", std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data[i] = static_cast<uint8_t>(v[i]);
  return t;
}

template <typename T>
std::vector<T> values(const Initializer& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

const std::vector<Shape> kShapes = {{},         {1},           {17},           {3, 5},
                                    {2, 3, 33}, {2, 1, 3, 19}, {1, 2, 3, 2, 5}};

// Naive numpy broadcasting, written independently of the operator code: the
// flat offset of output element o in an input of shape `in`.
int64_t bcast_offset(int64_t o, const Shape& out, const Shape& in) {
  int64_t off = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1, k = static_cast<int64_t>(in.size()) - 1;
       k >= 0; --d, --k) {
    int64_t div = 1;
    for (int64_t j = d + 1; j < static_cast<int64_t>(out.size()); ++j) div *= out[j];
    int64_t coord = (o / div) % out[d];
    if (in[k] != 1) off += coord * stride;
    stride *= in[k];
  }
  return off;
}

// Compiles `node` the way a kernel builder does when some inputs are graph
// constants: their values in ComputeInputs::constants, their tensors still
// present, and only the placeholders the outputs read as kernel arguments.
std::vector<Initializer> run_with_constants(const Node& node,
                                            const std::vector<const Initializer*>& inputs,
                                            const std::vector<bool>& is_const) {
  const graph::OpDef& def = graph::get_op(node.op_type);
  auto want = def.evaluate(node, inputs);
  std::vector<graph::TensorType> out_types;
  for (auto& w : want) out_types.push_back(w.type);
  graph::ComputeInputs in;
  std::map<const ir::TensorNode*, const Initializer*> data;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::Tensor p =
        ir::placeholder(test::shape_exprs(inputs[i]->type.shape),
                        ir::DataType::parse(inputs[i]->type.dtype), "in" + std::to_string(i));
    in.tensors.push_back(p);
    in.constants.push_back(is_const[i] ? inputs[i] : nullptr);
    data[p.get()] = inputs[i];
  }
  auto outs = def.compute(node, in, out_types);
  std::vector<ir::Tensor> args;
  std::vector<void*> ptrs;
  std::vector<std::vector<uint8_t>> copies;
  for (auto& t : ir::post_order(outs)) {
    if (!t->is_placeholder) continue;
    args.push_back(t);
    copies.push_back(data.at(t.get())->data);
    copies.back().resize(copies.back().size() + 64);
  }
  for (auto& c : copies) ptrs.push_back(c.data());
  std::vector<Initializer> got;
  for (auto& t : out_types) got.push_back(test::make_tensor(t.dtype, t.shape));
  for (auto& o : outs) args.push_back(o);
  for (auto& g : got) ptrs.push_back(g.data.data());
  auto f = schedule::lower(ops::schedule_generic(outs, codegen::Target::host().float_lanes()), args,
                           "with_constants");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  EXPECT_EQ(mod->get_function("with_constants")(ptrs.data()), 0);
  for (size_t i = 0; i < want.size(); ++i) test::expect_same(got[i], want[i], 2e-6, node.op_type);
  return got;
}

// ---- evaluate against hand-written values -----------------------------------------

TEST(ElementwiseEval, AddBroadcast213With41) {
  Initializer a = tensor_of<float>({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Initializer b = tensor_of<float>({4, 1}, {10, 20, 30, 40});
  auto out = eval(make_node("Add", 2), {&a, &b});
  ASSERT_EQ(out[0].type.shape, (Shape{2, 4, 3}));
  std::vector<float> want = {11, 12, 13, 21, 22, 23, 31, 32, 33, 41, 42, 43,
                             14, 15, 16, 24, 25, 26, 34, 35, 36, 44, 45, 46};
  EXPECT_EQ(values<float>(out[0]), want);
}

TEST(ElementwiseEval, BinaryOpsMatchNaiveBroadcast) {
  std::mt19937_64 rng(1);
  std::vector<std::pair<Shape, Shape>> pairs = {
      {{3, 4}, {4}}, {{2, 1, 5}, {3, 1}}, {{}, {2, 3}}, {{1, 4, 1}, {5, 1, 1, 6}}};
  std::map<std::string, std::function<float(float, float)>> ops = {
      {"Add", [](float a, float b) { return a + b; }},
      {"Sub", [](float a, float b) { return a - b; }},
      {"Mul", [](float a, float b) { return a * b; }},
      {"Div", [](float a, float b) { return a / b; }}};
  for (auto& [sa, sb] : pairs) {
    Initializer a = random_tensor("float32", sa, rng),
                b = random_tensor("float32", sb, rng, 0.5, 2);
    for (auto& [op, f] : ops) {
      auto out = eval(make_node(op, 2), {&a, &b});
      auto av = values<float>(a), bv = values<float>(b), ov = values<float>(out[0]);
      const Shape& os = out[0].type.shape;
      ASSERT_EQ(ov.size(), static_cast<size_t>(out[0].type.num_elements()));
      for (size_t o = 0; o < ov.size(); ++o)
        ASSERT_EQ(ov[o], f(av[bcast_offset(o, os, sa)], bv[bcast_offset(o, os, sb)])) << op;
    }
  }
}

TEST(ElementwiseEval, IntegerArithmetic) {
  Initializer a = tensor_of<int64_t>({4}, {-7, 7, -7, 9});
  Initializer b = tensor_of<int64_t>({4}, {2, -2, -2, 3});
  EXPECT_EQ(values<int64_t>(eval(make_node("Div", 2), {&a, &b})[0]),
            (std::vector<int64_t>{-3, -3, 3, 3}));
  EXPECT_EQ(values<int64_t>(eval(make_node("Add", 2), {&a, &b})[0]),
            (std::vector<int64_t>{-5, 5, -9, 12}));
  EXPECT_EQ(values<int64_t>(eval(make_node("Mul", 2), {&a, &b})[0]),
            (std::vector<int64_t>{-14, -14, 14, 27}));
  Initializer s = tensor_of<int64_t>({}, {3});
  EXPECT_EQ(values<int64_t>(eval(make_node("Sub", 2), {&a, &s})[0]),
            (std::vector<int64_t>{-10, 4, -10, 6}));
  Initializer z = tensor_of<int64_t>({}, {0});
  EXPECT_THROW(eval(make_node("Div", 2), {&a, &z}), graph::OpError);
  Initializer c = tensor_of<int32_t>({2}, {-5, 5});
  Initializer d = tensor_of<int32_t>({2}, {3, 3});
  EXPECT_EQ(values<int32_t>(eval(make_node("Div", 2), {&c, &d})[0]), (std::vector<int32_t>{-1, 1}));
}

// Integer Div and Mod in a kernel never trap (x86's idiv raises SIGFPE on a
// zero divisor and on INT_MIN / -1): a zero divisor gives 0, -1 gives the
// wrapped negation (Div) or 0 (Mod); the reference agrees where it is defined.
template <typename T>
void check_division_without_traps() {
  const T lo = std::numeric_limits<T>::min();
  Initializer a = tensor_of<T>({6}, {lo, 7, 7, -7, -7, lo});
  Initializer b = tensor_of<T>({6}, {-1, -1, 0, 2, -2, 1});
  const std::vector<graph::TensorType> out = {a.type};
  Node div = make_node("Div", 2);
  EXPECT_EQ(values<T>(test::run_compiled_as(div, {&a, &b}, out)[0]),
            (std::vector<T>{lo, -7, 0, -3, 3, lo}));
  Node mod = make_node("Mod", 2);
  EXPECT_EQ(values<T>(test::run_compiled_as(mod, {&a, &b}, out)[0]),
            (std::vector<T>{0, 0, 0, 1, -1, 0}));
  mod.attrs["fmod"] = int64_t{1};
  EXPECT_EQ(values<T>(test::run_compiled_as(mod, {&a, &b}, out)[0]),
            (std::vector<T>{0, 0, 0, -1, -1, 0}));
  // The reference, where the divisor is not zero.
  Initializer a2 = tensor_of<T>({2}, {lo, 9}), b2 = tensor_of<T>({2}, {-1, -1});
  EXPECT_EQ(values<T>(eval(make_node("Div", 2), {&a2, &b2})[0]), (std::vector<T>{lo, -9}));
}

TEST(ElementwiseCompiled, IntegerDivisionNeverTraps) {
  check_division_without_traps<int32_t>();
  check_division_without_traps<int64_t>();
}

TEST(ElementwiseEval, ErrorsNameTheNode) {
  Initializer a = tensor_of<float>({3}, {1, 2, 3}), b = tensor_of<float>({2}, {1, 2});
  try {
    eval(make_node("Add", 2), {&a, &b});
    FAIL() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("Add_test"), std::string::npos) << e.what();
  }
  Initializer i = tensor_of<int64_t>({3}, {1, 2, 3});
  EXPECT_THROW(eval(make_node("Add", 2), {&a, &i}), graph::OpError);  // mixed dtypes
  EXPECT_THROW(eval(make_node("Exp", 1), {&i}), graph::OpError);      // int exp
}

TEST(ElementwiseEval, UnaryAndActivations) {
  Initializer x = tensor_of<float>({5}, {-3, -0.5f, 0, 0.5f, 4});
  auto run = [&](Node n) { return values<float>(eval(n, {&x})[0]); };
  EXPECT_EQ(run(make_node("Relu", 1)), (std::vector<float>{0, 0, 0, 0.5f, 4}));
  EXPECT_EQ(run(make_node("Neg", 1)), (std::vector<float>{3, 0.5f, -0.f, -0.5f, -4}));
  EXPECT_EQ(run(make_node("Abs", 1)), (std::vector<float>{3, 0.5f, 0, 0.5f, 4}));
  Node lr = make_node("LeakyRelu", 1);
  lr.attrs["alpha"] = 0.1f;
  EXPECT_EQ(run(lr), (std::vector<float>{-3 * 0.1f, -0.5f * 0.1f, 0, 0.5f, 4}));
  EXPECT_EQ(run(make_node("LeakyRelu", 1))[0], -3 * 0.01f);
  auto hs = run(make_node("HardSigmoid", 1));  // 0.2x + 0.5 clipped
  std::vector<float> hs_want = {0, 0.4f, 0.5f, 0.6f, 1};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(hs[i], hs_want[i], 1e-7);
  auto hw = run(make_node("HardSwish", 1));  // x * clip(x/6 + 0.5)
  std::vector<float> hw_want = {0, -0.5f * (0.5f - 0.5f / 6), 0, 0.5f * (0.5f + 0.5f / 6), 4};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(hw[i], hw_want[i], 1e-6);
  auto sg = run(make_node("Sigmoid", 1));
  auto th = run(make_node("Tanh", 1));
  auto er = run(make_node("Erf", 1));
  auto ex = run(make_node("Exp", 1));
  for (int i = 0; i < 5; ++i) {
    float v = values<float>(x)[i];
    EXPECT_FLOAT_EQ(sg[i], 1 / (1 + std::exp(-v)));
    EXPECT_FLOAT_EQ(th[i], std::tanh(v));
    EXPECT_FLOAT_EQ(er[i], std::erf(v));
    EXPECT_FLOAT_EQ(ex[i], std::exp(v));
  }
  Initializer p = tensor_of<float>({3}, {4, 0.25f, 2});
  EXPECT_EQ(values<float>(eval(make_node("Sqrt", 1), {&p})[0]),
            (std::vector<float>{2, 0.5f, std::sqrt(2.f)}));
  EXPECT_EQ(values<float>(eval(make_node("Reciprocal", 1), {&p})[0]),
            (std::vector<float>{0.25f, 4, 0.5f}));
  EXPECT_FLOAT_EQ(values<float>(eval(make_node("Log", 1), {&p})[0])[0], std::log(4.f));
  Initializer neg = tensor_of<float>({1}, {-1});
  EXPECT_TRUE(std::isnan(values<float>(eval(make_node("Sqrt", 1), {&neg})[0])[0]));
  Initializer ri = tensor_of<int64_t>({3}, {-2, 0, 5});
  EXPECT_EQ(values<int64_t>(eval(make_node("Relu", 1), {&ri})[0]), (std::vector<int64_t>{0, 0, 5}));
  EXPECT_EQ(values<int64_t>(eval(make_node("Abs", 1), {&ri})[0]), (std::vector<int64_t>{2, 0, 5}));
}

TEST(ElementwiseEval, PowClipMaxMin) {
  Initializer x = tensor_of<float>({3}, {2, 3, 4});
  Initializer two = tensor_of<float>({}, {2});
  Initializer half = tensor_of<float>({}, {0.5f});
  Initializer ie = tensor_of<int64_t>({1}, {3});
  EXPECT_EQ(values<float>(eval(make_node("Pow", 2), {&x, &two})[0]),
            (std::vector<float>{4, 9, 16}));
  EXPECT_EQ(values<float>(eval(make_node("Pow", 2), {&x, &half})[0]),
            (std::vector<float>{std::sqrt(2.f), std::sqrt(3.f), 2}));
  EXPECT_EQ(values<float>(eval(make_node("Pow", 2), {&x, &ie})[0]),
            (std::vector<float>{8, 27, 64}));
  Initializer xi = tensor_of<int64_t>({3}, {2, -3, 5});
  EXPECT_EQ(values<int64_t>(eval(make_node("Pow", 2), {&xi, &ie})[0]),
            (std::vector<int64_t>{8, -27, 125}));

  Initializer c = tensor_of<float>({5}, {-2, -1, 0, 1, 2});
  Initializer lo = tensor_of<float>({}, {-1.5f}), hi = tensor_of<float>({}, {0.5f});
  Node clip = make_node("Clip", 3);
  EXPECT_EQ(values<float>(eval(clip, {&c, &lo, &hi})[0]),
            (std::vector<float>{-1.5f, -1, 0, 0.5f, 0.5f}));
  EXPECT_EQ(values<float>(eval(clip, {&c, nullptr, &hi})[0]),
            (std::vector<float>{-2, -1, 0, 0.5f, 0.5f}));
  EXPECT_EQ(values<float>(eval(make_node("Clip", 1), {&c})[0]), values<float>(c));
  Node old = make_node("Clip", 1);  // opset < 11: attributes
  old.attrs["min"] = 0.0f;
  old.attrs["max"] = 1.0f;
  EXPECT_EQ(values<float>(eval(old, {&c})[0]), (std::vector<float>{0, 0, 0, 1, 1}));
  Initializer ci = tensor_of<int64_t>({3}, {-9, 3, 9}), ilo = tensor_of<int64_t>({}, {0}),
              ihi = tensor_of<int64_t>({}, {6});
  EXPECT_EQ(values<int64_t>(eval(clip, {&ci, &ilo, &ihi})[0]), (std::vector<int64_t>{0, 3, 6}));

  Initializer m0 = tensor_of<float>({2, 1}, {1, 5});
  Initializer m1 = tensor_of<float>({3}, {0, 3, 6});
  Initializer m2 = tensor_of<float>({}, {2});
  auto mx = eval(make_node("Max", 3), {&m0, &m1, &m2});
  EXPECT_EQ(mx[0].type.shape, (Shape{2, 3}));
  EXPECT_EQ(values<float>(mx[0]), (std::vector<float>{2, 3, 6, 5, 5, 6}));
  EXPECT_EQ(values<float>(eval(make_node("Min", 3), {&m0, &m1, &m2})[0]),
            (std::vector<float>{0, 1, 1, 0, 2, 2}));
  EXPECT_EQ(values<float>(eval(make_node("Max", 1), {&m1})[0]), values<float>(m1));
}

TEST(ElementwiseEval, WhereEqualCast) {
  Initializer a = tensor_of<int64_t>({2, 2}, {1, 2, 3, 4});
  Initializer b = tensor_of<int64_t>({2}, {1, 4});
  auto eq = eval(make_node("Equal", 2), {&a, &b});
  EXPECT_EQ(eq[0].type.dtype, "bool");
  EXPECT_EQ(eq[0].data, (std::vector<uint8_t>{1, 0, 0, 1}));
  Initializer y = tensor_of<int64_t>({}, {-1});
  auto w = eval(make_node("Where", 3), {&eq[0], &a, &y});
  EXPECT_EQ(values<int64_t>(w[0]), (std::vector<int64_t>{1, -1, -1, 4}));
  Initializer c = bools({2, 1}, {1, 0});
  Initializer xf = tensor_of<float>({3}, {1, 2, 3}),
              yf = tensor_of<float>({2, 3}, {4, 5, 6, 7, 8, 9});
  EXPECT_EQ(values<float>(eval(make_node("Where", 3), {&c, &xf, &yf})[0]),
            (std::vector<float>{1, 2, 3, 7, 8, 9}));

  Initializer f = tensor_of<float>({5}, {-2.7f, -0.5f, 0, 1.9f, 3});
  Node cast = make_node("Cast", 1);
  cast.attrs["to"] = int64_t{7};
  auto ci = eval(cast, {&f});
  EXPECT_EQ(ci[0].type.dtype, "int64");
  EXPECT_EQ(values<int64_t>(ci[0]), (std::vector<int64_t>{-2, 0, 0, 1, 3}));
  cast.attrs["to"] = int64_t{9};
  EXPECT_EQ(eval(cast, {&f})[0].data, (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  cast.attrs["to"] = int64_t{1};
  Initializer big = tensor_of<int64_t>({2}, {-3, 1 << 20});
  EXPECT_EQ(values<float>(eval(cast, {&big})[0]), (std::vector<float>{-3, 1 << 20}));
  cast.attrs["to"] = int64_t{6};
  EXPECT_EQ(values<int32_t>(eval(cast, {&big})[0]), (std::vector<int32_t>{-3, 1 << 20}));
  cast.attrs["to"] = int64_t{7};
  EXPECT_EQ(values<int64_t>(eval(cast, {&eq[0]})[0]), (std::vector<int64_t>{1, 0, 0, 1}));
  cast.attrs["to"] = int64_t{8};  // string
  EXPECT_THROW(eval(cast, {&f}), graph::OpError);
}

TEST(ElementwiseEval, BatchNormIdentityDropout) {
  // X [1, 2, 3]; per channel y = (x - mean) / sqrt(var + eps) * scale + B.
  Initializer x = tensor_of<float>({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Initializer scale = tensor_of<float>({2}, {2, 0.5f}), bias = tensor_of<float>({2}, {1, -1});
  Initializer mean = tensor_of<float>({2}, {2, 5}), var = tensor_of<float>({2}, {4, 0.25f});
  Node bn = make_node("BatchNormalization", 5);
  bn.attrs["epsilon"] = 0.0f;
  auto y = values<float>(eval(bn, {&x, &scale, &bias, &mean, &var})[0]);
  std::vector<float> want = {0, 1, 2, -2, -1, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
  bn.attrs["epsilon"] = 1e-5f;
  y = values<float>(eval(bn, {&x, &scale, &bias, &mean, &var})[0]);
  EXPECT_NEAR(y[0], (1 - 2) / std::sqrt(4 + 1e-5) * 2 + 1, 1e-6);
  Node train = make_node("BatchNormalization", 5, 3);
  EXPECT_THROW(eval(train, {&x, &scale, &bias, &mean, &var}), graph::OpError);
  Node tm = make_node("BatchNormalization", 5);
  tm.attrs["training_mode"] = int64_t{1};
  EXPECT_THROW(eval(tm, {&x, &scale, &bias, &mean, &var}), graph::OpError);

  EXPECT_EQ(eval(make_node("Identity", 1), {&x})[0].data, x.data);
  auto d = eval(make_node("Dropout", 1, 2), {&x});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].data, x.data);
  EXPECT_EQ(d[1].type, (graph::TensorType{"bool", {1, 2, 3}}));
  EXPECT_EQ(d[1].data, std::vector<uint8_t>(6, 1));
  Initializer ratio = tensor_of<float>({}, {0.3f});
  Initializer on = bools({}, {1});
  EXPECT_THROW(eval(make_node("Dropout", 3), {&x, &ratio, &on}), graph::OpError);
}

// ---- compute against evaluate ---------------------------------------------------------

TEST(ElementwiseCompute, UnaryFloatSweep) {
  std::mt19937_64 rng(2);
  std::vector<std::string> ops = {"Sqrt",      "Reciprocal",  "Neg",       "Abs",     "Exp",
                                  "Log",       "Erf",         "Tanh",      "Sigmoid", "Relu",
                                  "LeakyRelu", "HardSigmoid", "HardSwish", "Identity"};
  for (size_t k = 0; k < ops.size(); ++k) {
    // Every op on a few shapes (rotating through the list), so all ranks are covered.
    for (size_t j = 0; j < 3; ++j) {
      const Shape& s = kShapes[(k + j * 3) % kShapes.size()];
      bool positive = ops[k] == "Sqrt" || ops[k] == "Log" || ops[k] == "Reciprocal";
      Initializer x = random_tensor("float32", s, rng, positive ? 0.1 : -4, 4);
      Node n = make_node(ops[k], 1);
      if (ops[k] == "LeakyRelu") n.attrs["alpha"] = 0.3f;
      if (ops[k] == "HardSigmoid") {
        n.attrs["alpha"] = 0.25f;
        n.attrs["beta"] = 0.4f;
      }
      SCOPED_TRACE(ops[k] + " " + graph::shape_str(s));
      check_node(n, {&x}, 2e-6);
    }
  }
  // NaN propagates the same way in kernels and evaluate.
  Initializer neg = tensor_of<float>({3}, {-1, 4, -0.0f});
  check_node(make_node("Sqrt", 1), {&neg});
}

TEST(ElementwiseCompute, BinaryBroadcastSweep) {
  std::mt19937_64 rng(3);
  std::vector<std::pair<Shape, Shape>> pairs = {{{}, {}},
                                                {{17}, {17}},
                                                {{2, 1, 3}, {4, 1}},
                                                {{5, 33}, {33}},
                                                {{1}, {3, 20}},
                                                {{2, 3, 1, 5}, {3, 7, 1}},
                                                {{2, 1, 3, 1, 17}, {1, 4, 1, 6, 1}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}) {
    for (auto& [sa, sb] : pairs) {
      bool pow = std::string(op) == "Pow";
      Initializer a = random_tensor("float32", sa, rng, pow ? 0.1 : -2, 2);
      Initializer b = random_tensor("float32", sb, rng, 0.5, 2);
      SCOPED_TRACE(std::string(op) + " " + graph::shape_str(sa) + " " + graph::shape_str(sb));
      check_node(make_node(op, 2), {&a, &b}, 2e-6);
      if (std::string(op) == "Sub") check_node(make_node(op, 2), {&b, &a}, 2e-6);
    }
  }
}

TEST(ElementwiseCompute, IntegerAndBoolSweep) {
  std::mt19937_64 rng(4);
  for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 18}}) {
    Initializer a = random_tensor("int64", s, rng, -50, 50);
    Initializer b = random_tensor("int64", {s.empty() ? 1 : s.back()}, rng, -5, 5);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Equal", "Max", "Min"})
      check_node(make_node(op, 2), {&a, &b});
    for (const char* op : {"Neg", "Abs", "Relu", "Identity"}) check_node(make_node(op, 1), {&a});
    Initializer c = random_tensor("bool", s, rng);
    Initializer f = random_tensor("float32", {s.empty() ? 1 : s.back()}, rng);
    Initializer g = random_tensor("float32", s, rng);
    check_node(make_node("Where", 3), {&c, &a, &b});
    check_node(make_node("Where", 3), {&c, &f, &g});
    check_node(make_node("Equal", 2), {&c, &c});
    Initializer i32 = random_tensor("int32", s, rng, -100, 100);
    check_node(make_node("Div", 2), {&i32, &i32});  // includes x / x with x = 0 -> 0 in kernels
  }
}

TEST(ElementwiseCompute, CastSweep) {
  std::mt19937_64 rng(5);
  std::vector<std::pair<std::string, int64_t>> to = {{"float32", 1}, {"int32", 6}, {"int64", 7},
                                                     {"bool", 9},    {"uint8", 2}, {"int8", 3},
                                                     {"float64", 11}};
  std::vector<Initializer> srcs = {random_tensor("float32", {3, 17}, rng, -100, 100),
                                   random_tensor("int64", {3, 17}, rng, -100, 100),
                                   random_tensor("int32", {21}, rng, 0, 100),
                                   random_tensor("bool", {2, 19}, rng)};
  for (auto& src : srcs) {
    for (auto& [name, code] : to) {
      if (src.type.dtype == "float32" && name == "uint8")
        continue;  // negative -> uint8 is undefined
      Node n = make_node("Cast", 1);
      n.attrs["to"] = code;
      SCOPED_TRACE(src.type.dtype + " -> " + name);
      auto out = test::run_compiled(n, {&src});
      auto want = graph::get_op("Cast").evaluate(n, {&src});
      EXPECT_EQ(out[0].type.dtype, name);
      EXPECT_EQ(out[0].data, want[0].data);
    }
  }
}

TEST(ElementwiseCompute, ClipPowBatchNormDropout) {
  std::mt19937_64 rng(6);
  Initializer x = random_tensor("float32", {2, 3, 5, 7}, rng, -3, 3);
  Initializer lo = tensor_of<float>({}, {-1.f}), hi = tensor_of<float>({}, {0.25f});
  check_node(make_node("Clip", 3), {&x, &lo, &hi});
  check_node(make_node("Clip", 3), {&x, nullptr, &hi});
  check_node(make_node("Clip", 3), {&x, &lo, nullptr});
  Node old = make_node("Clip", 1);
  old.attrs["min"] = 0.0f;
  old.attrs["max"] = 6.0f;
  check_node(old, {&x});
  Initializer xi = random_tensor("int64", {19}, rng, -10, 10);
  Initializer ilo = tensor_of<int64_t>({}, {-2}), ihi = tensor_of<int64_t>({}, {3});
  check_node(make_node("Clip", 3), {&xi, &ilo, &ihi});

  for (float e : {1.f, 2.f, 3.f, 0.5f, 1.7f}) {
    Initializer base = random_tensor("float32", {4, 17}, rng, 0.1, 3);
    Initializer ex = tensor_of<float>({}, {e});
    check_node(make_node("Pow", 2), {&base, &ex}, 2e-6);
  }
  // A constant exponent takes the multiply / sqrt path (the exponent is then not read).
  for (float e : {1.f, 2.f, 3.f, 0.5f, -1.5f}) {
    Initializer b = random_tensor("float32", {3, 19}, rng, 0.1, 3);
    Initializer ex = tensor_of<float>({1}, {e});
    SCOPED_TRACE(e);
    run_with_constants(make_node("Pow", 2), {&b, &ex}, {false, true});
  }
  Initializer base = random_tensor("float32", {4, 17}, rng, -3, 3);
  Initializer iex = tensor_of<int64_t>({17}, std::vector<int64_t>(17, 2));
  check_node(make_node("Pow", 2), {&base, &iex}, 2e-6);

  for (const Shape& s : {Shape{3, 4}, Shape{2, 4, 17}, Shape{1, 4, 5, 6}, Shape{2, 4, 3, 1, 7}}) {
    Initializer bx = random_tensor("float32", s, rng, -3, 3);
    Initializer sc = random_tensor("float32", {4}, rng), b = random_tensor("float32", {4}, rng);
    Initializer m = random_tensor("float32", {4}, rng),
                v = random_tensor("float32", {4}, rng, 0.1, 2);
    Node bn = make_node("BatchNormalization", 5);
    bn.attrs["epsilon"] = 1e-3f;
    check_node(bn, {&bx, &sc, &b, &m, &v}, 2e-6);
  }
  Initializer ratio = tensor_of<float>({}, {0.1f});
  check_node(make_node("Dropout", 2, 2), {&x, &ratio});
  check_node(make_node("Dropout", 1, 1), {&x});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

using graph::Initializer;
using Shape = std::vector<int64_t>;

graph::Node op_node(const std::string& op, size_t n_in) {
  graph::Node n;
  n.op_type = op;
  n.name = op + "_test";
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back("x" + std::to_string(i));
  n.outputs = {"y"};
  return n;
}

std::vector<float> eval_floats(const graph::Node& n, const std::vector<const Initializer*>& in) {
  Initializer y = graph::get_op(n.op_type).evaluate(n, in).at(0);
  std::vector<float> v(y.data.size() / sizeof(float));
  std::memcpy(v.data(), y.data.data(), y.data.size());
  return v;
}

// The activations exporters emit beyond ReLU and GELU, against their formulas.
TEST(ElementwiseEval, MoreActivations) {
  const std::vector<float> xs = {-30, -2, -0.5f, 0, 0.5f, 2.5f, 30};
  Initializer x = test::tensor_of<float>({7}, xs);
  auto each = [&](const std::string& op, auto f, std::map<std::string, float> attrs = {}) {
    graph::Node n = op_node(op, 1);
    for (auto& [k, v] : attrs) n.attrs[k] = v;
    std::vector<float> got = eval_floats(n, {&x});
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(got[i], f(double(xs[i])), 1e-6 * std::max(1.0, std::fabs(f(double(xs[i])))))
          << op << " at " << xs[i];
  };
  auto softplus = [](double v) { return std::log1p(std::exp(v)); };
  each("Softplus", softplus);
  each("Softsign", [](double v) { return v / (1 + std::fabs(v)); });
  each("Mish", [&](double v) { return v * std::tanh(softplus(v)); });
  each("Elu", [](double v) { return v < 0 ? 0.7 * (std::exp(v) - 1) : v; }, {{"alpha", 0.7f}});
  each("Selu", [](double v) {
    return 1.0507009873554805 * (v <= 0 ? 1.6732632423543772 * (std::exp(v) - 1) : v);
  });
  each("Celu", [](double v) { return std::max(0.0, v) + std::min(0.0, 2 * (std::exp(v / 2) - 1)); },
       {{"alpha", 2.0f}});
  each("ThresholdedRelu", [](double v) { return v > 0.5 ? v : 0; }, {{"alpha", 0.5f}});
  each("Floor", [](double v) { return std::floor(v); });
  each("Ceil", [](double v) { return std::ceil(v); });
  each("Round", [](double v) { return std::nearbyint(v); });  // 0.5 -> 0, 2.5 -> 2
  each("Sign", [](double v) { return double((0 < v) - (v < 0)); });
  Initializer slope = test::tensor_of<float>({1}, {0.25f});
  std::vector<float> pr = eval_floats(op_node("PRelu", 2), {&x, &slope});
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(pr[i], xs[i] < 0 ? xs[i] * 0.25f : xs[i]);
}

TEST(ElementwiseEval, ComparisonsLogicModSumMean) {
  Initializer a = test::tensor_of<int64_t>({6}, {-7, -7, 7, 7, 0, 5});
  Initializer b = test::tensor_of<int64_t>({6}, {3, -3, 3, -3, 4, 5});
  Initializer y = graph::get_op("Mod").evaluate(op_node("Mod", 2), {&a, &b}).at(0);
  std::vector<int64_t> mod(6);
  std::memcpy(mod.data(), y.data.data(), y.data.size());
  EXPECT_EQ(mod, (std::vector<int64_t>{2, -1, 1, -2, 0, 0}));  // the divisor's sign
  graph::Node fmod = op_node("Mod", 2);
  fmod.attrs["fmod"] = int64_t{1};
  y = graph::get_op("Mod").evaluate(fmod, {&a, &b}).at(0);
  std::memcpy(mod.data(), y.data.data(), y.data.size());
  EXPECT_EQ(mod, (std::vector<int64_t>{-1, -1, 1, 1, 0, 0}));  // the dividend's sign
  y = graph::get_op("Greater").evaluate(op_node("Greater", 2), {&a, &b}).at(0);
  EXPECT_EQ(y.type.dtype, "bool");
  EXPECT_EQ(y.data, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0}));
  y = graph::get_op("LessOrEqual").evaluate(op_node("LessOrEqual", 2), {&a, &b}).at(0);
  EXPECT_EQ(y.data, (std::vector<uint8_t>{1, 1, 0, 0, 1, 1}));
  Initializer p = test::tensor_of<float>({3}, {1, 2, 3}), q = test::tensor_of<float>({1}, {3});
  EXPECT_EQ(eval_floats(op_node("Sum", 3), {&p, &q, &p}), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(eval_floats(op_node("Mean", 2), {&p, &q}), (std::vector<float>{2, 2.5f, 3}));
}

// Kernels against evaluate() over shapes and broadcasts.
TEST(ElementwiseCompute, MoreActivationsAndComparisonsSweep) {
  std::mt19937_64 rng(12);
  for (const char* op : {"Softplus", "Softsign", "Mish", "Elu", "Selu", "Celu", "ThresholdedRelu",
                         "Floor", "Ceil", "Round", "Sign"})
    for (const Shape& s : {Shape{}, Shape{37}, Shape{2, 3, 17}}) {
      Initializer x = test::random_tensor("float32", s, rng, -25, 25);
      SCOPED_TRACE(std::string(op) + " " + graph::shape_str(s));
      test::check_node(op_node(op, 1), {&x}, 2e-6);
    }
  Initializer x = test::random_tensor("float32", {2, 4, 3, 5}, rng, -3, 3);
  Initializer slope = test::random_tensor("float32", {4, 1, 1}, rng, 0, 1);
  test::check_node(op_node("PRelu", 2), {&x, &slope}, 2e-6);
  Initializer y = test::random_tensor("float32", {3, 5}, rng, 0.5, 3);
  for (const char* op : {"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Sum", "Mean"})
    test::check_node(op_node(op, 2), {&x, &y}, 2e-6);
  graph::Node fmod = op_node("Mod", 2);
  fmod.attrs["fmod"] = int64_t{1};
  test::check_node(fmod, {&x, &y}, 2e-6);
  Initializer c = test::random_tensor("bool", {3, 5}, rng),
              d = test::random_tensor("bool", {5}, rng);
  for (const char* op : {"And", "Or", "Xor"}) test::check_node(op_node(op, 2), {&c, &d});
  test::check_node(op_node("Not", 1), {&c});
}

}  // namespace
}  // namespace kiln
