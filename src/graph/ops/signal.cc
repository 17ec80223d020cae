// DFT, STFT and MelWeightMatrix: geometry and reference evaluation (plain
// sums over every input position, in double). No compute: DFT and STFT are
// rewritten into MatMuls with a twiddle matrix by graph/passes/lower_signal,
// MelWeightMatrix is folded (its inputs are constants).
#include "graph/ops/signal.h"

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace op_util {

namespace {

constexpr double kPi = 3.14159265358979323846;

// e^{sign * 2 pi i (k r mod n) / n}, the angle reduced in integers first.
std::complex<double> twiddle(int64_t k, int64_t r, int64_t n, bool inverse) {
  const double angle = 2 * kPi * static_cast<double>((k * r) % n) / static_cast<double>(n);
  return {std::cos(angle), (inverse ? 1.0 : -1.0) * std::sin(angle)};
}

void require_float(const Node& node, const std::string& dtype, const std::string& what) {
  if (dtype != "float32" && dtype != "float64")
    fail(node, what + " is " + dtype + "; " + node.op_type + " takes float32 or float64");
}

int64_t scalar_int(const Node& node, const Initializer& t, const std::string& what) {
  std::vector<int64_t> v = to_ints(node, t);
  if (v.size() != 1) fail(node, what + " must hold one value, got " + shape_str(t.type.shape));
  return v[0];
}

}  // namespace

DftSpec dft_spec(const Node& node, const Shape& x, const std::string& dtype,
                 const Initializer* dft_length) {
  require_float(node, dtype, "input");
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank < 2 || (x.back() != 1 && x.back() != 2))
    fail(node,
         "input must be [batch, signal dims..., 1 or 2] (real or complex), got " + shape_str(x));
  DftSpec s;
  s.axis = attr_int(node, "axis", 1);
  if (s.axis < 0) s.axis += rank;  // [-r, -2] counts from the back
  if (s.axis < 0 || s.axis > rank - 2)
    fail(node, "axis " + std::to_string(attr_int(node, "axis", 1)) +
                   " is not a signal axis of an input of rank " + std::to_string(rank));
  s.length = x[static_cast<size_t>(s.axis)];
  s.n = dft_length ? scalar_int(node, *dft_length, "dft_length") : s.length;
  if (s.n < 1) fail(node, "dft_length must be positive, got " + std::to_string(s.n));
  s.channels = x.back();
  s.inverse = attr_int(node, "inverse", 0) != 0;
  if (s.inverse && attr_int(node, "onesided", 0) != 0)
    fail(node, "onesided and inverse cannot both be set (opset 17)");
  // onesided keeps bins [0, n / 2]; kept for complex input too (as ONNX's
  // reference does: the full transform, then the slice).
  s.bins = attr_int(node, "onesided", 0) != 0 ? s.n / 2 + 1 : s.n;
  s.out = x;
  s.out[static_cast<size_t>(s.axis)] = s.bins;
  s.out.back() = 2;
  return s;
}

StftSpec stft_spec(const Node& node, const Shape& signal, const std::string& dtype,
                   const Initializer& frame_step, const Shape* window,
                   const Initializer* frame_length) {
  require_float(node, dtype, "signal");
  if (signal.size() != 3 || (signal[2] != 1 && signal[2] != 2))
    fail(node,
         "signal must be [batch, length, 1 or 2] (real or complex), got " + shape_str(signal));
  StftSpec s;
  s.batch = signal[0];
  s.length = signal[1];
  s.channels = signal[2];
  s.step = scalar_int(node, frame_step, "frame_step");
  if (s.step < 1) fail(node, "frame_step must be positive, got " + std::to_string(s.step));
  if (window && window->size() != 1) fail(node, "window must be 1-D, got " + shape_str(*window));
  if (!window && !frame_length) fail(node, "needs a window or a frame_length (it has neither)");
  s.frame = frame_length ? scalar_int(node, *frame_length, "frame_length") : (*window)[0];
  if (window && (*window)[0] != s.frame)
    fail(node, "the window has " + std::to_string((*window)[0]) + " values but frame_length is " +
                   std::to_string(s.frame));
  if (s.frame < 1 || s.frame > s.length)
    fail(node, "frame_length " + std::to_string(s.frame) + " does not fit the signal's " +
                   std::to_string(s.length) + " samples");
  s.frames = (s.length - s.frame) / s.step + 1;
  s.bins = attr_int(node, "onesided", 1) != 0 ? s.frame / 2 + 1 : s.frame;
  s.out = {s.batch, s.frames, s.bins, 2};
  return s;
}

std::vector<double> dft_matrix(int64_t rows, int64_t channels, int64_t n, int64_t bins,
                               bool inverse, const std::vector<double>* window) {
  std::vector<double> w(static_cast<size_t>(rows * channels * bins * 2));
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double wr = (window ? (*window)[static_cast<size_t>(r)] : 1.0) * scale;
    for (int64_t k = 0; k < bins; ++k) {
      const std::complex<double> t = twiddle(k, r, n, inverse) * wr;
      // (a + ib) t = (a t.re - b t.im) + i (a t.im + b t.re)
      double* re_row = &w[static_cast<size_t>((r * channels) * bins * 2 + k * 2)];
      re_row[0] = t.real();
      re_row[1] = t.imag();
      if (channels == 2) {
        double* im_row = re_row + bins * 2;
        im_row[0] = -t.imag();
        im_row[1] = t.real();
      }
    }
  }
  return w;
}

