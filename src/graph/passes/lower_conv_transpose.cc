#include "graph/passes/lower_conv_transpose.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// One spatial dim of the rewrite.
struct PhaseConv {
  int64_t stride = 1;
  int64_t kernel = 0;                     // the phase conv's window
  int64_t pad_begin = 0, pad_end = 0;     // its pads
  int64_t out = 0;                        // its output size (phase rows per phase)
  int64_t crop = 0;                       // leading phase rows the Slice drops
  std::vector<std::vector<int64_t>> tap;  // [phase][conv tap]: ConvTranspose tap, or -1
};

// Phase r's outputs o = q * S + r take in[q + c_r - t] * w[k_r + t * S] for
// t < T_r, where k_r = (r + pad) mod S and c_r = floor((r + pad) / S). With
// conv pad P, conv tap j reads in[q + j - P]: j = c_r - t + P.
PhaseConv phase_conv(const op_util::TransposeWindow& w, size_t d) {
  PhaseConv pc;
  const int64_t S = w.stride[d], K = w.kernel[d], P = w.pad_begin[d];
  pc.stride = S;
  std::vector<int64_t> k0(S), taps(S), c(S);
  int64_t pad = INT64_MIN, last = INT64_MIN;
  for (int64_t r = 0; r < S; ++r) {
    k0[r] = (r + P) - floor_div(r + P, S) * S;
    taps[r] = k0[r] < K ? (K - k0[r] + S - 1) / S : 0;
    c[r] = floor_div(r + P, S);
    if (taps[r] > 0) pad = std::max(pad, taps[r] - 1 - c[r]);
  }
  for (int64_t r = 0; r < S; ++r)
    if (taps[r] > 0) last = std::max(last, c[r] + pad);
  pc.kernel = last + 1;
  pc.tap.assign(S, std::vector<int64_t>(pc.kernel, -1));
  for (int64_t r = 0; r < S; ++r)
    for (int64_t j = 0; j < pc.kernel; ++j)
      if (int64_t t = c[r] + pad - j; t >= 0 && t < taps[r]) pc.tap[r][j] = k0[r] + t * S;
  // A negative pad would skip input: pad 0 and drop the conv's first outputs.
  pc.pad_begin = std::max<int64_t>(pad, 0);
  pc.crop = pc.pad_begin - pad;
  const int64_t needed = (w.out[d] + S - 1) / S + pc.crop;
  pc.pad_end = std::max<int64_t>(0, needed - 1 - w.in[d] - pc.pad_begin + pc.kernel);
  pc.out = w.in[d] + pc.pad_begin + pc.pad_end - pc.kernel + 1;
  return pc;
}

struct Rewrite {
  int64_t n, c, m, group;
  PhaseConv h, w;
  std::vector<int64_t> out;  // the ConvTranspose's output spatial sizes
};

std::optional<Rewrite> rewrite_of(const Graph& g, const Node& n) {
  if (n.op_type != "ConvTranspose" || !(n.domain.empty() || n.domain == "ai.onnx") ||
      n.inputs.size() < 2 || n.outputs.size() != 1)
    return std::nullopt;
  const TensorType* x = g.type_of(n.inputs[0]);
  const Initializer* wt = constant_of(g, n.inputs[1]);
  if (!x || !wt || x->dtype != "float32" || wt->type.dtype != "float32" || x->shape.size() != 4 ||
      wt->type.shape.size() != 4)
    return std::nullopt;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant_of(g, n.inputs[2]))
    return std::nullopt;
  const std::vector<int64_t>& ws = wt->type.shape;
  const op_util::TransposeWindow w =
      op_util::conv_transpose_window(n, {x->shape[2], x->shape[3]}, {ws[2], ws[3]});
  if (w.dilation[0] != 1 || w.dilation[1] != 1) return std::nullopt;
  const int64_t group = n.attr<int64_t>("group").value_or(1);
  return Rewrite{x->shape[0],      x->shape[1],      ws[1] * group, group,
                 phase_conv(w, 0), phase_conv(w, 1), w.out};
}

