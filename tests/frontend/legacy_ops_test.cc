// Operators whose meaning changed with the opset, imported from models of the
// old and the new opset and run with the graph interpreter against loops
// written from the ONNX specification.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"
#include "graph/interpreter.h"

using kiln::frontend::import_onnx;
using kiln::test::OnnxBuilder;

namespace {

using Shape = std::vector<int64_t>;

// Softmax over rows of a [rows, cols] row-major buffer: opset < 13 reads x
// this way with rows = prod(dims before axis); opset 13 on a single axis is
// the same with the axis moved last (done by the caller for the last axis only).
std::vector<float> softmax_rows(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - mx) / sum);
  }
  return y;
}

// Softmax along one axis (opset 13), by strides.
std::vector<float> softmax_axis(const std::vector<float>& x, const Shape& shape, int64_t axis) {
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<float> line(len);
      for (int64_t k = 0; k < len; ++k) line[k] = x[(o * len + k) * inner + i];
      std::vector<float> s = softmax_rows(line, 1, len);
      for (int64_t k = 0; k < len; ++k) y[(o * len + k) * inner + i] = s[k];
    }
  return y;
}

std::vector<float> run_softmax(int64_t opset, const Shape& shape, std::optional<int64_t> axis,
                               const std::vector<float>& x, const char* op = "Softmax") {
  OnnxBuilder b(opset);
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  b.input("x", dims);
  b.output("y", dims);
  auto* n = b.node(op, "sm", {"x"}, {"y"});
  if (axis) OnnxBuilder::attr_int(n, "axis", *axis);
  kiln::graph::Graph g = import_onnx(b.write("softmax.onnx"));
  kiln::graph::Initializer in;
  in.type = {"float32", shape};
  in.data.resize(x.size() * 4);
  std::memcpy(in.data.data(), x.data(), in.data.size());
  auto out = kiln::graph::run_graph(g, {{"x", in}});
  EXPECT_EQ(out.at("y").type.shape, shape);
  return out.at("y").as<float>();
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << what << " at " << i;
}

TEST(LegacyOps, SoftmaxBeforeOpset13FlattensFromTheAxis) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{3, 7}, Shape{1, 5, 3}, Shape{6}}) {
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<float> x(kiln::graph::TensorType{"float32", shape}.num_elements());
    for (float& v : x) v = dist(rng);
    std::vector<std::optional<int64_t>> axes = {std::nullopt};
    for (int64_t a = -rank; a < rank; ++a) axes.push_back(a);
    for (auto axis : axes) {
      int64_t a = axis.value_or(1);
      if (a >= rank) continue;  // the default axis 1 on a vector
      if (a < 0) a += rank;
      int64_t rows = 1, cols = 1;
      for (int64_t d = 0; d < rank; ++d) (d < a ? rows : cols) *= shape[d];
      std::string what = kiln::graph::shape_str(shape) + " axis " +
                         (axis ? std::to_string(*axis) : std::string("default"));
      for (int64_t opset : {11, 12})
        expect_near(run_softmax(opset, shape, axis, x), softmax_rows(x, rows, cols),
                    what + " opset " + std::to_string(opset));
      // Opset 13: the one axis (default the last).
      int64_t a13 = axis ? a : rank - 1;
      expect_near(run_softmax(13, shape, axis, x), softmax_axis(x, shape, a13), what + " opset 13");
    }
  }
}

// LogSoftmax changed with Softmax at opset 13: the same flattening before it.
TEST(LegacyOps, LogSoftmaxBeforeOpset13FlattensFromTheAxis) {
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.f, 2.f);
  const Shape shape = {2, 3, 4};
  std::vector<float> x(kiln::graph::TensorType{"float32", shape}.num_elements());
  for (float& v : x) v = dist(rng);
  auto log_of = [](std::vector<float> v) {
    for (float& e : v) e = std::log(e);
    return v;
  };
  for (int64_t a : {0, 1, 2}) {
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < 3; ++d) (d < a ? rows : cols) *= shape[d];
    std::string what = "axis " + std::to_string(a);
    expect_near(run_softmax(11, shape, a, x, "LogSoftmax"), log_of(softmax_rows(x, rows, cols)),
                what + " opset 11");
    expect_near(run_softmax(13, shape, a, x, "LogSoftmax"), log_of(softmax_axis(x, shape, a)),
                what + " opset 13");
  }
}

}  // namespace