namespace {

// x viewed as [outer, length, inner, channels], y as [outer, bins, inner, 2]:
// y[o, k, i] = sum over r < min(length, n) of x[o, r, i] * twiddle(k, r) (* window[r]).
template <typename T>
void dft_lines(const T* x, T* y, int64_t outer, int64_t length, int64_t inner, int64_t channels,
               int64_t n, int64_t bins, bool inverse, const std::vector<double>* window,
               int64_t x_outer_stride) {
  const int64_t rows = std::min(length, n);
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < bins; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        std::complex<double> acc = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const T* v = x + o * x_outer_stride + (r * inner + i) * channels;
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

std::vector<Initializer> dft_evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  const DftSpec s = dft_spec(node, x.type.shape, x.type.dtype, optional_input(in, 1));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < s.axis; ++d) outer *= x.type.shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(s.axis) + 1; d + 1 < x.type.shape.size(); ++d)
    inner *= x.type.shape[d];
  Initializer y = make_tensor(x.type.dtype, s.out);
  const int64_t stride = s.length * inner * s.channels;
  if (x.type.dtype == "float64")
    dft_lines(data_of<double>(x), data_of<double>(y), outer, s.length, inner, s.channels, s.n,
              s.bins, s.inverse, nullptr, stride);
  else
    dft_lines(data_of<float>(x), data_of<float>(y), outer, s.length, inner, s.channels, s.n, s.bins,
              s.inverse, nullptr, stride);
  return {std::move(y)};
}

std::vector<Initializer> stft_evaluate(const Node& node,
                                       const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  const Initializer& step = required_input(node, in, 1);
  const Initializer* window = optional_input(in, 2);
  const StftSpec s = stft_spec(node, x.type.shape, x.type.dtype, step,
                               window ? &window->type.shape : nullptr, optional_input(in, 3));
  std::vector<double> w;
  if (window) {
    require_float(node, window->type.dtype, "window");
    w = to_doubles(node, *window);
  }
  Initializer y = make_tensor(x.type.dtype, s.out);
  // Frame t of batch b starts at sample t * step: a DFT of one line.
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.frames; ++t) {
      const int64_t x_off = (b * s.length + t * s.step) * s.channels;
      const int64_t y_off = (b * s.frames + t) * s.bins * 2;
      if (x.type.dtype == "float64")
        dft_lines(data_of<double>(x) + x_off, data_of<double>(y) + y_off, 1, s.frame, 1, s.channels,
                  s.frame, s.bins, false, window ? &w : nullptr, 0);
      else
        dft_lines(data_of<float>(x) + x_off, data_of<float>(y) + y_off, 1, s.frame, 1, s.channels,
                  s.frame, s.bins, false, window ? &w : nullptr, 0);
    }
  return {std::move(y)};
}

// ---- MelWeightMatrix ------------------------------------------------------------------

// ONNX's definition (its reference and test generator): num_mel_bins + 2
// points evenly spaced on the mel scale from mel(lower) in steps of
// (mel(upper) - mel(lower)) / (num_mel_bins + 2), each mapped back to hertz
// and to the spectrogram bin floor((dft_length + 1) * hz / sample_rate);
// filter i rises linearly from point i to point i + 1 (1 there) and falls to
// point i + 2.
std::vector<double> mel_weights(const Node& node, int64_t mel_bins, int64_t dft_length,
                                int64_t sample_rate, double lower, double upper) {
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1)
    fail(node, "num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spectrum = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(lower), step = (mel(upper) - low) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> point(static_cast<size_t>(mel_bins + 2));
  for (int64_t p = 0; p < mel_bins + 2; ++p) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(p) * step + low) / 2595.0) - 1);
    point[static_cast<size_t>(p)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> w(static_cast<size_t>(spectrum * mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= spectrum)
      fail(node, "the mel band edges [" + std::to_string(lower) + ", " + std::to_string(upper) +
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
  return w;
}

std::vector<Initializer> mel_evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  int64_t ints[3];
  const char* int_names[3] = {"num_mel_bins", "dft_length", "sample_rate"};
  for (size_t k = 0; k < 3; ++k)
    ints[k] = scalar_int(node, required_input(node, in, k), int_names[k]);
  double edges[2];
  const char* edge_names[2] = {"lower_edge_hertz", "upper_edge_hertz"};
  for (size_t k = 0; k < 2; ++k) {
    std::vector<double> v = to_doubles(node, required_input(node, in, k + 3));
    if (v.size() != 1) fail(node, std::string(edge_names[k]) + " must hold one value");
    edges[k] = v[0];
  }
  std::vector<double> w = mel_weights(node, ints[0], ints[1], ints[2], edges[0], edges[1]);
  const std::string dtype = onnx_dtype_name(node, attr_int(node, "output_datatype", 1));
  Initializer y = make_tensor(dtype, {ints[1] / 2 + 1, ints[0]});
  visit_dtype(node, dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < w.size(); ++k) data_of<T>(y)[k] = static_cast<T>(w[k]);
  });
  return {std::move(y)};
}

}  // namespace
}  // namespace op_util

void register_signal_ops() {
  // dft_length, frame_step and frame_length set shapes: build-time constants
  // (fed at run time, the node runs in the executor). STFT's window may vary.
  register_op({"DFT", OpPattern::kOpaque, op_util::dft_evaluate, nullptr, {1}});
  register_op({"STFT", OpPattern::kOpaque, op_util::stft_evaluate, nullptr, {1, 3}});
  register_op(
      {"MelWeightMatrix", OpPattern::kOpaque, op_util::mel_evaluate, nullptr, {0, 1, 2, 3, 4}});
}

}  // namespace kiln::graph
