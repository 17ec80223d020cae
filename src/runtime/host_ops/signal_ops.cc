// DFT, STFT and MelWeightMatrix on the host, for a dft_length, frame_step,
// frame_length or mel parameter fed at run time (their output shapes then
// depend on the data). Compiled models with those constant take the kernel
// path instead (graph/passes/lower_signal.h: a MatMul with a twiddle matrix;
// MelWeightMatrix folded at build time). The arithmetic is ONNX's
// definition, as graph/ops/signal.cc (the reference) computes it: sums in
// double, each angle 2 pi (k r mod n) / n reduced in integers first. The
// runtime includes nothing of the compiler, so the few lines are repeated
// here; tests/driver/signal_test.cc checks this path against the reference.
#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::complex<double> twiddle(int64_t k, int64_t r, int64_t n, bool inverse) {
  const double angle = 2 * kPi * static_cast<double>((k * r) % n) / static_cast<double>(n);
  return {std::cos(angle), (inverse ? 1.0 : -1.0) * std::sin(angle)};
}

int64_t scalar_int(const HostOpContext& ctx, size_t i, const char* what) {
  std::vector<int64_t> v = ctx.int_values(i);
  if (v.size() != 1) ctx.fail(std::string(what) + " must hold one value");
  return v[0];
}

void require_float(const HostOpContext& ctx, const HostValue& v, const char* what) {
  if (v.dtype.code != DTypeCode::Float || (v.dtype.bits != 32 && v.dtype.bits != 64))
    ctx.fail(std::string(what) + " is " + v.dtype.str() + "; float32 or float64 only");
}

// x as [outer, length, inner, channels] (outer stride x_stride) to y as
// [outer, bins, inner, 2].
template <typename T>
void dft_lines(const T* x, T* y, int64_t outer, int64_t length, int64_t inner, int64_t channels,
               int64_t n, int64_t bins, bool inverse, const std::vector<double>* window,
               int64_t x_stride) {
  const int64_t rows = std::min(length, n);
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < bins; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        std::complex<double> acc = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const T* v = x + o * x_stride + (r * inner + i) * channels;
          std::complex<double> xv(static_cast<double>(v[0]),
                                  channels == 2 ? static_cast<double>(v[1]) : 0.0);
          if (window) xv *= (*window)[static_cast<size_t>(r)];
          acc += xv * twiddle(k, r, n, inverse);
        }
        acc *= scale;
        T* out = y + ((o * bins + k) * inner + i) * 2;
        out[0] = static_cast<T>(acc.real());
        out[1] = static_cast<T>(acc.imag());
      }
}

void dft(HostOpContext& ctx) {
  const HostValue& x = ctx.required(0);
  require_float(ctx, x, "input");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank < 2 || (x.shape.back() != 1 && x.shape.back() != 2))
    ctx.fail("input must be [batch, signal dims..., 1 or 2], got " + host_shape_str(x.shape));
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank - 2)
    ctx.fail("axis " + std::to_string(ctx.attr_int("axis", 1)) + " is not a signal axis");
  const int64_t length = x.shape[static_cast<size_t>(axis)];
  const int64_t n = ctx.input(1) ? scalar_int(ctx, 1, "dft_length") : length;
  if (n < 1) ctx.fail("dft_length must be positive, got " + std::to_string(n));
  const int64_t bins = ctx.attr_int("onesided", 0) != 0 ? n / 2 + 1 : n;
  const int64_t channels = x.shape.back();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d + 1 < rank; ++d) inner *= x.shape[static_cast<size_t>(d)];
  std::vector<int64_t> out = x.shape;
  out[static_cast<size_t>(axis)] = bins;
  out.back() = 2;
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  if (inverse && ctx.attr_int("onesided", 0) != 0)
    ctx.fail("onesided and inverse cannot both be set (opset 17)");
  if (x.dtype.bits == 64)
    dft_lines(x.as<double>(), ctx.allocate_as<double>(0, out), outer, length, inner, channels, n,
              bins, inverse, nullptr, length * inner * channels);
  else
    dft_lines(x.as<float>(), ctx.allocate_as<float>(0, out), outer, length, inner, channels, n,
              bins, inverse, nullptr, length * inner * channels);
}

