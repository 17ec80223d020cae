// DFT, STFT and MelWeightMatrix references (graph/ops/signal.cc) against
// plain textbook sums on random inputs over shapes and attributes, and the
// twiddle matrix lower_signal compiles (graph/passes/lower_signal.h) as a
// product on those inputs. Whole builds are in tests/driver/signal_test.cc.
#include <gtest/gtest.h>

#include <complex>
#include <random>

#include "graph/ops/signal.h"
#include "op_harness.h"

namespace kiln::test {
namespace {

using graph::Initializer;
using Cx = std::complex<double>;

// x[outer, L, inner, C] -> y[outer, K, inner, 2] by the definition:
// y[k] = s * sum_{r < min(L, n)} x[r] exp(-+2 pi i k r / n).
std::vector<double> naive_dft(const std::vector<float>& x, int64_t outer, int64_t L, int64_t inner,
                              int64_t C, int64_t n, int64_t K, bool inverse) {
  std::vector<double> y(static_cast<size_t>(outer * K * inner * 2));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        Cx acc = 0;
        for (int64_t r = 0; r < std::min(L, n); ++r) {
          const float* v = &x[static_cast<size_t>(((o * L + r) * inner + i) * C)];
          Cx xv(v[0], C == 2 ? v[1] : 0.0f);
          acc += xv * std::polar(1.0, (inverse ? 2 : -2) * M_PI * static_cast<double>(k * r) /
                                          static_cast<double>(n));
        }
        if (inverse) acc /= static_cast<double>(n);
        y[static_cast<size_t>(((o * K + k) * inner + i) * 2)] = acc.real();
        y[static_cast<size_t>(((o * K + k) * inner + i) * 2 + 1)] = acc.imag();
      }
  return y;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol) << what;
}

Initializer scalar_i64(int64_t v) { return tensor_of<int64_t>({}, {v}); }

TEST(SignalOps, DftReferenceMatchesTheDefinition) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis, n;  // n 0: the axis' length
    bool inverse, onesided;
  };
  const std::vector<Case> cases = {
      {{1, 10, 10, 1}, 1, 0, false, false}, {{1, 10, 10, 2}, 2, 0, true, false},
      {{2, 17, 1}, 1, 0, false, true},      {{3, 8, 4, 2}, 1, 11, false, false},
      {{2, 9, 3, 1}, 2, 2, false, true},    {{4, 6, 2}, 0, 0, false, false},
      {{2, 5, 7, 2}, -2, 16, false, true},
  };
  std::mt19937_64 rng(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(graph::shape_str(c.shape) + " axis " + std::to_string(c.axis));
    graph::Node node = make_node("DFT", c.n ? 2 : 1);
    node.attrs["axis"] = c.axis;
    node.attrs["inverse"] = int64_t{c.inverse};
    node.attrs["onesided"] = int64_t{c.onesided};
    Initializer x = random_tensor("float32", c.shape, rng);
    Initializer n = scalar_i64(c.n);
    std::vector<const Initializer*> ins = {&x};
    if (c.n) ins.push_back(&n);
    auto y = eval(node, ins);
    const int64_t rank = static_cast<int64_t>(c.shape.size());
    const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= c.shape[d];
    for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= c.shape[d];
    const int64_t L = c.shape[axis], len = c.n ? c.n : L, K = c.onesided ? len / 2 + 1 : len;
    std::vector<int64_t> out = c.shape;
    out[axis] = K;
    out.back() = 2;
    EXPECT_EQ(y.at(0).type.shape, out);
    expect_near_all(y[0].as<float>(),
                    naive_dft(x.as<float>(), outer, L, inner, c.shape.back(), len, K, c.inverse),
                    1e-5, "DFT");
  }
}

// The kernel's arithmetic: the signal (rows, channels interleaved) times the
// twiddle matrix equals the definition, with bin 0's imaginary part exactly 0.
TEST(SignalOps, TwiddleMatrixProductIsTheDft) {
  std::mt19937_64 rng(2);
  for (int64_t C : {1, 2})
    for (bool inverse : {false, true})
      for (int64_t n : {1, 2, 7, 16, 25}) {
        const int64_t rows = std::max<int64_t>(1, n - 2), K = inverse ? n : n / 2 + 1;
        std::vector<double> w = graph::op_util::dft_matrix(rows, C, n, K, inverse, nullptr);
        Initializer x = random_tensor("float32", {rows, C}, rng);
        std::vector<float> xv = x.as<float>();
        std::vector<float> y(static_cast<size_t>(K * 2), 0.f);
        for (int64_t j = 0; j < K * 2; ++j) {
          double acc = 0;
          for (int64_t r = 0; r < rows * C; ++r) acc += xv[r] * w[r * K * 2 + j];
          y[j] = static_cast<float>(acc);
        }
        expect_near_all(y, naive_dft(xv, 1, rows, 1, C, n, K, inverse), 1e-6, "W product");
        if (C == 1) {
          EXPECT_EQ(y[1], 0.f);  // bin 0 of real data
        }
      }
}

