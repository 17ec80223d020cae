// BatchNormalization folding before quantization (frontend/fold_batch_norm.h):
// the folded model, built and run by kiln, against a plain reference of
// Conv followed by BatchNorm; and the pairs that must not fold.
#include "frontend/fold_batch_norm.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <random>

#include "driver/build.h"
#include "frontend/onnx_builder.h"
#include "runtime/graph_executor.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;
using test::OnnxBuilder;

std::vector<float> normal(size_t n, unsigned seed, float scale, float mean = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

constexpr int kC = 2, kM = 3, kH = 5, kW = 5;

struct Net {
  std::vector<float> w = normal(kM * kC * 9, 1, 0.4f), b = normal(kM, 2, 0.2f),
                     scale = normal(kM, 3, 0.3f, 1.0f), shift = normal(kM, 4, 0.2f),
                     mean = normal(kM, 5, 0.3f), var = normal(kM, 6, 0.1f, 1.0f);
  float eps = 1e-3f;
  // x -> Conv(W, b) -> c -> BatchNormalization -> y; with `c_is_output`, c is
  // also a graph output (then the pair must not fold).
  std::string write(const std::string& file, bool c_is_output = false) {
    for (float& v : var) v = std::fabs(v);
    OnnxBuilder m;
    m.input("x", {"1", std::to_string(kC), std::to_string(kH), std::to_string(kW)});
    m.output("y", {"1", std::to_string(kM), std::to_string(kH), std::to_string(kW)});
    if (c_is_output)
      m.output("c", {"1", std::to_string(kM), std::to_string(kH), std::to_string(kW)});
    m.init_f32("W", {kM, kC, 3, 3}, w);
    m.init_f32("b", {kM}, b);
    m.init_f32("s", {kM}, scale);
    m.init_f32("B", {kM}, shift);
    m.init_f32("mean", {kM}, mean);
    m.init_f32("var", {kM}, var);
    auto* conv = m.node("Conv", "conv1", {"x", "W", "b"}, {"c"});
    OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    auto* bn = m.node("BatchNormalization", "bn1", {"c", "s", "B", "mean", "var"}, {"y"});
    OnnxBuilder::attr_float(bn, "epsilon", eps);
    return m.write(file);
  }
  std::vector<float> reference(const std::vector<float>& x) const {
    std::vector<float> y(kM * kH * kW);
    for (int o = 0; o < kM; ++o)
      for (int i = 0; i < kH; ++i)
        for (int j = 0; j < kW; ++j) {
          double acc = b[o];
          for (int c = 0; c < kC; ++c)
            for (int di = -1; di <= 1; ++di)
              for (int dj = -1; dj <= 1; ++dj) {
                const int ii = i + di, jj = j + dj;
                if (ii < 0 || jj < 0 || ii >= kH || jj >= kW) continue;
                acc += static_cast<double>(x[(c * kH + ii) * kW + jj]) *
                       w[((o * kC + c) * 3 + di + 1) * 3 + dj + 1];
              }
          y[(o * kH + i) * kW + j] = static_cast<float>(
              (acc - mean[o]) / std::sqrt(static_cast<double>(var[o]) + eps) * scale[o] + shift[o]);
        }
    return y;
  }
};

struct Dir {
  fs::path path = fs::temp_directory_path() / ("kiln_fold_bn_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

onnx::ModelProto read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in));
  return m;
}

TEST(FoldBatchNorm, FoldedConvMatchesConvThenBatchNorm) {
  Dir dir;
  Net net;
  const std::string path = net.write("fold.onnx");
  const std::string out = (dir.path / "folded.onnx").string();
  ASSERT_EQ(fold_batch_norms(path, out), 1);
  onnx::ModelProto m = read(out);
  ASSERT_EQ(m.graph().node_size(), 1);
  EXPECT_EQ(m.graph().node(0).op_type(), "Conv");
  EXPECT_EQ(m.graph().node(0).output(0), "y");
  EXPECT_EQ(m.graph().node(0).input(1), "W_bn_folded");
  EXPECT_EQ(m.graph().initializer_size(), 2);  // W, b and the BatchNorm's four dropped

  driver::BuildOptions options;
  options.output_path = (dir.path / "folded.tar").string();
  driver::build(out, options);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(options.output_path);
  std::vector<float> x = normal(kC * kH * kW, 7, 1.0f);
  ex.set_input("x", x.data(), runtime::DType::f32(), {1, kC, kH, kW});
  ex.run();
  const float* y = static_cast<const float*>(ex.output_data(0));
  std::vector<float> ref = net.reference(x);
  float max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    max_diff = std::max(max_diff, std::fabs(ref[i] - y[i]));
  }
  EXPECT_LE(max_diff, 1e-5f * max_ref);
}

TEST(FoldBatchNorm, AConvOutputReadElsewhereIsNotFolded) {
  Dir dir;
  Net net;
  const std::string path = net.write("nofold.onnx", /*c_is_output=*/true);
  const std::string out = (dir.path / "nofold_out.onnx").string();
  EXPECT_EQ(fold_batch_norms(path, out), 0);
  EXPECT_FALSE(fs::exists(out));  // nothing to fold: nothing written
}

}  // namespace
}  // namespace kiln::frontend