// The phase conv's weight [M * Sh * Sw, C / group, Kh, Kw] and bias.
Initializer phase_weight(const Initializer& wt, const Rewrite& r) {
  const std::vector<int64_t>& ws = wt.type.shape;  // [C, M / group, kh, kw]
  const int64_t cg = r.c / r.group, mg = r.m / r.group, sh = r.h.stride, sw = r.w.stride;
  const std::vector<float> w = wt.as<float>();
  std::vector<float> v(static_cast<size_t>(r.m * sh * sw * cg * r.h.kernel * r.w.kernel), 0.f);
  size_t at = 0;
  for (int64_t m = 0; m < r.m; ++m)
    for (int64_t ph = 0; ph < sh; ++ph)
      for (int64_t pw = 0; pw < sw; ++pw)
        for (int64_t cc = 0; cc < cg; ++cc)
          for (int64_t jh = 0; jh < r.h.kernel; ++jh)
            for (int64_t jw = 0; jw < r.w.kernel; ++jw, ++at) {
              const int64_t kh = r.h.tap[ph][jh], kw = r.w.tap[pw][jw];
              if (kh < 0 || kw < 0) continue;
              const int64_t c = (m / mg) * cg + cc;
              v[at] = w[static_cast<size_t>(((c * mg + m % mg) * ws[2] + kh) * ws[3] + kw)];
            }
  return float_tensor({r.m * sh * sw, cg, r.h.kernel, r.w.kernel}, v);
}

// Appends the nodes that replace ConvTranspose `n`.
void lower(Graph& g, const Node& n, const Rewrite& r, std::vector<Node>& out) {
  const int64_t phases = r.h.stride * r.w.stride;
  auto value = [&](const std::string& suffix, std::vector<int64_t> shape) {
    std::string v = unique_value_name(g, n.name + "/" + suffix);
    g.value_info[v] = {"float32", std::move(shape)};
    return v;
  };
  auto constant = [&](const std::string& suffix, Initializer t) {
    std::string v = unique_value_name(g, n.name + "/" + suffix);
    set_initializer(g, v, std::move(t));
    return v;
  };
  auto node = [&](const std::string& op, const std::string& suffix, std::vector<std::string> inputs,
                  std::string output) {
    Node k;
    k.op_type = op;
    k.name = n.name + "/" + suffix;
    k.inputs = std::move(inputs);
    k.outputs = {std::move(output)};
    out.push_back(std::move(k));
    return &out.back();
  };

  Node conv;
  conv.op_type = "Conv";
  conv.name = n.name + "/phases";
  conv.inputs = {n.inputs[0],
                 constant("phase_weight", phase_weight(*constant_of(g, n.inputs[1]), r))};
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    std::vector<float> b = constant_of(g, n.inputs[2])->as<float>(), bias;
    for (float v : b) bias.insert(bias.end(), static_cast<size_t>(phases), v);
    conv.inputs.push_back(constant("phase_bias", float_tensor({r.m * phases}, bias)));
  }
  conv.attrs["kernel_shape"] = std::vector<int64_t>{r.h.kernel, r.w.kernel};
  conv.attrs["pads"] = std::vector<int64_t>{r.h.pad_begin, r.w.pad_begin, r.h.pad_end, r.w.pad_end};
  conv.attrs["group"] = r.group;
  const std::vector<int64_t> conv_shape = {r.n, r.m * phases, r.h.out, r.w.out};
  conv.outputs = {value("phases", conv_shape)};
  out.push_back(conv);
  std::string y = conv.outputs[0];

  const int64_t rows = r.h.out * r.h.stride, cols = r.w.out * r.w.stride;
  if (phases > 1) {
    // [N, M, Sh, Sw, Qh, Qw] -> [N, M, Qh, Sh, Qw, Sw] -> [N, M, Qh * Sh, Qw * Sw].
    const std::vector<int64_t> split = {r.n, r.m, r.h.stride, r.w.stride, r.h.out, r.w.out};
    y = node("Reshape", "split_phases", {y, constant("split_shape", int64_tensor(split))},
             value("split", split))
            ->outputs[0];
    const std::vector<int64_t> woven = {r.n, r.m, r.h.out, r.h.stride, r.w.out, r.w.stride};
    Node* t = node("Transpose", "interleave", {y}, value("interleaved", woven));
    t->attrs["perm"] = std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    y = t->outputs[0];
    const std::vector<int64_t> merged = {r.n, r.m, rows, cols};
    y = node("Reshape", "merge_phases", {y, constant("merged_shape", int64_tensor(merged))},
             value("merged", merged))
            ->outputs[0];
  }
  const std::vector<int64_t> begin = {r.h.crop * r.h.stride, r.w.crop * r.w.stride};
  if (begin[0] == 0 && begin[1] == 0 && rows == r.out[0] && cols == r.out[1]) {
    g.value_info.erase(out.back().outputs[0]);
    out.back().outputs[0] = n.outputs[0];  // the last node writes the output itself
    return;
  }
  node("Slice", "crop",
       {y, constant("starts", int64_tensor(begin)),
        constant("ends", int64_tensor({begin[0] + r.out[0], begin[1] + r.out[1]})),
        constant("axes", int64_tensor({2, 3}))},
       n.outputs[0]);
}

}  // namespace

int lower_conv_transpose(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    std::optional<Rewrite> r = rewrite_of(g, n);
    if (r) lower(g, n, *r, out);
    return r.has_value();
  });
}

}  // namespace kiln::graph::passes