TEST(SignalOps, StftReferenceMatchesTheDefinition) {
  struct Case {
    std::vector<int64_t> signal;
    int64_t step, frame;
    bool window, onesided;
  };
  const std::vector<Case> cases = {{{1, 128, 1}, 8, 16, false, true},
                                   {{2, 50, 2}, 3, 10, true, false},
                                   {{3, 33, 1}, 5, 33, true, true},
                                   {{1, 400, 1}, 160, 100, true, true}};
  std::mt19937_64 rng(3);
  for (const Case& c : cases) {
    SCOPED_TRACE(graph::shape_str(c.signal));
    graph::Node node = make_node("STFT", 4);
    node.attrs["onesided"] = int64_t{c.onesided};
    Initializer x = random_tensor("float32", c.signal, rng);
    Initializer step = scalar_i64(c.step), length = scalar_i64(c.frame);
    Initializer w = random_tensor("float32", {c.frame}, rng, 0, 1);
    auto y = eval(node, {&x, &step, c.window ? &w : nullptr, &length});
    const int64_t B = c.signal[0], L = c.signal[1], C = c.signal[2];
    const int64_t T = (L - c.frame) / c.step + 1, K = c.onesided ? c.frame / 2 + 1 : c.frame;
    EXPECT_EQ(y.at(0).type.shape, (std::vector<int64_t>{B, T, K, 2}));
    std::vector<float> xv = x.as<float>(), wv = w.as<float>();
    std::vector<double> want;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<float> frame(static_cast<size_t>(c.frame * C));
        for (int64_t f = 0; f < c.frame; ++f)
          for (int64_t ch = 0; ch < C; ++ch)
            frame[f * C + ch] = xv[(b * L + t * c.step + f) * C + ch] * (c.window ? wv[f] : 1.0f);
        std::vector<double> d = naive_dft(frame, 1, c.frame, 1, C, c.frame, K, false);
        want.insert(want.end(), d.begin(), d.end());
      }
    expect_near_all(y[0].as<float>(), want, 1e-5, "STFT");
  }
}

TEST(SignalOps, BadInputsNameTheNode) {
  auto expect_error = [](const graph::Node& n, std::vector<const Initializer*> ins,
                         const std::string& part) {
    try {
      eval(n, ins);
      ADD_FAILURE() << "no error for " << part;
    } catch (const graph::OpError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + n.name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  std::mt19937_64 rng(4);
  Initializer x3 = random_tensor("float32", {1, 8, 3}, rng);
  expect_error(make_node("DFT", 1), {&x3}, "1 or 2");
  Initializer x = random_tensor("float32", {1, 8, 1}, rng);
  graph::Node last = make_node("DFT", 1);
  last.attrs["axis"] = int64_t{2};
  expect_error(last, {&x}, "not a signal axis");
  Initializer step = scalar_i64(2), big = scalar_i64(9), w = random_tensor("float32", {5}, rng);
  expect_error(make_node("STFT", 4), {&x, &step, nullptr, &big}, "does not fit");
  expect_error(make_node("STFT", 4), {&x, &step, &w, &big}, "window has 5 values");
  expect_error(make_node("STFT", 2), {&x, &step}, "window or a frame_length");
}

// ONNX's test_melweightmatrix (8 bands, 16-point DFT at 8192 Hz, 0 to 4096
// Hz): the matrix its generator prints, and triangles peaking at 1 elsewhere.
TEST(SignalOps, MelWeightMatrixIsOnnxs) {
  graph::Node node = make_node("MelWeightMatrix", 5);
  Initializer bins = tensor_of<int32_t>({}, {8}), len = tensor_of<int32_t>({}, {16}),
              rate = tensor_of<int32_t>({}, {8192}), lo = tensor_of<float>({}, {0.f}),
              hi = tensor_of<float>({}, {4096.f});
  auto y = eval(node, {&bins, &len, &rate, &lo, &hi});
  ASSERT_EQ(y.at(0).type.shape, (std::vector<int64_t>{9, 8}));
  std::vector<float> want(72, 0.f);
  // Rows 0..5 hold the ones the generator prints: (0,0) (0,1) (1,2) (1,3) (2,4) (3,5) (4,6) (5,7).
  for (auto [r, c] : std::vector<std::pair<int, int>>{
           {0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}})
    want[r * 8 + c] = 1.f;
  EXPECT_EQ(y[0].as<float>(), want);

  // 40 bands of a 512-point DFT at 16 kHz: every band peaks at exactly 1.
  Initializer bins40 = tensor_of<int64_t>({}, {40}), len512 = tensor_of<int64_t>({}, {512}),
              rate16k = tensor_of<int64_t>({}, {16000}), lo20 = tensor_of<float>({}, {20.f}),
              hi8k = tensor_of<float>({}, {8000.f});
  node.attrs["output_datatype"] = int64_t{11};  // float64
  auto m = eval(node, {&bins40, &len512, &rate16k, &lo20, &hi8k});
  ASSERT_EQ(m.at(0).type, (graph::TensorType{"float64", {257, 40}}));
  std::vector<double> mv = m[0].as<double>();
  for (int64_t band = 0; band < 40; ++band) {
    double peak = 0;
    for (int64_t r = 0; r < 257; ++r) peak = std::max(peak, mv[r * 40 + band]);
    EXPECT_EQ(peak, 1.0) << "band " << band;
  }
}

}  // namespace
}  // namespace kiln::test