void stft(HostOpContext& ctx) {
  const HostValue& x = ctx.required(0);
  require_float(ctx, x, "signal");
  if (x.shape.size() != 3 || (x.shape[2] != 1 && x.shape[2] != 2))
    ctx.fail("signal must be [batch, length, 1 or 2], got " + host_shape_str(x.shape));
  const int64_t batch = x.shape[0], length = x.shape[1], channels = x.shape[2];
  const int64_t step = scalar_int(ctx, 1, "frame_step");
  if (step < 1) ctx.fail("frame_step must be positive, got " + std::to_string(step));
  const HostValue* window = ctx.input(2);
  if (window && window->shape.size() != 1)
    ctx.fail("window must be 1-D, got " + host_shape_str(window->shape));
  if (!window && !ctx.input(3)) ctx.fail("needs a window or a frame_length (it has neither)");
  const int64_t frame = ctx.input(3) ? scalar_int(ctx, 3, "frame_length") : window->shape[0];
  if (window && window->shape[0] != frame)
    ctx.fail("the window has " + std::to_string(window->shape[0]) + " values but frame_length is " +
             std::to_string(frame));
  if (frame < 1 || frame > length)
    ctx.fail("frame_length " + std::to_string(frame) + " does not fit the signal's " +
             std::to_string(length) + " samples");
  std::vector<double> w;
  if (window) {
    require_float(ctx, *window, "window");
    w.resize(static_cast<size_t>(frame));
    dispatch_dtype(ctx, window->dtype, [&](auto t) {
      using T = decltype(t);
      for (int64_t f = 0; f < frame; ++f) w[f] = static_cast<double>(window->as<T>()[f]);
    });
  }
  const int64_t frames = (length - frame) / step + 1;
  const int64_t bins = ctx.attr_int("onesided", 1) != 0 ? frame / 2 + 1 : frame;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* y = ctx.allocate_as<T>(0, {batch, frames, bins, 2});
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < frames; ++t)
        dft_lines(x.as<T>() + (b * length + t * step) * channels, y + (b * frames + t) * bins * 2,
                  1, frame, 1, channels, frame, bins, false, window ? &w : nullptr, 0);
  };
  if (x.dtype.bits == 64)
    run(double{});
  else
    run(float{});
}

// As graph/ops/signal.cc's mel_weights (ONNX's definition).
void mel_weight_matrix(HostOpContext& ctx) {
  const int64_t mel_bins = scalar_int(ctx, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int(ctx, 1, "dft_length");
  const int64_t sample_rate = scalar_int(ctx, 2, "sample_rate");
  const double lower = ctx.scalar_value(3), upper = ctx.scalar_value(4);
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1)
    ctx.fail("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spectrum = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(lower), step = (mel(upper) - low) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> point(static_cast<size_t>(mel_bins + 2));
  for (int64_t p = 0; p < mel_bins + 2; ++p) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(p) * step + low) / 2595.0) - 1);
    point[p] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> w(static_cast<size_t>(spectrum * mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= spectrum)
      ctx.fail("the mel band edges [" + std::to_string(lower) + ", " + std::to_string(upper) +
               "] Hz fall outside the " + std::to_string(spectrum) +
               " bins of the spectrum (0 to sample_rate / 2)");
    return w[static_cast<size_t>(j * mel_bins + i)];
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = point[i], center = point[i + 1], right = point[i + 2];
    if (center == left)
      at(center, i) = 1;
    else
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  dispatch_dtype(ctx, ctx.output_dtype(0), [&](auto t) {
    using T = decltype(t);
    T* y = ctx.allocate_as<T>(0, {spectrum, mel_bins});
    for (size_t k = 0; k < w.size(); ++k) y[k] = static_cast<T>(w[k]);
  });
}

}  // namespace

void register_signal_host_ops(std::map<std::string, HostOpFn>& table) {
  table["DFT"] = dft;
  table["STFT"] = stft;
  table["MelWeightMatrix"] = mel_weight_matrix;
}

}  // namespace kiln::runtime
