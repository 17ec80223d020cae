// LSTM, GRU and RNN: the attribute checks and the reference evaluation (plain
// loops, double accumulation). No compute: graph/passes/unroll_recurrent.cc
// rewrites every LSTM, GRU and RNN into MatMul, Split and elementwise nodes.
#include "graph/ops/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace op_util {

namespace {

// An activation ONNX lists for its recurrent operators, with the defaults of
// the operator of the same name where it takes alpha / beta.
struct ActivationSpec {
  const char* name;
  bool takes_alpha, takes_beta;
  float alpha, beta;
};

constexpr ActivationSpec kActivations[] = {
    {"Relu", false, false, 0, 0},         {"Tanh", false, false, 0, 0},
    {"Sigmoid", false, false, 0, 0},      {"Affine", true, true, 1.f, 0.f},
    {"LeakyRelu", true, false, 0.01f, 0}, {"ThresholdedRelu", true, false, 1.f, 0},
    {"ScaledTanh", true, true, 1.f, 1.f}, {"HardSigmoid", true, true, 0.2f, 0.5f},
    {"Elu", true, false, 1.f, 0},         {"Softsign", false, false, 0, 0},
    {"Softplus", false, false, 0, 0},
};

bool same_name(const std::string& a, const char* b) {
  return a.size() == std::strlen(b) && std::equal(a.begin(), a.end(), b, [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The activations of every direction. activation_alpha / activation_beta are
// consumed in order by the functions that take them (as ONNX Runtime reads
// them); one direction's list serves both directions of a bidirectional node.
std::vector<Activation> parse_activations(const Node& node, const RecurrentShape& s) {
  const std::vector<std::string> defaults =
      s.kind == RecurrentKind::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : s.kind == RecurrentKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                      : std::vector<std::string>{"Tanh"};
  std::vector<std::string> names =
      node.attr<std::vector<std::string>>("activations").value_or(defaults);
  const size_t per = defaults.size(), all = per * static_cast<size_t>(s.directions);
  if (names.size() == per && all > per) {
    const std::vector<std::string> one = names;  // insert() must not read from names itself
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != all)
    fail(node,
         std::to_string(names.size()) + " activations given, " + std::to_string(all) + " expected");
  const std::vector<float> alphas =
      node.attr<std::vector<float>>("activation_alpha").value_or(std::vector<float>{});
  const std::vector<float> betas =
      node.attr<std::vector<float>>("activation_beta").value_or(std::vector<float>{});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& a : kActivations)
      if (same_name(name, a.name)) spec = &a;
    if (!spec) fail(node, "unknown activation '" + name + "'");
    Activation a{spec->name, spec->alpha, spec->beta};
    if (spec->takes_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (spec->takes_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    out.push_back(a);
  }
  return out;
}

}  // namespace

double apply_activation(const Activation& a, double v) {
  const std::string& n = a.name;
  if (n == "Relu") return std::max(v, 0.0);
  if (n == "Tanh") return std::tanh(v);
  if (n == "Sigmoid") return 1 / (1 + std::exp(-v));
  if (n == "Affine") return a.alpha * v + a.beta;
  if (n == "LeakyRelu") return v >= 0 ? v : a.alpha * v;
  if (n == "ThresholdedRelu") return v > a.alpha ? v : 0.0;  // as the ThresholdedRelu operator
  if (n == "ScaledTanh") return a.alpha * std::tanh(a.beta * v);
  if (n == "HardSigmoid") return std::min(std::max(a.alpha * v + a.beta, 0.0), 1.0);
  if (n == "Elu") return v >= 0 ? v : a.alpha * std::expm1(v);
  if (n == "Softsign") return v / (1 + std::fabs(v));
  if (n == "Softplus") return v > 30 ? v : std::log1p(std::exp(v));
  throw OpError("unknown activation '" + n + "'");
}

RecurrentShape recurrent_shape(const Node& node, const std::vector<int64_t>& x,
                               const std::vector<int64_t>& w, const std::vector<int64_t>& r) {
  RecurrentShape s{};
  s.kind = node.op_type == "LSTM"  ? RecurrentKind::kLstm
           : node.op_type == "GRU" ? RecurrentKind::kGru
                                   : RecurrentKind::kRnn;
  const std::string direction = attr_string(node, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail(node, "unknown direction '" + direction + "'");
  s.directions = direction == "bidirectional" ? 2 : 1;
  s.reverse = direction == "reverse";
  s.batch_first = attr_int(node, "layout", 0) != 0;
  s.linear_before_reset = attr_int(node, "linear_before_reset", 0) != 0;
  s.input_forget = s.kind == RecurrentKind::kLstm && attr_int(node, "input_forget", 0) != 0;
  if (node.attrs.count("clip")) {
    s.clip = attr_float(node, "clip", 0.f);
    if (!(*s.clip > 0)) fail(node, "clip must be positive, not " + std::to_string(*s.clip));
  }
  s.activations = parse_activations(node, s);
  if (x.size() != 3 || w.size() != 3 || r.size() != 3) fail(node, "X, W and R must have rank 3");
  s.seq = s.batch_first ? x[1] : x[0];
  s.batch = s.batch_first ? x[0] : x[1];
  s.input = x[2];
  s.hidden = r[2];
  if (auto h = node.attr<int64_t>("hidden_size"); h && *h != s.hidden)
    fail(node, "hidden_size " + std::to_string(*h) + " disagrees with R " + shape_str(r));
  const int64_t rows = s.gates() * s.hidden;
  if (w != std::vector<int64_t>{s.directions, rows, s.input} ||
      r != std::vector<int64_t>{s.directions, rows, s.hidden})
    fail(node, "W " + shape_str(w) + " and R " + shape_str(r) + " do not fit X " + shape_str(x) +
                   " with " + std::to_string(s.directions) + " direction(s) of hidden size " +
                   std::to_string(s.hidden));
  return s;
}

}  // namespace op_util

namespace {

using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers

// The optional inputs as doubles (empty when absent).
std::vector<double> optional_doubles(const Node& node, const std::vector<const Initializer*>& in,
                                     size_t i) {
  const Initializer* t = optional_input(in, i);
  return t ? to_doubles(node, *t) : std::vector<double>{};
}

std::vector<Initializer> recurrent_evaluate(const Node& node,
                                            const std::vector<const Initializer*>& in) {
  const Initializer& xt = required_input(node, in, 0);
  const Initializer& wt = required_input(node, in, 1);
  const Initializer& rt = required_input(node, in, 2);
  for (const Initializer* t : {&xt, &wt, &rt}) require_f32(node, *t, "X, W and R");
  const RecurrentShape s = recurrent_shape(node, xt.type.shape, wt.type.shape, rt.type.shape);
  const bool lstm = s.kind == RecurrentKind::kLstm;
  const int64_t T = s.seq, N = s.batch, I = s.input, H = s.hidden, G = s.gates(), D = s.directions;
  // Each batch entry's length: its steps from there on are skipped (Y zero,
  // the states kept), in either direction.
  std::vector<int64_t> lens(static_cast<size_t>(N), T);
  if (const Initializer* l = optional_input(in, 4)) lens = to_ints(node, *l);
  if (static_cast<int64_t>(lens.size()) != N) fail(node, "sequence_lens must have batch elements");
  for (int64_t l : lens)
    if (l < 1 || l > T)
      fail(node,
           "sequence_lens " + std::to_string(l) + " is outside [1, " + std::to_string(T) + "]");
  const std::vector<double> x = to_doubles(node, xt), w = to_doubles(node, wt),
                            r = to_doubles(node, rt), b = optional_doubles(node, in, 3),
                            h0 = optional_doubles(node, in, 5),
                            c0 = lstm ? optional_doubles(node, in, 6) : std::vector<double>{},
                            p = lstm ? optional_doubles(node, in, 7) : std::vector<double>{};
  // Index helpers over the layouts: X [T, N, I] or [N, T, I]; states [D, N, H] or [N, D, H].
  auto x_at = [&](int64_t t, int64_t n, int64_t i) {
    return x[static_cast<size_t>((s.batch_first ? n * T + t : t * N + n) * I + i)];
  };
  auto state_at = [&](int64_t d, int64_t n) {
    return static_cast<size_t>((s.batch_first ? n * D + d : d * N + n) * H);
  };
  std::vector<double> y(static_cast<size_t>(T * D * N * H)), yh(static_cast<size_t>(D * N * H)),
      yc(yh.size());
  auto y_at = [&](int64_t t, int64_t d, int64_t n) {
    return static_cast<size_t>((s.batch_first ? (n * T + t) * D + d : (t * D + d) * N + n) * H);
  };
  std::vector<double> gates(static_cast<size_t>(G * H)), rh(static_cast<size_t>(G * H));
  for (int64_t d = 0; d < D; ++d)
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> h(static_cast<size_t>(H), 0.0), c(static_cast<size_t>(H), 0.0);
      if (!h0.empty()) std::copy_n(h0.begin() + state_at(d, n), H, h.begin());
      if (!c0.empty()) std::copy_n(c0.begin() + state_at(d, n), H, c.begin());
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = runs_backwards(s, d) ? T - 1 - step : step;
        if (t >= lens[static_cast<size_t>(n)]) continue;
        for (int64_t g = 0; g < G * H; ++g) {
          double xw = b.empty() ? 0.0 : b[static_cast<size_t>(d * 2 * G * H + g)];
          for (int64_t i = 0; i < I; ++i)
            xw += x_at(t, n, i) * w[static_cast<size_t>((d * G * H + g) * I + i)];
          double hr = b.empty() ? 0.0 : b[static_cast<size_t>(d * 2 * G * H + G * H + g)];
          for (int64_t k = 0; k < H; ++k)
            hr += h[k] * r[static_cast<size_t>((d * G * H + g) * H + k)];
          gates[g] = xw;
          rh[g] = hr;
        }
        // Activation j of this direction, its input clipped first.
        auto act = [&](int64_t j, double v) {
          if (s.clip) v = std::clamp(v, -double(*s.clip), double(*s.clip));
          return apply_activation(s.activation(d, j), v);
        };
        if (s.kind == RecurrentKind::kRnn) {
          for (int64_t k = 0; k < H; ++k) h[k] = act(0, gates[k] + rh[k]);
        } else if (lstm) {  // gates i, o, f, c
          for (int64_t k = 0; k < H; ++k) {
            auto peep = [&](int64_t j, double state) {
              return p.empty() ? 0.0 : p[static_cast<size_t>(d * 3 * H + j * H + k)] * state;
            };
            double ig = act(0, gates[k] + rh[k] + peep(0, c[k]));
            double fg = s.input_forget ? 1 - ig  // the coupled gates
                                       : act(0, gates[2 * H + k] + rh[2 * H + k] + peep(2, c[k]));
            double cg = act(1, gates[3 * H + k] + rh[3 * H + k]);
            c[k] = fg * c[k] + ig * cg;
            double og = act(0, gates[H + k] + rh[H + k] + peep(1, c[k]));
            h[k] = og * apply_activation(s.activation(d, 2), c[k]);  // c is not clipped
          }
        } else {  // gates z, r, h
          std::vector<double> z(static_cast<size_t>(H)), reset(z.size()), next(z.size());
          for (int64_t k = 0; k < H; ++k) {
            z[k] = act(0, gates[k] + rh[k]);
            reset[k] = act(0, gates[H + k] + rh[H + k]);
          }
          for (int64_t k = 0; k < H; ++k) {
            double recurrent;
            if (s.linear_before_reset) {
              recurrent = reset[k] * rh[2 * H + k];
            } else {  // (reset * h) R^T + Rb
              recurrent =
                  b.empty() ? 0.0 : b[static_cast<size_t>(d * 2 * G * H + G * H + 2 * H + k)];
              for (int64_t j = 0; j < H; ++j)
                recurrent +=
                    reset[j] * h[j] * r[static_cast<size_t>((d * G * H + 2 * H + k) * H + j)];
            }
            next[k] = (1 - z[k]) * act(1, gates[2 * H + k] + recurrent) + z[k] * h[k];
          }
          h = next;
        }
        std::copy(h.begin(), h.end(), y.begin() + y_at(t, d, n));
      }
      std::copy(h.begin(), h.end(), yh.begin() + state_at(d, n));
      std::copy(c.begin(), c.end(), yc.begin() + state_at(d, n));
    }
  const std::vector<int64_t> y_shape =
      s.batch_first ? std::vector<int64_t>{N, T, D, H} : std::vector<int64_t>{T, D, N, H};
  const std::vector<int64_t> state_shape =
      s.batch_first ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
  auto floats = [](const std::vector<int64_t>& shape, const std::vector<double>& v) {
    Initializer t = make_tensor("float32", shape);
    float* o = data_of<float>(t);
    for (size_t i = 0; i < v.size(); ++i) o[i] = static_cast<float>(v[i]);
    return t;
  };
  std::vector<Initializer> out = {floats(y_shape, y), floats(state_shape, yh)};
  if (lstm) out.push_back(floats(state_shape, yc));
  out.resize(std::min(out.size(), node.outputs.size()));
  return out;
}

}  // namespace

void register_recurrent_ops() {
  register_op({"LSTM", OpPattern::kOpaque, recurrent_evaluate, nullptr, {}});
  register_op({"GRU", OpPattern::kOpaque, recurrent_evaluate, nullptr, {}});
  register_op({"RNN", OpPattern::kOpaque, recurrent_evaluate, nullptr, {}});
}

}  // namespace kiln::graph
