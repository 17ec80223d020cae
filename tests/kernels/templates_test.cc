// The operator-template registry: every registered template over odd
// workloads, its fallback config and random configs from its space, alone and
// with a fused epilogue (bias + relu, + residual for the convolutions),
// against the template's own reference; that reference against the plain
// logical references of ops/reference.h; workload keys; fallback rules; and
// the lowered IR of epilogue kernels (tile-sized anchor buffer, vector stores).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "codegen/target.h"
#include "harness.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/stmt.h"
#include "ops/batch_matmul.h"
#include "ops/batch_matmul_int8.h"
#include "ops/batch_matmul_int8_amx.h"
#include "ops/conv2d.h"
#include "ops/conv2d_bf16.h"
#include "ops/conv2d_int8.h"
#include "ops/conv2d_int8_amx.h"
#include "ops/dense.h"
#include "ops/dense_bf16.h"
#include "ops/dense_bf16_amx_template.h"
#include "ops/dense_int8.h"
#include "ops/dense_int8_amx_template.h"
#include "ops/depthwise_conv2d.h"
#include "ops/depthwise_conv2d_int8.h"
#include "ops/group_conv2d.h"
#include "ops/group_conv2d_lanes.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "ops/winograd_conv2d.h"
#include "ops/winograd_conv2d_int8.h"
#include "ops/workload.h"

namespace kiln::test {
namespace {

// The ISA row of this machine, whose JIT runs every kernel here.
const Isa& host_isa() {
  static const Isa isa = codegen::Target::host().isa();
  return isa;
}

using ops::Conv2DAttrs;
using ops::OpTemplate;
using ops::Workload;
using schedule::Config;

// The templates this file has workloads for. Every test iterates the registry
// (ops::template_names()) instead, so that a newly registered template is
// tested at once (and fails in workloads_of() until it gets workloads).
const char* const kKnownNames[] = {"conv2d_NCHWc.x86",
                                   "depthwise_conv2d_NCHWc.x86",
                                   "dense_pack.x86",
                                   "dense_nopack.x86",
                                   "batch_matmul.x86",
                                   "group_conv2d_NCHWc.x86",
                                   "conv2d_winograd_NCHWc.x86",
                                   "dense_int8.x86",
                                   "dense_int8_amx.x86",
                                   "conv2d_NCHWc_int8.x86",
                                   "conv2d_NCHWc_int8_amx.x86",
                                   "depthwise_conv2d_NCHWc_int8.x86",
                                   "batch_matmul_int8.x86",
                                   "batch_matmul_int8_amx.x86",
                                   "dense_bf16.x86",
                                   "dense_bf16_amx.x86",
                                   "conv2d_NCHWc_bf16.x86",
                                   "group_conv2d_lanes_NCHWc.x86"};

bool is_conv(const std::string& name) {
  return name == "conv2d_NCHWc.x86" || name == "depthwise_conv2d_NCHWc.x86" ||
         name == "group_conv2d_NCHWc.x86" || name == "conv2d_winograd_NCHWc.x86" ||
         name == "group_conv2d_lanes_NCHWc.x86";
}

// The logical attributes of a conv template's workload.
Conv2DAttrs conv_attrs(const Workload& w) {
  if (w.template_name == "depthwise_conv2d_NCHWc.x86" ||
      w.template_name == "depthwise_conv2d_NCHWc_int8.x86")
    return ops::conv2d_attrs(w, ops::ConvKind::kDepthwise);
  if (w.template_name == "group_conv2d_NCHWc.x86" ||
      w.template_name == "group_conv2d_lanes_NCHWc.x86")
    return ops::conv2d_attrs(w, ops::ConvKind::kGrouped);
  return ops::conv2d_attrs(w, ops::ConvKind::kDense);
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<ir::Expr> exprs(const std::vector<int64_t>& s) {
  return std::vector<ir::Expr>(s.begin(), s.end());
}

Workload conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t kh, int64_t kw,
              std::vector<int64_t> strides, std::vector<int64_t> pads,
              std::vector<int64_t> dilation) {
  return Workload{"conv2d_NCHWc.x86",
                  {{"data", {n, c, h, w}},
                   {"kernel", {oc, c, kh, kw}},
                   {"strides", strides},
                   {"pads", pads},
                   {"dilation", dilation}}};
}

Workload depthwise(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   std::vector<int64_t> strides, std::vector<int64_t> pads,
                   std::vector<int64_t> dilation) {
  return Workload{"depthwise_conv2d_NCHWc.x86",
                  {{"data", {n, c, h, w}},
                   {"kernel", {c, 1, kh, kw}},
                   {"strides", strides},
                   {"pads", pads},
                   {"dilation", dilation}}};
}

// A grouped conv: `groups` groups of c/groups input and oc/groups output channels.
Workload group_conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t groups,
                    int64_t kh, int64_t kw, std::vector<int64_t> strides, std::vector<int64_t> pads,
                    std::vector<int64_t> dilation) {
  return Workload{"group_conv2d_NCHWc.x86",
                  {{"data", {n, c, h, w}},
                   {"kernel", {oc, c / groups, kh, kw}},
                   {"strides", strides},
                   {"pads", pads},
                   {"dilation", dilation}}};
}

Workload dense(const char* name, int64_t m, int64_t n, int64_t k) {
  return ops::dense_workload(name, {m, n, k});
}

Workload bmm(int64_t b, int64_t m, int64_t k, int64_t bb, int64_t n) {
  return Workload{"batch_matmul.x86", {{"a", {b, m, k}}, {"b", {bb, k, n}}}};
}

// Workloads per template: odd widths (7, 13, 56), C = 3, OC 24/40/72/1000,
// stride 2, dilation 2, asymmetric pads, M = 1, N not a multiple of 16,
// broadcast weights.
std::vector<Workload> workloads_of(const std::string& name) {
  if (name == "conv2d_NCHWc.x86")
    return {conv(1, 3, 13, 13, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}),
            conv(1, 16, 7, 7, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}),
            conv(2, 8, 10, 13, 16, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}),
            conv(1, 32, 3, 3, 1000, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
            conv(1, 16, 3, 56, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
            conv(1, 24, 5, 9, 72, 3, 2, {2, 1}, {1, 0, 1, 1}, {1, 1})};
  if (name == "conv2d_winograd_NCHWc.x86") {
    std::vector<Workload> w = {conv(1, 16, 7, 7, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}),
                               conv(2, 8, 10, 13, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
                               conv(1, 3, 5, 9, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1})};
    for (Workload& x : w) x.template_name = name;
    return w;
  }
  if (name == "depthwise_conv2d_NCHWc.x86")
    return {depthwise(1, 24, 13, 13, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
            depthwise(1, 40, 9, 14, 5, 5, {2, 2}, {2, 2, 1, 1}, {1, 1}),
            depthwise(2, 16, 8, 8, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}),
            depthwise(1, 3, 7, 56, 3, 3, {1, 1}, {0, 1, 0, 1}, {1, 1})};
  if (name == "group_conv2d_NCHWc.x86")
    return {group_conv(1, 32, 9, 13, 32, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
            group_conv(2, 12, 7, 7, 24, 4, 3, 3, {2, 2}, {1, 0, 2, 1}, {1, 1}),
            group_conv(1, 64, 5, 11, 64, 2, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
            group_conv(1, 6, 8, 10, 12, 6, 3, 2, {1, 2}, {2, 1, 2, 1}, {2, 1})};
  // Groups of 2, 4 and 8 channels, several per block; widths the ow tile
  // does not divide, stride 2, dilation, asymmetric pads (group_conv2d_lanes_test.cc has more).
  if (name == "group_conv2d_lanes_NCHWc.x86") {
    std::vector<Workload> w = {
        group_conv(1, 32, 9, 13, 32, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
        group_conv(2, 16, 7, 7, 16, 2, 3, 3, {2, 2}, {1, 0, 2, 1}, {1, 1}),
        group_conv(1, 48, 8, 10, 48, 24, 3, 2, {1, 2}, {2, 1, 2, 1}, {2, 1})};
    for (Workload& x : w) x.template_name = name;
    return w;
  }
  if (name == "dense_pack.x86" || name == "dense_nopack.x86")
    return {dense(name.c_str(), 1, 1000, 96), dense(name.c_str(), 7, 5, 13),
            dense(name.c_str(), 33, 17, 29), dense(name.c_str(), 64, 48, 40),
            // Several rows, N no multiple of 2 or 3 vectors: whole-vector
            // column blocks and a partial last one (dense_fallback_tile).
            dense(name.c_str(), 8, 40, 24)};
  if (name == "batch_matmul.x86")
    return {bmm(2, 7, 13, 2, 20), bmm(3, 16, 24, 1, 33), bmm(4, 1, 64, 4, 16)};
  // The integer templates: K, N, C, OC, OW not multiples of their tiles (int8_test.cc has
  // many more shapes, the logical references and the requantizing epilogues).
  if (name == "dense_int8.x86")
    return {ops::dense_int8_workload(1, 1000, 96), ops::dense_int8_workload(7, 5, 13),
            ops::dense_int8_workload(33, 17, 29), ops::dense_int8_workload(64, 48, 40)};
  // M, N not multiples of 16, K with and without a 64-byte tail.
  if (name == "dense_int8_amx.x86")
    return {ops::dense_int8_amx_workload(1, 1000, 96), ops::dense_int8_amx_workload(7, 5, 12),
            ops::dense_int8_amx_workload(33, 17, 28), ops::dense_int8_amx_workload(64, 48, 64)};
  if (name == "batch_matmul_int8.x86")
    return {ops::batch_matmul_int8_workload(2, 2, 7, 20, 13),
            ops::batch_matmul_int8_workload(3, 1, 16, 24, 33),
            ops::batch_matmul_int8_workload(4, 4, 1, 64, 16)};
  // M, N not multiples of 16, K with and without a 64-byte tail, b broadcast.
  if (name == "batch_matmul_int8_amx.x86")
    return {ops::batch_matmul_int8_amx_workload(2, 2, 7, 20, 12),
            ops::batch_matmul_int8_amx_workload(3, 1, 17, 24, 68),
            ops::batch_matmul_int8_amx_workload(4, 4, 1, 64, 16)};
  if (name == "conv2d_NCHWc_int8.x86") {
    auto c8 = [](const Workload& f, int64_t pad_value) {
      return ops::conv2d_int8_workload(conv_attrs(f), pad_value);
    };
    return {c8(conv(1, 3, 13, 13, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}), 128),
            c8(conv(1, 16, 7, 7, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}), 7),
            c8(conv(2, 8, 10, 13, 20, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}), 255),
            c8(conv(1, 32, 3, 3, 100, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 0),
            // fold_kw: the dot over (kw, c) pairs, 3 x 7 -> 24 bytes
            ops::with_folded_kw(c8(conv(1, 3, 17, 15, 20, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}), 9))};
  }
  // Integer Winograd F(2x2): odd output sides (partial tiles), OC 40 in blocks
  // of 16, C 3 in a block of 4, batch 2.
  if (name == "conv2d_winograd_NCHWc_int8.x86") {
    auto w8 = [](const Workload& f, int64_t pad_value) {
      return ops::winograd_int8_workload(ops::conv2d_int8_workload(conv_attrs(f), pad_value));
    };
    return {w8(conv(1, 16, 7, 7, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}), 7),
            w8(conv(2, 8, 10, 13, 20, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}), 255),
            w8(conv(1, 3, 5, 9, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}), 128)};
  }
  // Whole-channel blocks (C 3 -> 4, OC 30 -> 32): the stem's 7x7, a strided 3x3
  // with a 64-byte K tail, a 1x1 (the direct path). amx_conv_template_test.cc has more.
  if (name == "conv2d_NCHWc_int8_amx.x86") {
    auto amx = [](const Workload& f, int64_t pad_value) {
      return ops::conv2d_int8_amx_workload(conv_attrs(f), pad_value);
    };
    return {amx(conv(1, 3, 19, 17, 30, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}), 128),
            amx(conv(1, 20, 9, 7, 24, 3, 3, {2, 1}, {1, 0, 1, 1}, {1, 1}), 7),
            amx(conv(2, 36, 5, 6, 17, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 0)};
  }
  if (name == "depthwise_conv2d_NCHWc_int8.x86") {  // depthwise_int8_test.cc has more
    auto dw8 = [](const Workload& f, int64_t pad_value) {
      return ops::depthwise_conv2d_int8_workload(conv_attrs(f), pad_value);
    };
    auto dw = [](int64_t c, int64_t h, int64_t w, int64_t k, std::vector<int64_t> s,
                 std::vector<int64_t> p) {
      return ops::conv2d_workload("depthwise_conv2d_NCHWc.x86", {1, c, h, w, c, k, k, s[0], s[1],
                                                                 p[0], p[1], p[2], p[3], 1, 1, c});
    };
    // The AMX targets' whole-channel block (whole_channels=[1]): C 40 -> one
    // block of 40 in chunks of 16 (a partial last one) or 8.
    Workload whole = ops::depthwise_conv2d_int8_workload(
        conv_attrs(dw(40, 7, 9, 3, {1, 1}, {1, 0, 1, 2})), 77, /*whole_channels=*/true);
    return {dw8(dw(24, 9, 11, 3, {1, 1}, {1, 1, 1, 1}), 128),
            dw8(dw(20, 10, 13, 5, {2, 2}, {2, 1, 2, 1}), 3), whole};
  }
  // The bf16 templates: K odd, N, C, OC, OW not multiples of their tiles, C = 3
  // (bf16_test.cc has the logical references and the fused epilogues).
  if (name == "dense_bf16_amx.x86")
    return {ops::dense_bf16_amx_workload(1, 1000, 96), ops::dense_bf16_amx_workload(7, 5, 13),
            ops::dense_bf16_amx_workload(33, 17, 29), ops::dense_bf16_amx_workload(64, 48, 40)};
  if (name == "dense_bf16.x86")
    return {ops::dense_bf16_workload(1, 1000, 96), ops::dense_bf16_workload(7, 5, 13),
            ops::dense_bf16_workload(33, 17, 29), ops::dense_bf16_workload(64, 48, 40)};
  if (name == "conv2d_NCHWc_bf16.x86") {
    auto cb = [](const Workload& f) { return ops::conv2d_bf16_workload(conv_attrs(f)); };
    return {cb(conv(1, 3, 13, 13, 24, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1})),
            cb(conv(1, 16, 7, 7, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1})),
            cb(conv(2, 8, 10, 13, 20, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2})),
            cb(conv(1, 32, 3, 3, 100, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}))};
  }
  ADD_FAILURE() << "no workloads for " << name;
  return {};
}

// Host data for the template's inputs (physical layouts): random logical
// tensors converted where the layout is blocked or packed, so that the same
// logical data also feeds the logical references.
struct Inputs {
  std::vector<std::vector<float>> logical, physical;
};

Inputs make_inputs(const OpTemplate& t, const Workload& w, const Config& cfg,
                   std::mt19937_64& rng) {
  Inputs in;
  auto shapes = t.input_shapes(w, cfg);
  const std::string name = t.name();
  if (is_conv(name)) {
    Conv2DAttrs a = conv_attrs(w);
    int64_t icb = shapes[0][4], ocb = t.output_shape(w, cfg).back();
    int64_t wic = a.in_channels / a.groups;
    in.logical = {random_floats(a.batch * a.in_channels * a.height * a.width, rng),
                  random_floats(a.out_channels * wic * a.kernel_h * a.kernel_w, rng)};
    bool depthwise = name == "depthwise_conv2d_NCHWc.x86";
    if (name == "conv2d_winograd_NCHWc.x86")
      in.physical = {
          ops::nchw_to_nchwc(in.logical[0].data(), a.batch, a.in_channels, a.height, a.width, icb),
          ops::winograd_pack_weight(w, cfg, in.logical[1].data())};
    else if (name == "group_conv2d_lanes_NCHWc.x86")
      in.physical = {
          ops::nchw_to_nchwc(in.logical[0].data(), a.batch, a.in_channels, a.height, a.width, icb),
          ops::group_conv2d_lanes_pack_weight(in.logical[1].data(), a.in_channels, wic, a.kernel_h,
                                              a.kernel_w, icb)};
    else
      in.physical = {
          ops::nchw_to_nchwc(in.logical[0].data(), a.batch, a.in_channels, a.height, a.width, icb),
          a.groups == 1 || depthwise
              ? ops::oihw_to_blocked(in.logical[1].data(), a.out_channels, wic, a.kernel_h,
                                     a.kernel_w, depthwise ? 1 : icb, ocb)
              : ops::group_conv2d_pack_weight(in.logical[1].data(), a.groups, a.out_channels, wic,
                                              a.kernel_h, a.kernel_w, icb, ocb)};
  } else if (name == "dense_pack.x86") {
    const auto &d = w.get("data"), &b = w.get("weight");
    in.logical = {random_floats(product(d), rng), random_floats(product(b), rng)};
    in.physical = {in.logical[0], ops::pack_weight(w, cfg, in.logical[1].data())};
  } else {
    for (auto& s : shapes) in.logical.push_back(random_floats(product(s), rng));
    in.physical = in.logical;
  }
  for (size_t i = 0; i < shapes.size(); ++i)
    EXPECT_EQ(in.physical[i].size(), size_t(product(shapes[i]))) << "input " << i;
  return in;
}

// The template's reference output in its physical layout.
std::vector<float> template_reference(const OpTemplate& t, const Workload& w, const Config& cfg,
                                      const Inputs& in) {
  std::vector<float> out(product(t.output_shape(w, cfg)), NAN);
  std::vector<const float*> ptrs;
  for (auto& v : in.physical) ptrs.push_back(v.data());
  t.reference(w, cfg, ptrs, out.data());
  return out;
}

// The template reference converted to the logical layout vs ops/reference.h.
void expect_reference_matches_logical(const OpTemplate& t, const Workload& w, const Config& cfg,
                                      std::mt19937_64& rng) {
  Inputs in = make_inputs(t, w, cfg, rng);
  auto out = template_reference(t, w, cfg, in);
  std::vector<float> logical, expected;
  const std::string name = t.name();
  if (is_conv(name)) {
    Conv2DAttrs a = conv_attrs(w);
    int64_t ocb = t.output_shape(w, cfg)[4];
    logical =
        ops::nchwc_to_nchw(out.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), ocb);
    expected.resize(logical.size());
    ops::reference::conv2d_nchw_grouped(in.logical[0].data(), in.logical[1].data(), expected.data(),
                                        a);
    if (a.groups == 1 && a.pad_top == a.pad_bottom && a.pad_left == a.pad_right) {
      // The original symmetric-padding reference agrees too.
      ops::Conv2DParams p{a.batch,    a.in_channels, a.height,    a.width,    a.out_channels,
                          a.kernel_h, a.kernel_w,    a.stride_h,  a.stride_w, a.pad_top,
                          a.pad_left, a.dilation_h,  a.dilation_w};
      std::vector<float> plain(logical.size());
      ops::reference::conv2d_nchw(in.logical[0].data(), in.logical[1].data(), plain.data(), p);
      EXPECT_LE(ops::reference::max_relative_error(plain.data(), expected.data(), plain.size()),
                1e-6);
    }
  } else if (name == "batch_matmul.x86") {
    const auto &a = w.get("a"), &b = w.get("b");
    logical = out;
    expected.resize(out.size());
    ops::reference::batch_matmul(in.logical[0].data(), in.logical[1].data(), expected.data(), a[0],
                                 b[0], a[1], b[2], a[2]);
  } else {
    const auto& d = w.get("data");
    int64_t N = w.get("weight")[1];
    logical = out;
    expected.resize(out.size());
    ops::reference::dense(in.logical[0].data(), in.logical[1].data(), expected.data(), d[0], N,
                          d[1]);
  }
  // Winograd's reference runs the algorithm from the float transformed
  // weight: its rounding, amplified by the transforms, stays under 1e-5.
  EXPECT_LE(ops::reference::max_relative_error(logical.data(), expected.data(), expected.size()),
            name == "conv2d_winograd_NCHWc.x86" ? 1e-5 : 1e-6);
}

// The epilogue out = relu(anchor + bias[channel] (+ residual)), written as two
// stages so that the template must inline the intermediate one. Bias covers
// the channel axes: [C/cb, cb] of a conv output, [N] of a (batched) matmul.
struct Epilogue {
  ir::Tensor output;
  std::vector<ir::Tensor> extra_inputs;  // bias (, residual)
};

std::vector<int64_t> bias_shape(const std::vector<int64_t>& s) {
  if (s.size() == 5) return {s[1], s[4]};
  return {s.back()};
}

int64_t bias_index(const std::vector<int64_t>& s, int64_t flat) {
  if (s.size() == 5) return (flat / (s[2] * s[3] * s[4])) % s[1] * s[4] + flat % s[4];
  return flat % s.back();
}

Epilogue make_epilogue(const ir::Tensor& anchor, bool residual) {
  auto shape = ops::detail::const_shape(anchor);
  ir::Tensor bias = ir::placeholder(exprs(bias_shape(shape)), ir::DataType::f32(), "bias");
  ir::Tensor res =
      residual ? ir::placeholder(exprs(shape), ir::DataType::f32(), "residual") : nullptr;
  ir::Tensor biased = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> idx(i.begin(), i.end());
        ir::Expr b = shape.size() == 5 ? ir::at(bias, i[1], i[4]) : ir::at(bias, i.back());
        ir::Expr v = ir::read(anchor, idx) + b;
        return res ? v + ir::read(res, idx) : v;
      },
      "biased");
  ir::Tensor out = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        return ir::max(ir::read(biased, std::vector<ir::Expr>(i.begin(), i.end())),
                       ir::make_float(0.0));
      },
      "relu");
  Epilogue e{out, {bias}};
  if (res) e.extra_inputs.push_back(res);
  return e;
}

// Walks the lowered body: allocations (name, size) and whether some store to
// `out` writes a vector.
void inspect(const ir::Stmt& s, const std::string& out,
             std::vector<std::pair<std::string, int64_t>>& allocs, bool& vector_store) {
  if (!s) return;
  if (auto* f = s.as<ir::ForNode>()) return inspect(f->body, out, allocs, vector_store);
  if (auto* a = s.as<ir::AllocateNode>()) {
    const int64_t* n = ir::as_const_int(a->size);
    allocs.emplace_back(a->buffer->name, n ? *n : -1);
    return inspect(a->body, out, allocs, vector_store);
  }
  if (auto* l = s.as<ir::LetStmtNode>()) return inspect(l->body, out, allocs, vector_store);
  if (auto* i = s.as<ir::IfThenElseNode>()) {
    inspect(i->then_case, out, allocs, vector_store);
    return inspect(i->else_case, out, allocs, vector_store);
  }
  if (auto* q = s.as<ir::SeqNode>()) {
    for (auto& x : q->seq) inspect(x, out, allocs, vector_store);
    return;
  }
  if (auto* st = s.as<ir::StoreNode>())
    if (st->buffer->name == out && st->value.dtype().lanes > 1) vector_store = true;
}

struct Built {
  ir::LoweredFunc plain, fused;
  std::vector<ir::Tensor> fused_args;
  ir::Tensor anchor;
};

// facts: added to the instance before it is scheduled (TemplateInstance::
// facts: the build's parallel splits).
Built build(const OpTemplate& t, const Workload& w, const Config& cfg, bool residual,
            const std::map<std::string, int64_t>& facts = {}) {
  Built b;
  ops::TemplateInstance plain = t.compute(w, cfg);
  plain.facts.insert(facts.begin(), facts.end());
  schedule::Schedule plain_sch = schedule::create_schedule({plain.anchor});
  t.schedule(plain_sch, plain, plain.anchor, cfg);
  std::vector<ir::Tensor> plain_args = plain.inputs;
  plain_args.push_back(plain.anchor);
  b.plain = schedule::lower(plain_sch, plain_args, "plain");

  ops::TemplateInstance inst = t.compute(w, cfg);
  inst.facts.insert(facts.begin(), facts.end());
  Epilogue e = make_epilogue(inst.anchor, residual);
  schedule::Schedule sch = schedule::create_schedule({e.output});
  t.schedule(sch, inst, e.output, cfg);
  b.fused_args = inst.inputs;
  b.fused_args.insert(b.fused_args.end(), e.extra_inputs.begin(), e.extra_inputs.end());
  b.fused_args.push_back(e.output);
  b.fused = schedule::lower(sch, b.fused_args, "fused");
  b.anchor = inst.anchor;
  return b;
}

// Runs the template alone and with the epilogue, both against the reference,
// and checks the fused kernel's IR.
void check_config(const OpTemplate& t, const Workload& w, const Config& cfg, std::mt19937_64& rng,
                  const std::map<std::string, int64_t>& facts = {}) {
  std::string fact_names;
  for (const auto& [name, value] : facts) fact_names += " " + name + "=" + std::to_string(value);
  SCOPED_TRACE(w.key() + " config " + cfg.to_json() + fact_names);
  auto t0 = std::chrono::steady_clock::now();
  struct Timer {
    std::string what;
    std::chrono::steady_clock::time_point t0;
    ~Timer() {
      if (std::getenv("KILN_TEST_TIMES"))
        fprintf(stderr, "%8.1f ms %s\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count(),
                what.c_str());
    }
  } timer{w.key() + " " + cfg.to_json(), t0};
  bool residual = t.output_shape(w, cfg).size() == 5;
  Built b = build(t, w, cfg, residual, facts);
  auto mod = codegen::jit_compile({b.plain, b.fused}, host_target());

  Inputs in = make_inputs(t, w, cfg, rng);
  auto ref = template_reference(t, w, cfg, in);
  std::vector<float> out(ref.size(), NAN);
  std::vector<void*> args;
  for (auto& v : in.physical) args.push_back(v.data());
  args.push_back(out.data());
  ASSERT_EQ(mod->get_function("plain")(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(out.data(), ref.data(), ref.size()), 1e-5);

  auto shape = t.output_shape(w, cfg);
  auto bias = random_floats(product(bias_shape(shape)), rng);
  auto res = random_floats(residual ? ref.size() : 0, rng);
  std::vector<float> expected(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    float v = ref[i] + bias[bias_index(shape, i)] + (residual ? res[i] : 0.0f);
    expected[i] = std::max(v, 0.0f);
  }
  std::fill(out.begin(), out.end(), NAN);
  args.pop_back();
  args.push_back(bias.data());
  if (residual) args.push_back(res.data());
  args.push_back(out.data());
  ASSERT_EQ(mod->get_function("fused")(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(out.data(), expected.data(), expected.size()), 1e-5);

  // The anchor lives only as a register tile inside the epilogue's loops: no
  // buffer as large as the output, and the epilogue stores vectors.
  std::vector<std::pair<std::string, int64_t>> allocs;
  bool vector_store = false;
  inspect(b.fused.body, "relu", allocs, vector_store);
  bool conv = shape.size() == 5;
  int64_t lanes = conv ? shape.back() : cfg.split("tile_x").back();
  // Winograd's anchor (A^T M A) is inlined into the epilogue: no buffer at all.
  bool winograd = t.name() == "conv2d_winograd_NCHWc.x86";
  int64_t tile =
      winograd ? 0 : lanes * (conv ? cfg.split("tile_ow").back() : cfg.split("tile_y").back());
  // conv2d_NCHWc's register tile also spans oc_reg channel blocks and oh_reg
  // rows (at most: the template brings them down to divisors).
  if (t.name() == "conv2d_NCHWc.x86" || t.name() == "group_conv2d_NCHWc.x86")
    tile *= cfg.knob("oc_reg") * cfg.knob("oh_reg");
  // A chunked reduction keeps whole rows' accumulators between chunks, pixel
  // tiles the whole plane's (every row, the pixels in whole tiles), and
  // plane_rows every row's whole rows.
  if (t.name() == "conv2d_NCHWc.x86") {
    const auto& ow = cfg.split("tile_ow");
    int64_t per_column = tile / ow.back() / cfg.knob("oh_reg");
    if (ops::detail::pixel_tiles(cfg)) {
      int64_t pixels = shape[2] * shape[3];
      tile = per_column * ((pixels + ow.back() - 1) / ow.back()) * ow.back();
    } else if (ops::detail::ic_chunk_blocks(cfg, w.get("data")[1] / cfg.split("tile_ic").back()) >
               0) {
      int64_t rows = ops::detail::plane_rows(cfg) ? shape[2] : cfg.knob("oh_reg");
      tile = per_column * rows * ow.front() * ow.back();
    }
  }
  // A dense reduction in blocks keeps the whole task's accumulators between
  // blocks.
  if ((t.name() == "dense_pack.x86" || t.name() == "dense_nopack.x86") &&
      ops::detail::dense_k_block(cfg, w.get("weight")[0]) > 0) {
    const auto &ty = cfg.split("tile_y"), &tx = cfg.split("tile_x");
    tile = ty[1] * ty[2] * tx[1] * tx[2];
  }
  for (auto& [name, size] : allocs) {
    EXPECT_GT(size, 0) << name;
    if (name == b.anchor->name) {
      EXPECT_LE(size, tile) << "anchor buffer " << name << " is larger than its register tile";
    }
    EXPECT_EQ(name.find("biased"), std::string::npos) << "epilogue stage was not inlined";
  }
  if (lanes > 1) {
    EXPECT_TRUE(vector_store) << "epilogue is not vectorized";
  }
}

// Whether the template has other element types than float32 (the integer
// templates): those run on typed buffers (check_typed_config).
bool is_typed(const OpTemplate& t, const Workload& w) {
  if (t.output_dtype(w) != ir::DataType::f32()) return true;
  for (ir::DataType d : t.input_dtypes(w))
    if (d != ir::DataType::f32()) return true;
  return false;
}

// The template alone on random inputs of its element types (ops::fill_random:
// uint8/int8 over their full range) against reference_typed(): integer outputs
// bit-exact, float outputs (the bf16 templates) within the tuner's rtol. The
// epilogues and logical references are in int8_test.cc and bf16_test.cc.
void check_typed_config(const OpTemplate& t, const Workload& w, const Config& cfg,
                        std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  // The template's own loops where it builds them (dense_int8_amx.x86: tiles
  // emulated on a host without AMX), else its schedule lowered.
  ir::LoweredFunc f = ops::lower_template_kernel(t, w, cfg, schedule::LowerOptions{});
  f.name = "plain";
  auto mod = codegen::jit_compile({f}, host_target());
  auto types = t.input_dtypes(w);
  auto shapes = t.input_shapes(w, cfg);
  ASSERT_EQ(types.size(), shapes.size());
  std::vector<std::vector<uint8_t>> in;
  std::vector<const void*> ptrs;
  std::vector<void*> args;
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.emplace_back(size_t(product(shapes[i])) * types[i].bytes());
    t.fill_random_input(w, i, types[i], in.back().data(), product(shapes[i]), rng);
    ptrs.push_back(in.back().data());
    args.push_back(in.back().data());
  }
  ir::DataType ot = t.output_dtype(w);
  int64_t n = product(t.output_shape(w, cfg));
  std::vector<uint8_t> ref(size_t(n) * ot.bytes()), out(ref.size(), 0xA5);
  t.reference_typed(w, cfg, ptrs, ref.data());
  args.push_back(out.data());
  ASSERT_EQ(mod->get_function("plain")(args.data()), 0);
  if (ot.is_integer())
    EXPECT_EQ(ops::max_error(ot, out.data(), ref.data(), n), 0.0) << "not bit-exact";
  else
    EXPECT_LE(ops::max_error(ot, out.data(), ref.data(), n), 1e-4);
}

void check_template(const std::string& name, uint64_t seed) {
  const OpTemplate& t = ops::get_template(name);
  std::mt19937_64 rng(seed);
  for (const Workload& w : workloads_of(name)) {
    if (is_typed(t, w)) {
      std::vector<Config> configs = {t.fallback(w, host_isa())};
      for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                                 "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",
                                 "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"})
        configs.push_back(t.fallback(w, codegen::Target::parse(target).isa()));
      for (int i = 0; i < configs_per_shape(3); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_typed_config(t, w, cfg, rng);
      continue;
    }
    auto space = t.space(w);
    // The fallback of every row of the ISA table, all run on this machine's
    // JIT: register tiles differ, results must not.
    std::vector<Config> configs = {t.fallback(w, host_isa())};
    for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                               "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",
                               "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
                               "llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon"})
      configs.push_back(t.fallback(w, codegen::Target::parse(target).isa()));
    for (int i = 0; i < configs_per_shape(3); ++i) configs.push_back(space.random(rng));
    expect_reference_matches_logical(t, w, configs[0], rng);
    expect_reference_matches_logical(t, w, configs[1], rng);
    for (const Config& cfg : configs) check_config(t, w, cfg, rng);
  }
}

// One test per registered template, named after it ("conv2d_NCHWc_x86").
class RegisteredTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(RegisteredTemplate, MatchesReferences) {
  // Seeds 101, 102, ... in registry order.
  auto names = ops::template_names();
  auto pos = std::find(names.begin(), names.end(), GetParam()) - names.begin();
  check_template(GetParam(), 101 + pos);
}

INSTANTIATE_TEST_SUITE_P(Templates, RegisteredTemplate, ::testing::ValuesIn(ops::template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string id = info.param;
                           std::replace(id.begin(), id.end(), '.', '_');
                           return id;
                         });

TEST(Templates, RegistryFindsEveryTemplate) {
  auto names = ops::template_names();
  for (const char* n : kKnownNames)
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << " is not registered";
  for (const std::string& n : names) {
    const OpTemplate* t = ops::find_template(n);
    ASSERT_NE(t, nullptr) << n;
    EXPECT_EQ(t->name(), n);
    EXPECT_EQ(&ops::get_template(n), t);
    EXPECT_EQ(std::count(names.begin(), names.end(), n), 1) << n << " is registered twice";
  }
  EXPECT_EQ(ops::find_template("conv2d_NCHWc.arm"), nullptr);
  EXPECT_THROW(ops::get_template("nope.x86"), std::invalid_argument);
}

TEST(Templates, WorkloadKeyRoundTrip) {
  Workload w = conv(1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(w.key(),
            "conv2d_NCHWc.x86(data=[1,64,56,56],kernel=[64,64,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],dtype=float32)");
  for (const std::string& n : ops::template_names())
    for (const Workload& x : workloads_of(n)) {
      EXPECT_EQ(Workload::parse(x.key()), x) << x.key();
      EXPECT_EQ(Workload::parse(x.key()).key(), x.key());
    }
  Workload odd{"t.x", {{"e", {}}, {"neg", {-3, 0, 12345678901}}}, "int8"};
  EXPECT_EQ(Workload::parse(odd.key()), odd);
  EXPECT_EQ(odd.get("neg")[2], 12345678901);
  EXPECT_THROW(odd.get("missing"), std::invalid_argument);
  for (const char* bad :
       {"", "t(", "t()", "t(a=[1],)", "t(a=[1,],dtype=float32)", "t(a=[1]dtype=float32)",
        "t(a=[1],dtype=float32)x", "t(a=[x],dtype=f)", "t(a=[1],a=[2],dtype=float32)",
        "(a=[1],dtype=float32)", "t(a=[99999999999999999999],dtype=float32)"}) {
    EXPECT_THROW(Workload::parse(bad), std::invalid_argument) << bad;
    try {
      Workload::parse(bad);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

Isa isa_of(const std::string& target) { return codegen::Target::parse(target).isa(); }

// The fallback rules on AVX-512 (32 zmm, 16 lanes; below), and where the ISA
// changes them (FallbackRegisterTilesFollowTheIsa).
TEST(Templates, FallbackRules) {
  static const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  auto cfg = [](const Workload& w) {
    return ops::get_template(w.template_name).fallback(w, avx512);
  };
  // First layer: C = 3 -> ic_bn 3; OW 112 has no divisor in [8, 24] but 16.
  Config c1 = cfg(conv(1, 3, 224, 224, 64, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}));
  EXPECT_EQ(c1.split("tile_ic").back(), 3);
  EXPECT_EQ(c1.split("tile_oc").back(), 16);
  EXPECT_EQ(c1.split("tile_ow").back(), 16);
  EXPECT_EQ(c1.knob("unroll_kw"), 0);
  Config c2 = cfg(conv(1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  EXPECT_EQ(c2.split("tile_ic").back(), 16);
  EXPECT_EQ(c2.split("tile_ow").back(), 14);
  EXPECT_EQ(c2.knob("unroll_kw"), 1);
  // OC 1000 -> 8; OC 24 -> 8; C 20 -> 10; a prime width gets a partial power-of-two tile.
  Config c3 = cfg(conv(1, 20, 149, 149, 1000, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}));
  EXPECT_EQ(c3.split("tile_oc").back(), 8);
  EXPECT_EQ(c3.split("tile_ic").back(), 10);
  EXPECT_EQ(c3.split("tile_ow"), (std::vector<int64_t>{10, 16}));
  EXPECT_EQ(cfg(conv(1, 16, 7, 7, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1})).split("tile_oc").back(),
            8);
  Config d1 = cfg(depthwise(1, 72, 13, 13, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}));
  EXPECT_EQ(d1.split("tile_c").back(), 8);
  EXPECT_EQ(d1.split("tile_ow").back(), 13);
  EXPECT_EQ(d1.knob("unroll_kw"), 1);
  // ResNeXt-50's grouped 3x3s: blocks of the channels per group (4 -> 4,
  // 8 -> 8, 16 -> 16; 24 -> 8; 3 -> 3), never straddling a group.
  Config gc1 = cfg(group_conv(1, 128, 56, 56, 128, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  EXPECT_EQ(gc1.split("tile_ic"), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(gc1.split("tile_oc"), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(gc1.split("tile_ow").back(), 14);  // 1 zmm per column: 24 accumulators at most
  EXPECT_EQ(gc1.knob("unroll_kw"), 1);
  Config gc2 = cfg(group_conv(1, 1024, 14, 14, 1024, 32, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}));
  EXPECT_EQ(gc2.split("tile_ic").back(), 16);
  EXPECT_EQ(gc2.split("tile_oc"), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(gc2.split("tile_ow").back(), 7);
  Config gc3 = cfg(group_conv(1, 96, 9, 9, 144, 4, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  EXPECT_EQ(gc3.split("tile_ic").back(), 8);   // 24 channels per group
  EXPECT_EQ(gc3.split("tile_oc").back(), 12);  // 36 per group: largest divisor <= 16
  // GEMV: 40 columns (divides 1000), one row, deep k unroll, many column tasks.
  Config g = cfg(dense("dense_pack.x86", 1, 1000, 2048));
  EXPECT_EQ(g.split("tile_x"), (std::vector<int64_t>{25, 1, 40}));
  EXPECT_EQ(g.split("tile_y"), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(g.split("tile_k"), (std::vector<int64_t>{128, 16}));
  // The same columns at batch 8: whole vectors and a partial last block
  // (40-column blocks spilled, 8x slower), 8 rows of 2 vectors.
  Config g8 = cfg(dense("dense_pack.x86", 8, 1000, 1280));
  EXPECT_EQ(g8.split("tile_x").back(), 32);
  EXPECT_EQ(g8.split("tile_y").back(), 8);
  Config m = cfg(dense("dense_nopack.x86", 1024, 1024, 1024));
  EXPECT_EQ(m.split("tile_x"), (std::vector<int64_t>{4, 8, 32}));
  EXPECT_EQ(m.split("tile_y"), (std::vector<int64_t>{16, 8, 8}));
  EXPECT_EQ(m.split("tile_k"), (std::vector<int64_t>{256, 4}));
  EXPECT_EQ(m.knob("tile_order"), 1);
  // ConvNeXt-T's 196- and 49-row Linear layers: 7 rows divide M where 8 would
  // leave a guarded partial tile, and the parallel tasks split the row tiles
  // evenly (28 = 4 x 7, 7 = 1 x 7) instead of a last task of 4 rows in 64.
  Config r196 = cfg(dense("dense_pack.x86", 196, 384, 256));
  EXPECT_EQ(r196.split("tile_y"), (std::vector<int64_t>{4, 7, 7}));
  EXPECT_EQ(r196.split("tile_x").back(), 32);
  EXPECT_EQ(r196.knob("k_block"), 0);  // K = 256: one block
  // The same rows blocked (K = 1536, 2.25 MiB of weights): 7-row tiles, 8 per task.
  Config r196b = cfg(dense("dense_pack.x86", 196, 384, 1536));
  EXPECT_EQ(r196b.split("tile_y"), (std::vector<int64_t>{4, 8, 7}));
  EXPECT_EQ(r196b.knob("k_block"), 256);
  // Weights beyond L2 (9 MiB): blocks of 256 k steps, tasks of 8 row tiles
  // (64 rows: 64 x 256 floats of A) by 128 columns, a row tile walking the
  // task's panels within a block.
  Config blocked = cfg(dense("dense_pack.x86", 197, 768, 3072));
  EXPECT_EQ(blocked.knob("k_block"), 256);
  EXPECT_EQ(blocked.knob("tile_order"), 0);
  EXPECT_EQ(blocked.split("tile_y"), (std::vector<int64_t>{4, 8, 8}));
  EXPECT_EQ(blocked.split("tile_x"), (std::vector<int64_t>{6, 4, 32}));
  EXPECT_EQ(blocked.split("tile_k"), (std::vector<int64_t>{768, 4}));
  EXPECT_EQ(ops::detail::dense_k_block(blocked, 3072), 256);
  // 1 MiB of weights (the encoder's 128 x 1024 x 256) fit L2: not blocked.
  EXPECT_EQ(cfg(dense("dense_pack.x86", 128, 256, 1024)).knob("k_block"), 0);
  EXPECT_EQ(cfg(dense("dense_pack.x86", 4, 768, 3072)).knob("k_block"), 0);  // one row tile
  Config r49 = cfg(dense("dense_pack.x86", 49, 3072, 768));
  EXPECT_EQ(r49.split("tile_y"), (std::vector<int64_t>{1, 7, 7}));
  // 100 rows: no divisor in [4, 8] but 5 (5 rows x 2 zmm); 20 tiles, 10 per task.
  Config r100 = cfg(dense("dense_pack.x86", 100, 64, 64));
  EXPECT_EQ(r100.split("tile_y"), (std::vector<int64_t>{2, 10, 5}));
  Config b = cfg(bmm(12, 128, 64, 12, 128));
  EXPECT_EQ(b.split("tile_x").back(), 32);
  EXPECT_EQ(b.split("tile_y").back(), 8);
  // Every template's fallback is a point of its space for many shapes.
  for (int64_t n : {1, 2, 3, 5, 7, 13, 16, 24, 40, 72, 100, 1000})
    for (int64_t s : {1, 2}) {
      for (const Workload& w :
           {conv(1, n, 9, n + 2, n, 3, 3, {s, s}, {1, 0, 1, 2}, {1, 1}),
            depthwise(1, n, 9, n + 2, 3, 3, {s, s}, {1, 1, 0, 0}, {1, 1}),
            group_conv(1, 2 * n, 9, n + 2, 4 * n, 2, 3, 3, {s, s}, {1, 0, 1, 2}, {1, 1}),
            dense("dense_pack.x86", n, n + s, 3 * n), dense("dense_pack.x86", 3 * n + 2, 40, n),
            dense("dense_nopack.x86", s, n, n), bmm(s, n, n + 1, 1, n + 2)}) {
        const OpTemplate& t = ops::get_template(w.template_name);
        for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                                   "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",
                                   "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"}) {
          Config f = t.fallback(w, isa_of(target));
          EXPECT_EQ(Config::from_json(t.space(w), f.to_json()), f) << w.key() << " " << target;
          EXPECT_TRUE(t.fits(w, f, isa_of(target))) << w.key() << " " << target;
        }
        EXPECT_GT(t.flops(w), 0);
      }
    }
}

// Register tiles follow the ISA's lanes and registers (accumulators within
// three quarters of the vector registers); channel blocks, hence layouts
// and records' keys, do not.
TEST(Templates, FallbackRegisterTilesFollowTheIsa) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const Isa neon = isa_of("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  // ResNet's 3x3 conv, 16-channel blocks: 1 zmm, 2 ymm or 4 q registers per column.
  Workload c = conv(1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  const OpTemplate& ct = ops::get_template(c.template_name);
  EXPECT_EQ(ct.fallback(c, avx512).split("tile_ow").back(), 14);  // 14 of 24 accumulators
  EXPECT_EQ(ct.fallback(c, avx512).knob("oc_reg"), 1);
  // No divisor of 56 fills AVX2's 12 or NEON's 24. A 3x3 window on AVX2:
  // 6 columns x 1 block (12 + 2 + 1 registers; 3 x 2 would load less but
  // needs all 16 and spills), the last tile peeled (56 = 9 x 6 + 2); NEON: 6
  // columns x 1 block (10 loads per 24; 3 x 2: 11).
  EXPECT_EQ(ct.fallback(c, avx2).split("tile_ow"), (std::vector<int64_t>{10, 6}));
  EXPECT_EQ(ct.fallback(c, avx2).knob("oc_reg"), 1);
  // A 1x1 window too: 6 columns x 1 block, 12 accumulators without a spill
  // (3 x 2 loads less, 7 per 12 FMAs, but its unrolled channel loop spills).
  Workload pointwise = conv(1, 256, 56, 56, 128, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(pointwise, avx2).split("tile_ow"), (std::vector<int64_t>{10, 6}));
  EXPECT_EQ(ct.fallback(pointwise, avx2).knob("oc_reg"), 1);
  // 7 columns, stride 2: 1 block would take 4 (8 accumulators), so the
  // spilling 3 x 2 (12) stays.
  Workload narrow = conv(1, 1024, 14, 14, 2048, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(narrow, avx2).split("tile_ow"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(ct.fallback(narrow, avx2).knob("oc_reg"), 2);
  EXPECT_EQ(ops::detail::conv_fallback_tile(7, 7, 128, 16, 1, 1024, avx2).oc_blocks, 2);
  // A 3x3 window on 7 columns: 1 block x 4 fits, but leaves 3 of 7 columns
  // in a partial tile; 2 x 3 (19 loads a 28 FMAs over the row, against 11
  // a 14) takes it where its reduction can be chunked (more than 64
  // channels), else 1 x 4 stays.
  EXPECT_EQ(ops::detail::conv_fallback_tile(7, 7, 32, 16, 9, 512, avx2).oc_blocks, 2);
  EXPECT_EQ(ops::detail::conv_fallback_tile(7, 7, 32, 16, 9, 512, avx2).columns, 3);
  EXPECT_EQ(ops::detail::conv_fallback_tile(7, 7, 32, 16, 9, 64, avx2).oc_blocks, 1);
  EXPECT_EQ(ops::detail::conv_fallback_tile(7, 7, 32, 16, 9, 64, avx2).columns, 4);
  // 14 columns are not narrow for 1 x 5 (4 of 14 in the partial tile).
  EXPECT_EQ(ops::detail::conv_fallback_tile(14, 14, 8, 16, 9, 512, avx2).oc_blocks, 1);
  EXPECT_EQ(ct.fallback(c, neon).split("tile_ow"), (std::vector<int64_t>{10, 6}));
  EXPECT_EQ(ct.fallback(c, neon).knob("oc_reg"), 1);
  // A short reduction (16 channels, a 1x1 window) keeps the old rule: ow 4.
  Workload shallow = conv(1, 16, 112, 112, 96, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(shallow, avx2).split("tile_ow").back(), 4);
  EXPECT_EQ(ct.fallback(shallow, avx2).knob("oc_reg"), 1);
  // From 128 products on the reduction is not short: ResNeXt-50's 128 -> 256
  // on 56 columns takes 1 x 6 (56 = 9 x 6 + 2); 112 channels keep 1 x 4.
  Workload rx = conv(1, 128, 56, 56, 256, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(rx, avx2).split("tile_ow").back(), 6);
  EXPECT_EQ(ct.fallback(rx, avx2).knob("oc_reg"), 1);
  Workload en = conv(1, 112, 56, 56, 256, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(en, avx2).split("tile_ow").back(), 4);
  // So does a 3x3 stem (3 channels: 27 products per output), but a 7x7 stem's
  // 147 take the budget: 6 columns x 1 block on AVX2 (112 = 18 x 6 + 4),
  // NEON's 6 x 4 q registers; AVX-512's 16 columns either way.
  Workload stem3 = conv(1, 3, 224, 224, 32, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(ct.fallback(stem3, avx2).split("tile_ow").back(), 4);
  Workload stem7 = conv(1, 3, 224, 224, 64, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1});
  EXPECT_EQ(ct.fallback(stem7, avx2).split("tile_ow").back(), 6);
  EXPECT_EQ(ct.fallback(stem7, avx2).knob("oc_reg"), 1);
  EXPECT_EQ(ct.fallback(stem7, neon).split("tile_ow").back(), 6);
  EXPECT_EQ(ct.fallback(stem7, avx512).split("tile_ow").back(), 16);
  for (const Isa& isa : {avx512, avx2, neon})
    EXPECT_EQ(ops::layout_blocks(ct, c, ct.fallback(c, isa)), ops::fallback_layout_blocks(ct, c));
  // ResNeXt-50's 1x1 1024->2048 on 7x7: AVX2's 2 blocks x 3 columns leave a
  // 1-column tile in every row, so its tiles run over the plane's 49 pixels;
  // AVX-512's 7 columns fill each row and keep row tiles.
  Workload small = conv(1, 1024, 7, 7, 2048, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(small, avx2).split("tile_ow").back(), 3);
  EXPECT_EQ(ct.fallback(small, avx2).knob("pixel_tiles"), 1);
  EXPECT_TRUE(ct.fits(small, ct.fallback(small, avx2), avx2));
  EXPECT_EQ(ct.fallback(small, avx512).split("tile_ow").back(), 7);
  EXPECT_EQ(ct.fallback(small, avx512).knob("pixel_tiles"), 0);
  // ... with 2 channel blocks per tile: 14 of the 24 accumulators, not 7
  // (4 x 7, 28, would exceed the budget).
  EXPECT_EQ(ct.fallback(small, avx512).knob("oc_reg"), 2);
  // A 3-column plane takes 4 blocks on AVX-512 (12 zmm). On AVX2 2 blocks
  // (12 ymm) would leave its 3x3 window's operands no spare register: 1.
  Workload tiny = conv(1, 512, 6, 6, 512, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(ct.fallback(tiny, avx512).split("tile_ow").back(), 3);
  EXPECT_EQ(ct.fallback(tiny, avx512).knob("oc_reg"), 4);
  EXPECT_EQ(ct.fallback(tiny, avx2).knob("oc_reg"), 1);
  for (const Isa& isa : {avx512, avx2, neon})
    for (const Workload& w : {small, tiny, c}) {
      Config f = ct.fallback(w, isa);
      int64_t vectors = (16 + isa.lanes() - 1) / isa.lanes();
      EXPECT_LE(f.knob("oc_reg") * f.split("tile_ow").back() * vectors, isa.accumulator_budget())
          << w.key() << " " << isa.isa_class;
    }
  // 14x14 planes too (14 = 4 x 3 + 2).
  Workload mid = conv(1, 512, 14, 14, 1024, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(mid, avx2).split("tile_ow").back(), 3);
  EXPECT_EQ(ct.fallback(mid, avx2).knob("pixel_tiles"), 1);
  // ... where the plane's channel tiles are 16 or more (32 here): a task is a
  // whole plane. LR-ASPP's 960 -> 160 has 5 tiles of 2 blocks: rows.
  Workload few = conv(1, 960, 14, 14, 160, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(few, avx2).knob("oc_reg"), 2);
  EXPECT_EQ(ct.fallback(few, avx2).knob("pixel_tiles"), 0);
  // A width the columns divide keeps row tiles (6 = 2 x 3).
  Workload even = conv(1, 512, 6, 6, 1024, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(even, avx2).knob("pixel_tiles"), 0);
  // Planes taller than 14 rows do not offer the knob at all.
  EXPECT_FALSE(ct.fallback(c, avx2).has_knob("pixel_tiles"));
  // A transformer's dense layer: columns in 2 vectors, rows within the budget.
  Workload d = dense("dense_pack.x86", 128, 1024, 256);
  const OpTemplate& dt = ops::get_template(d.template_name);
  EXPECT_EQ(dt.fallback(d, avx512).split("tile_x").back(), 32);
  EXPECT_EQ(dt.fallback(d, avx512).split("tile_y").back(), 8);  // 16 zmm accumulators
  EXPECT_EQ(dt.fallback(d, avx2).split("tile_x").back(), 16);
  EXPECT_EQ(dt.fallback(d, avx2).split("tile_y").back(), 4);  // 8 ymm (6 does not divide 128)
  EXPECT_EQ(dt.fallback(d, neon).split("tile_x").back(), 8);
  EXPECT_EQ(dt.fallback(d, neon).split("tile_y").back(), 8);  // 16 q registers
  // A classifier at batch 8 (1000 columns): whole vectors and a partial last
  // block on every ISA where a single row takes 2.5 vectors (40, 20, 10).
  Workload head = dense("dense_pack.x86", 8, 1000, 1280),
           gemv = dense("dense_pack.x86", 1, 1000, 1280);
  EXPECT_EQ(dt.fallback(head, avx512).split("tile_x").back(), 32);
  EXPECT_EQ(dt.fallback(head, avx2).split("tile_x").back(), 16);
  EXPECT_EQ(dt.fallback(head, neon).split("tile_x").back(), 8);
  EXPECT_EQ(dt.fallback(gemv, avx512).split("tile_x").back(), 40);
  EXPECT_EQ(dt.fallback(gemv, avx2).split("tile_x").back(), 20);
  for (const Isa& isa : {avx512, avx2, neon}) {
    Config f = dt.fallback(d, isa);
    int64_t vectors = (f.split("tile_x").back() + isa.lanes() - 1) / isa.lanes();
    EXPECT_LE(f.split("tile_y").back() * vectors, isa.accumulator_budget()) << isa.isa_class;
  }
}

// An odd count of channel blocks (1000 = 125 x 8) leaves oc_reg's 2 and 4 at
// one block; its divisors 3 and 5 join the space, and the fallback takes them
// where the accumulators are 256-bit vectors, the tile loads less per FMA and
// 16 parallel tasks remain. The kernels match the reference.
TEST(Templates, FallbackSharesBroadcastsOverOddBlockCounts) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  EXPECT_EQ(ops::detail::conv_oc_reg_values(1000), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(ops::detail::conv_oc_reg_values(120), (std::vector<int64_t>{1, 2, 4, 3, 5}));
  EXPECT_EQ(ops::detail::conv_oc_reg_values(144), (std::vector<int64_t>{1, 2, 4, 3}));
  EXPECT_EQ(ops::detail::conv_oc_reg_values(1024), (std::vector<int64_t>{1, 2, 4}));
  // SqueezeNet's classifier: AVX2 5 blocks x 2 columns (7 loads a 10 FMAs,
  // not 1 x 7: 8 a 7) over the plane's pixels (25 tasks); AVX-512 5 x 4.
  Workload classifier = conv(1, 512, 13, 13, 1000, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(classifier, avx2).knob("oc_reg"), 5);
  EXPECT_EQ(ct.fallback(classifier, avx2).split("tile_ow").back(), 2);
  EXPECT_EQ(ct.fallback(classifier, avx2).knob("pixel_tiles"), 1);
  EXPECT_EQ(ct.fallback(classifier, avx512).knob("oc_reg"), 5);
  EXPECT_EQ(ct.fallback(classifier, avx512).split("tile_ow").back(), 4);
  // 9 blocks of 16: 3 blocks as AVX2 code; AVX-512's zmm tile keeps 1.
  Workload nine = conv(1, 512, 14, 14, 144, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(nine, avx2).knob("oc_reg"), 3);
  EXPECT_EQ(ct.fallback(nine, avx512).knob("oc_reg"), 1);
  // An SE block's 1x1 plane: 15 blocks in tiles of 3 would be 5 tasks.
  Workload squeeze = conv(1, 960, 1, 1, 240, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(squeeze, avx2).knob("oc_reg"), 1);
  // 7-channel blocks (21 = 3 x 7) are partial vectors: 1 block.
  Workload partial = conv(1, 512, 28, 28, 21, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(partial, avx512).knob("oc_reg"), 1);
  // The layout stays the fallback's; the configs are points of the space.
  for (const Isa& isa : {avx512, avx2})
    for (const Workload& w : {classifier, nine, squeeze, partial}) {
      Config f = ct.fallback(w, isa);
      EXPECT_EQ(Config::from_json(ct.space(w), f.to_json()), f) << w.key();
      EXPECT_TRUE(ct.fits(w, f, isa)) << w.key() << " " << isa.isa_class;
      EXPECT_EQ(ops::layout_blocks(ct, w, f), ops::fallback_layout_blocks(ct, w));
    }
  // Against the reference: 15 blocks of 8 on 13 columns in tiles of 3 and 5
  // blocks (both ISAs' fallbacks, whichever runs here), over rows and over
  // the plane's pixels, with and without reduction chunks.
  std::mt19937_64 rng(29);
  Workload small = conv(1, 256, 13, 13, 120, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(small, avx2).knob("oc_reg"), 5);
  EXPECT_EQ(ct.fallback(small, avx512).knob("oc_reg"), 5);
  check_config(ct, small, ct.fallback(small, codegen::Target::host().isa()), rng);
  for (const char* knobs :
       {R"("tile_ic": [16, 16], "tile_oc": [15, 8], "tile_ow": [7, 2], "unroll_kw": 1, )"
        R"("oc_reg": 5, "oh_reg": 1, "kernel_outer": 0, "ic_chunk": 0, "pixel_tiles": 1)",
        R"("tile_ic": [16, 16], "tile_oc": [15, 8], "tile_ow": [4, 4], "unroll_kw": 1, )"
        R"("oc_reg": 3, "oh_reg": 2, "kernel_outer": 0, "ic_chunk": 64, "pixel_tiles": 0)",
        R"("tile_ic": [16, 16], "tile_oc": [15, 8], "tile_ow": [5, 3], "unroll_kw": 1, )"
        R"("oc_reg": 3, "oh_reg": 1, "kernel_outer": 0, "ic_chunk": 128, "pixel_tiles": 1)"})
    check_config(ct, small, ops::detail::config_from_knobs(ct.space(small), knobs), rng);
}

// Where FMAs wait on loads (Intel AVX-512: two zmm FMAs and two zmm loads a
// cycle), a 1x1 window's row of 8 or more columns shares each broadcast over
// 4 (else 2) blocks and 1 or 2 rows, the fewest loads per FMA over the row;
// Zen 4's AVX-512, AVX2, 3x3 windows and 7-wide rows keep their tiles. The
// configs match the reference, partial column tiles and odd rows included.
TEST(Templates, FallbackSharesBroadcastsOverBlocksAndRowsWhereFmasWaitOnLoads) {
  const Isa spr = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  const Isa zen4 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  EXPECT_TRUE(spr.fma_waits_on_loads);
  EXPECT_FALSE(zen4.fma_waits_on_loads);
  EXPECT_FALSE(avx2.fma_waits_on_loads);
  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  struct Case {
    Workload w;
    int64_t oc_reg, columns, rows;  // on Sapphire Rapids
  };
  const Case cases[] = {
      // 14 columns: 4 x 3 x 2 rows (48 loads a 112 FMAs over two rows), not
      // 4 x 5 (26 a 56) nor 1 x 14 (15 a 14).
      {conv(1, 1024, 14, 14, 1024, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 4, 3, 2},
      // 28 columns: 4 x 6 and 4 x 3 x 2 tie (3/7); one row.
      {conv(1, 512, 28, 28, 512, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 4, 6, 1},
      // 56 columns: 4 x 3 x 2 (56 = 18 x 3 + 2).
      {conv(1, 256, 56, 56, 256, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 4, 3, 2},
      // Stride 2 onto 14 x 14, as stride 1.
      {conv(1, 512, 28, 28, 1024, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}), 4, 3, 2},
      // 13 rows take one: 4 x 5 (13 = 5 + 5 + 3).
      {conv(1, 512, 13, 13, 64, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 4, 5, 1},
      // 6 blocks: 2 x 5 x 2 rows (20 accumulators; 14 = 5 + 5 + 4).
      {conv(1, 384, 14, 14, 96, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 2, 5, 2},
  };
  for (const Case& c : cases) {
    Config f = ct.fallback(c.w, spr);
    EXPECT_EQ(f.knob("oc_reg"), c.oc_reg) << c.w.key();
    EXPECT_EQ(f.split("tile_ow").back(), c.columns) << c.w.key();
    EXPECT_EQ(f.knob("oh_reg"), c.rows) << c.w.key();
    EXPECT_TRUE(ct.fits(c.w, f, spr)) << c.w.key();
    EXPECT_EQ(ops::layout_blocks(ct, c.w, f), ops::fallback_layout_blocks(ct, c.w));
    // Zen 4 and AVX2 as before: one row.
    EXPECT_EQ(ct.fallback(c.w, zen4).knob("oh_reg"), 1) << c.w.key();
    EXPECT_EQ(ct.fallback(c.w, avx2).knob("oh_reg"), 1) << c.w.key();
  }
  EXPECT_EQ(ct.fallback(cases[0].w, zen4).knob("oc_reg"), 1);
  EXPECT_EQ(ct.fallback(cases[0].w, zen4).split("tile_ow").back(), 14);
  // A 3x3 window and a 7-wide row keep the row rule.
  Workload window = conv(1, 256, 14, 14, 256, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(ct.fallback(window, spr).split("tile_ow").back(), 14);
  EXPECT_EQ(ct.fallback(window, spr).knob("oc_reg"), 1);
  Workload narrow = conv(1, 2048, 7, 7, 512, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(narrow, spr).split("tile_ow").back(), 7);
  EXPECT_EQ(ct.fallback(narrow, spr).knob("oc_reg"), 2);
  // Against the reference: small reductions with the same tiles, over rows
  // and (16 channel tiles) over the plane's pixels.
  std::mt19937_64 rng(37);
  EXPECT_EQ(ct.fallback(conv(1, 128, 14, 14, 1024, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), spr)
                .knob("pixel_tiles"),
            1);
  for (const Workload& w : {conv(1, 128, 14, 14, 64, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
                            conv(1, 128, 14, 14, 1024, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
                            conv(1, 256, 13, 13, 64, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
                            conv(2, 128, 20, 20, 96, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1})}) {
    Config f = ct.fallback(w, spr);
    EXPECT_GT(f.knob("oc_reg"), 1) << w.key();
    check_config(ct, w, f, rng);
  }
}

// Row tiles beyond 1, 2 and 4: the largest divisor of the output height from
// 3 to 7, so that a 7-row plane (ResNet-50's last stage) can put all of its
// rows in one register tile; against the reference with partial column
// tiles, strides, reduction chunks and a batch.
TEST(Templates, RowTilesOfUpToSevenRowsMatchTheReference) {
  using ops::detail::conv_oh_reg_values;
  EXPECT_EQ(conv_oh_reg_values(7), (std::vector<int64_t>{1, 2, 4, 7}));
  EXPECT_EQ(conv_oh_reg_values(56), (std::vector<int64_t>{1, 2, 4, 7}));
  EXPECT_EQ(conv_oh_reg_values(12), (std::vector<int64_t>{1, 2, 4, 6}));
  EXPECT_EQ(conv_oh_reg_values(9), (std::vector<int64_t>{1, 2, 4, 3}));
  EXPECT_EQ(conv_oh_reg_values(10), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(conv_oh_reg_values(8), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(conv_oh_reg_values(13), (std::vector<int64_t>{1, 2, 4}));
  const OpTemplate& t = ops::get_template("conv2d_NCHWc.x86");
  struct Case {
    Workload w;
    const char* knobs;
    int64_t rows;  // the register tile's rows
  };
  const Case cases[] = {
      {conv(1, 32, 7, 7, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
       R"("tile_ic": [2, 16], "tile_oc": [2, 16], "tile_ow": [2, 4], "unroll_kw": 1, )"
       R"("oc_reg": 1, "oh_reg": 7, "kernel_outer": 0, "ic_chunk": 0, "plane_rows": 0)",
       7},
      {conv(2, 48, 14, 14, 16, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}),
       R"("tile_ic": [6, 8], "tile_oc": [2, 8], "tile_ow": [4, 2], "unroll_kw": 0, )"
       R"("oc_reg": 2, "oh_reg": 7, "kernel_outer": 1, "ic_chunk": 0, "plane_rows": 0)",
       7},
      {conv(1, 128, 7, 7, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
       R"("tile_ic": [8, 16], "tile_oc": [1, 16], "tile_ow": [2, 4], "unroll_kw": 1, )"
       R"("oc_reg": 1, "oh_reg": 7, "kernel_outer": 0, "ic_chunk": 64, "plane_rows": 0)",
       7},
      {conv(1, 16, 14, 14, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
       R"("tile_ic": [1, 16], "tile_oc": [2, 16], "tile_ow": [4, 4], "unroll_kw": 1, )"
       R"("oc_reg": 1, "oh_reg": 7, "kernel_outer": 0, "ic_chunk": 0, "pixel_tiles": 0)",
       7},
      {conv(1, 8, 12, 10, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
       R"("tile_ic": [1, 8], "tile_oc": [1, 8], "tile_ow": [3, 4], "unroll_kw": 0, )"
       R"("oc_reg": 1, "oh_reg": 6, "kernel_outer": 0, "ic_chunk": 0)",
       6},
  };
  std::mt19937_64 rng(31);
  for (const Case& c : cases) {
    Config cfg = ops::detail::config_from_knobs(t.space(c.w), c.knobs);
    ops::Conv2DAttrs a = ops::conv2d_attrs(c.w, ops::ConvKind::kDense);
    int64_t ocb = ops::conv2d_nchwc_oc_block(cfg);
    EXPECT_EQ(ops::detail::conv_register_tile(a.out_channels / ocb, a.out_height(), ocb, cfg).oh,
              c.rows)
        << c.w.key();
    check_config(t, c.w, cfg, rng);
  }
}

// The fallback chunks a reduction whose register tile's weights outgrow
// half of the target's L1 (Zen 3: ResNeXt-50's and ResNet-50's 1x1 convs ran
// 7-20 % faster chunked); the chunked kernels match the reference.
TEST(Templates, FallbackReductionChunksFitHalfOfL1) {
  Isa l1_32k = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  ASSERT_EQ(l1_32k.l1d_bytes, 32 << 10);
  Isa l1_48k = l1_32k, unknown = l1_32k;
  l1_48k.l1d_bytes = 48 << 10;
  unknown.l1d_bytes = 0;
  // 256 channels x 32 per tile x 4 B = 32 KiB: chunks of 128 (16 KiB).
  EXPECT_EQ(ops::detail::fallback_ic_chunk(256, 1, 32, l1_32k), 128);
  EXPECT_EQ(ops::detail::fallback_ic_chunk(256, 1, 32, l1_48k), 128);  // 256 is no chunk
  EXPECT_EQ(ops::detail::fallback_ic_chunk(1024, 1, 16, l1_32k), 256);
  EXPECT_EQ(ops::detail::fallback_ic_chunk(256, 1, 16, l1_32k), 0);  // 16 KiB: fits
  EXPECT_EQ(ops::detail::fallback_ic_chunk(384, 1, 16, l1_48k), 0);  // 24 KiB: fits
  EXPECT_EQ(ops::detail::fallback_ic_chunk(1024, 1, 64, l1_32k), 64);
  EXPECT_EQ(ops::detail::fallback_ic_chunk(512, 9, 16, l1_32k), 0);  // 64 channels: 36 KiB
  EXPECT_EQ(ops::detail::fallback_ic_chunk(1024, 1, 16, unknown), 0);

  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  // ResNet-50's 512 -> 128 1x1 on 28x28, AVX2: 1 block x 6 columns, 256 channels a chunk.
  Workload pointwise = conv(1, 512, 28, 28, 128, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(pointwise, l1_32k).knob("oc_reg"), 1);
  EXPECT_EQ(ct.fallback(pointwise, l1_32k).knob("ic_chunk"), 256);
  EXPECT_EQ(ct.fallback(pointwise, unknown).knob("ic_chunk"), 0);
  // 7 columns: 2 blocks (32 channels x 256 = 32 KiB): 128 channels a chunk.
  Workload narrow = conv(1, 256, 14, 14, 512, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(narrow, l1_32k).knob("oc_reg"), 2);
  EXPECT_EQ(ct.fallback(narrow, l1_32k).knob("ic_chunk"), 128);
  // A 3x3 window: no chunk of 64 or more fits; the reduction stays whole.
  Workload window = conv(1, 256, 28, 28, 256, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(ct.fallback(window, l1_32k).knob("ic_chunk"), 0);
  // A row whose accumulators fit the registers but not beside the step's
  // operands is not chunked: LLVM keeps the row buffer in registers across
  // the chunks. ConvNeXt-T's 2x2 stride-2 384 -> 768 on AVX2: 1 block x 4
  // columns of a 7-wide row, 14 + 3 of 16 ymm; with AVX-512's 32 it is.
  using ops::detail::chunked_row_spills;
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  EXPECT_TRUE(chunked_row_spills(14, 3, l1_32k));
  EXPECT_FALSE(chunked_row_spills(28, 5, l1_32k));  // 2 blocks: the buffer stays in memory
  EXPECT_FALSE(chunked_row_spills(12, 3, l1_32k));  // 12 + 3 fit 16
  EXPECT_FALSE(chunked_row_spills(14, 2, avx512));
  // (Without a known L2: with one, the narrow row takes 2 blocks x 3
  // columns chunked to L2, fallback_window_chunk.)
  Isa no_l2 = l1_32k;
  no_l2.l2_bytes = 0;
  Workload patchify = conv(1, 384, 14, 14, 768, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(patchify, no_l2).knob("oc_reg"), 1);
  EXPECT_EQ(ct.fallback(patchify, no_l2).split("tile_ow").back(), 4);
  EXPECT_EQ(ct.fallback(patchify, no_l2).knob("ic_chunk"), 0);
  EXPECT_EQ(ct.fallback(patchify, l1_32k).knob("oc_reg"), 2);
  EXPECT_EQ(ct.fallback(patchify, l1_32k).knob("ic_chunk"), 256);
  // A 7 x 7 plane with too few channel tiles for pixel tiles (GoogLeNet's
  // 832 -> 48: 3 tiles of 16) runs rows, 1 block x 4 columns, and is not
  // chunked either: 0.087 ms chunked, 0.040 not.
  Workload few_tiles = conv(1, 832, 7, 7, 48, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(few_tiles, l1_32k).split("tile_ow").back(), 4);
  EXPECT_EQ(ct.fallback(few_tiles, l1_32k).knob("pixel_tiles"), 0);
  EXPECT_EQ(ct.fallback(few_tiles, l1_32k).knob("ic_chunk"), 0);
  // The same conv on a 28-wide row (28 x 2 ymm: in memory) keeps its chunk.
  Workload wide_patchify = conv(1, 384, 56, 56, 768, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1});
  EXPECT_GT(ct.fallback(wide_patchify, l1_32k).knob("ic_chunk"), 0);
  std::mt19937_64 patch_rng(37);
  check_config(ct, patchify, ct.fallback(patchify, no_l2), patch_rng);
  check_config(ct, patchify, ct.fallback(patchify, l1_32k), patch_rng);
  // Chunked fallbacks, row and pixel tiles, against the reference.
  std::mt19937_64 rng(31);
  for (const Workload& w : {conv(1, 512, 5, 11, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
                            conv(1, 512, 7, 7, 64, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
                            conv(1, 320, 9, 9, 48, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1})}) {
    Config f = ct.fallback(w, l1_32k);
    EXPECT_GT(f.knob("ic_chunk"), 0) << w.key();
    EXPECT_TRUE(ct.fits(w, f, l1_32k)) << w.key();
    check_config(ct, w, f, rng);
  }
}

// A narrow row of a 3x3 window (7 columns) takes AVX2's 2 blocks x 3
// columns, whose operands do not fit the registers, with reduction chunks
// sized to half of L2: ResNet-50's 512 -> 512 stride-2 conv onto 7 x 7 ran
// 1.30 ms against 1.54 for 1 x 4 (2 threads of a Zen 4 running AVX2 code).
// Such configs, tiles and chunks dividing nothing, against the reference.
TEST(Templates, FallbackNarrowWindowRowsTakeChunkedTwoBlockTiles) {
  const Isa zen3 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  const Isa zen4 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  using ops::detail::fallback_window_chunk;
  // 32 channels x 9 x 4 B a channel: 128 of them (144 KiB) fit 256 KiB.
  EXPECT_EQ(fallback_window_chunk(512, 9, 32, zen3), 128);
  EXPECT_EQ(fallback_window_chunk(128, 9, 32, zen3), 64);  // 128 is no chunk
  EXPECT_EQ(fallback_window_chunk(64, 9, 32, zen3), 0);
  Isa unknown = zen3;
  unknown.l2_bytes = 0;
  EXPECT_EQ(fallback_window_chunk(512, 9, 32, unknown), 0);

  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  Workload narrow = conv(1, 512, 14, 14, 512, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1});
  Config f = ct.fallback(narrow, zen3);
  EXPECT_EQ(f.knob("oc_reg"), 2);
  EXPECT_EQ(f.split("tile_ow").back(), 3);
  EXPECT_EQ(f.knob("ic_chunk"), 128);
  // Its chunks run over the 7 x 7 plane's rows: 16 channel tiles are enough
  // tasks (under a simulated 512 KiB L2, 88 K misses a call against 398 K
  // row by row).
  EXPECT_EQ(f.knob("plane_rows"), 1);
  EXPECT_EQ(ct.fallback(narrow, unknown).knob("oc_reg"), 1);  // nothing to chunk by
  // AVX-512 takes the whole row (7 columns x 2 blocks of zmm), no chunk.
  EXPECT_EQ(ct.fallback(narrow, zen4).split("tile_ow").back(), 7);
  EXPECT_EQ(ct.fallback(narrow, zen4).knob("ic_chunk"), 0);
  // 14 columns keep 1 block x 5 (4 of 14 in the partial tile), unchunked.
  Workload wide = conv(1, 256, 28, 28, 256, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(ct.fallback(wide, zen3).knob("oc_reg"), 1);
  EXPECT_EQ(ct.fallback(wide, zen3).split("tile_ow").back(), 5);
  EXPECT_EQ(ct.fallback(wide, zen3).knob("ic_chunk"), 0);

  std::mt19937_64 rng(41);
  for (const Workload& w : {conv(1, 160, 7, 7, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
                            conv(1, 96, 13, 13, 32, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}),
                            conv(1, 144, 5, 7, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1})}) {
    Config c = ct.fallback(w, zen3);
    EXPECT_EQ(c.knob("oc_reg"), 2) << w.key();
    EXPECT_EQ(c.split("tile_ow").back(), 3) << w.key();
    EXPECT_GT(c.knob("ic_chunk"), 0) << w.key();
    EXPECT_EQ(c.knob("plane_rows"), 0) << w.key();  // 1 or 2 channel tiles: rows are the tasks
    EXPECT_TRUE(ct.fits(w, c, zen3)) << w.key();
    check_config(ct, w, c, rng);
    // The same with the chunks over the plane's rows.
    check_config(ct, w, with_knob(ct.space(w), c, "plane_rows", 1), rng);
  }
}

// Output-channel tiles in groups where the input outgrows half of L2: the
// rule on Zen 3's 512 KiB, Zen 4's 1 MiB and an unknown L2; the template's
// choice; and grouped configs, groups dividing the tiles or not, chunked or
// not, against the reference.
TEST(Templates, FallbackGroupsOutputTilesWhereTheInputOutgrowsHalfOfL2) {
  Isa zen3 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  Isa zen4 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  ASSERT_EQ(zen3.l2_bytes, 512 << 10);
  ASSERT_EQ(zen4.l2_bytes, 1 << 20);
  Isa unknown = zen3;
  unknown.l2_bytes = 0;
  using ops::detail::fallback_oc_group;
  // 4 tiles of 32 KiB weights, a 3.2 MB input: all 4 in one group (128 KiB).
  EXPECT_EQ(fallback_oc_group(4, 32 << 10, 3211264, zen3), 4);
  EXPECT_EQ(fallback_oc_group(4, 32 << 10, 3211264, unknown), 0);
  // The input fits half of L2: the tiles in turn, as before.
  EXPECT_EQ(fallback_oc_group(8, 32 << 10, 200 << 10, zen3), 0);
  // 64 tiles of 64 KiB: 4 fit 256 KiB, 8 fit 512 KiB.
  EXPECT_EQ(fallback_oc_group(64, 64 << 10, 4 << 20, zen3), 4);
  EXPECT_EQ(fallback_oc_group(64, 64 << 10, 4 << 20, zen4), 8);
  // Not two tiles' weights fit, or there is one tile: none.
  EXPECT_EQ(fallback_oc_group(8, 200 << 10, 4 << 20, zen3), 0);
  EXPECT_EQ(fallback_oc_group(1, 32 << 10, 4 << 20, zen3), 0);
  // 6 tiles: groups of 2, 3 or 6 (divisors); 6 x 40 KiB fits 256 KiB, 100 KiB only 2.
  EXPECT_EQ(fallback_oc_group(6, 40 << 10, 4 << 20, zen3), 8);
  EXPECT_EQ(fallback_oc_group(6, 100 << 10, 4 << 20, zen3), 2);

  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  // ResNeXt-50's 256 -> 128 1x1 on 56x56 (3.2 MB of input), AVX2: 8 tiles of
  // 16 channels (16 KiB of weights each), all in one group.
  Workload pointwise = conv(1, 256, 56, 56, 128, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  Config f = ct.fallback(pointwise, zen3);
  EXPECT_EQ(f.knob("oc_reg"), 1);
  EXPECT_EQ(f.knob("oc_group"), 8);
  EXPECT_EQ(ops::detail::oc_tile_group(f, 8), 8);
  EXPECT_EQ(ct.fallback(pointwise, unknown).knob("oc_group"), 0);
  // ResNet-50's 2048 -> 512 1x1 on 7x7: 392 KiB of input fits half of Zen 4's L2.
  Workload small = conv(1, 2048, 7, 7, 512, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_EQ(ct.fallback(small, zen4).knob("oc_group"), 0);
  // A stored config without the knob means no groups.
  EXPECT_EQ(ops::detail::oc_tile_group(
                Config::from_json(ct.space(pointwise),
                                  config_json_with_knob(f, "oc_group", std::nullopt)),
                8),
            0);

  std::mt19937_64 rng(37);
  // Grouped fallbacks (chunked or not) and groups that do not divide the tiles.
  // Each with an L2 whose half its input outgrows and two tiles' weights fit.
  const std::pair<Workload, int64_t> cases[] = {
      {conv(1, 64, 30, 30, 96, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 128 << 10},
      {conv(1, 512, 9, 13, 96, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}), 448 << 10},
      {conv(1, 48, 33, 33, 64, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}), 256 << 10}};
  for (const auto& [w, l2_bytes] : cases) {
    Isa small_l2 = zen3;
    small_l2.l2_bytes = l2_bytes;
    Config g = ct.fallback(w, small_l2);
    EXPECT_GT(g.knob("oc_group"), 0) << w.key();
    check_config(ct, w, g, rng);
    for (int64_t value : {2, 4, 32})
      check_config(ct, w, with_knob(ct.space(w), g, "oc_group", value), rng);
  }
}

// Depthwise convolutions with the window's columns innermost (kw_inner)
// and a padded copy (pad_copy), in all four combinations, against the
// reference: the template's test shapes (3x3 and 5x5, strides 1 and 2,
// asymmetric pads, dilation 2, a 3-channel block) and ConvNeXt's 7x7 with
// a width its tile does not divide. And the fallback rule: AVX-512 takes
// kw_inner alone; AVX2, for a 3x3 window (9 multiplies per input element),
// the copy alone where its 4-column tile leaves a partial one (14 columns),
// neither where it divides the width (28) or at stride 2; for a 7x7 window
// both on 14x14, neither on 7x7 (a 13x13 copy).
TEST(Templates, DepthwiseWindowOrderAndPaddedCopyMatchTheReference) {
  const OpTemplate& t = ops::get_template("depthwise_conv2d_NCHWc.x86");
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  Workload mobilenet = depthwise(1, 384, 14, 14, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(t.fallback(mobilenet, avx512).knob("kw_inner"), 1);
  EXPECT_EQ(t.fallback(mobilenet, avx512).knob("pad_copy"), 0);
  ASSERT_EQ(t.fallback(mobilenet, avx2).split("tile_ow").back(), 4);
  EXPECT_EQ(t.fallback(mobilenet, avx2).knob("kw_inner"), 0);
  EXPECT_EQ(t.fallback(mobilenet, avx2).knob("pad_copy"), 1);
  Workload dividing = depthwise(1, 192, 28, 28, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(t.fallback(dividing, avx2).knob("pad_copy"), 0);
  Workload strided = depthwise(1, 576, 14, 14, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1});
  EXPECT_EQ(t.fallback(strided, avx2).knob("pad_copy"), 0);
  EXPECT_EQ(t.fallback(strided, avx2).knob("kw_inner"), 0);
  Workload convnext = depthwise(1, 384, 14, 14, 7, 7, {1, 1}, {3, 3, 3, 3}, {1, 1});
  EXPECT_EQ(t.fallback(convnext, avx2).knob("kw_inner"), 1);
  EXPECT_EQ(t.fallback(convnext, avx2).knob("pad_copy"), 1);
  Workload last = depthwise(1, 768, 7, 7, 7, 7, {1, 1}, {3, 3, 3, 3}, {1, 1});
  EXPECT_EQ(t.fallback(last, avx2).knob("pad_copy"), 0);
  EXPECT_EQ(t.fallback(last, avx512).knob("kw_inner"), 1);
  // No padding, no pad_copy knob; a 1-wide window, no kw_inner.
  EXPECT_FALSE(t.fallback(depthwise(1, 16, 8, 8, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}), avx2)
                   .has_knob("pad_copy"));
  EXPECT_FALSE(t.fallback(depthwise(1, 16, 8, 8, 3, 1, {1, 1}, {1, 0, 1, 0}, {1, 1}), avx2)
                   .has_knob("kw_inner"));

  std::mt19937_64 rng(41);
  std::vector<Workload> cases = workloads_of("depthwise_conv2d_NCHWc.x86");
  cases.push_back(depthwise(1, 32, 11, 11, 7, 7, {1, 1}, {3, 3, 3, 3}, {1, 1}));
  for (const Workload& w : cases) {
    auto space = t.space(w);
    for (const Isa& isa : {avx512, avx2}) {
      Config f = t.fallback(w, isa);
      for (int64_t kw_inner : {0, 1})
        for (int64_t pad_copy : {0, 1}) {
          Config c = f;
          if (f.has_knob("kw_inner")) c = with_knob(space, c, "kw_inner", kw_inner);
          if (f.has_knob("pad_copy")) c = with_knob(space, c, "pad_copy", pad_copy);
          check_config(t, w, c, rng);
        }
    }
  }
}

// The build's parallel splits (graph/passes/parallel_splits.h): a
// convolution's output tiles and padding copy with their rows outside their
// channel blocks compute what the channel-first order does, on shapes whose
// rows the row tiles do not divide and configs of every kind (grouped output
// tiles, reduction chunks, pixel tiles, padded copies).
TEST(Templates, RowSplitsMatchTheReference) {
  std::mt19937_64 rng(43);
  const std::vector<std::map<std::string, int64_t>> splits = {
      {{ops::kSplitRows, 1}, {ops::kInputSplitRows, 1}},
      {{ops::kSplitRows, 0}, {ops::kInputSplitRows, 1}},
      {{ops::kSplitRows, 1}, {ops::kInputSplitRows, 0}}};
  for (const char* name :
       {"conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86", "group_conv2d_lanes_NCHWc.x86"}) {
    const OpTemplate& t = ops::get_template(name);
    for (const Workload& w : workloads_of(name)) {
      std::vector<Config> configs = {t.fallback(w, host_isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs)
        for (const auto& facts : splits) check_config(t, w, cfg, rng, facts);
    }
  }
}

// fits(): a register tile fits an ISA when its accumulators, in that ISA's
// vectors, fit its vector registers. The same config can fit AVX-512 (32
// zmm) and not AVX2 (16 ymm) or armv7 NEON (16 q); every random point of a
// space either fits or not consistently with that count.
TEST(Templates, FitsCountsAccumulatorsInTheIsasVectors) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const Isa a64 = isa_of("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  const Isa v7 = isa_of("llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon");
  Workload d = dense("dense_pack.x86", 128, 1024, 256);
  const OpTemplate& dt = ops::get_template(d.template_name);
  Config wide = ops::detail::config_from_knobs(
      dt.space(d), R"("tile_y": [16, 1, 8], "tile_x": [32, 1, 32], "tile_k": [64, 4],)"
                   R"( "tile_order": 1)");
  EXPECT_TRUE(dt.fits(d, wide, avx512));  // 8 rows x 2 zmm = 16 of 32
  EXPECT_FALSE(dt.fits(d, wide, avx2));   // 8 x 4 ymm = 32 of 16
  EXPECT_FALSE(dt.fits(d, wide, a64));    // 8 x 8 q = 64 of 32
  Workload c = conv(1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  const OpTemplate& ct = ops::get_template(c.template_name);
  Config tile28 = ops::detail::config_from_knobs(
      ct.space(c), R"("tile_ic": [4, 16], "tile_oc": [4, 16], "tile_ow": [2, 28],)"
                   R"( "unroll_kw": 1, "oc_reg": 1, "oh_reg": 1, "kernel_outer": 0)");
  EXPECT_TRUE(ct.fits(c, tile28, avx512));  // 28 zmm of 32
  EXPECT_FALSE(ct.fits(c, tile28, avx2));   // 56 ymm
  EXPECT_FALSE(ct.fits(c, tile28, v7));     // 112 q
  std::mt19937_64 rng(7);
  for (const Workload& w : {c, d, depthwise(1, 96, 28, 28, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1})}) {
    const OpTemplate& t = ops::get_template(w.template_name);
    schedule::ConfigSpace space = t.space(w);
    int fit512 = 0, fit2 = 0;
    for (int i = 0; i < 200; ++i) {
      Config cfg = space.get(std::uniform_int_distribution<int64_t>(0, space.size() - 1)(rng));
      // A narrower vector file never fits what a wider one does not.
      if (t.fits(w, cfg, avx2)) {
        EXPECT_TRUE(t.fits(w, cfg, avx512)) << cfg.to_json();
      }
      fit512 += t.fits(w, cfg, avx512);
      fit2 += t.fits(w, cfg, avx2);
    }
    EXPECT_GT(fit512, fit2) << w.key();  // the ISA narrows the search
    EXPECT_GT(fit2, 0) << w.key();
  }
}

TEST(Templates, ShapesMatchComputeAndErrorsNameTheWorkload) {
  for (const std::string& n : ops::template_names()) {
    const OpTemplate& t = ops::get_template(n);
    for (const Workload& w : workloads_of(n)) {
      Config cfg = t.fallback(w, host_isa());
      auto inst = t.compute(w, cfg);
      auto shapes = t.input_shapes(w, cfg);
      ASSERT_EQ(inst.inputs.size(), shapes.size());
      auto types = t.input_dtypes(w);
      ASSERT_EQ(types.size(), shapes.size()) << w.key();
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_EQ(ops::detail::const_shape(inst.inputs[i]), shapes[i]) << w.key();
        EXPECT_EQ(inst.inputs[i]->dtype, types[i]) << w.key() << " input " << i;
      }
      EXPECT_EQ(inst.anchor->dtype, t.output_dtype(w)) << w.key();
      EXPECT_EQ(ops::detail::const_shape(inst.anchor), t.output_shape(w, cfg));
    }
  }
  auto expect_error = [](const char* name, const Workload& w, const std::string& text) {
    try {
      ops::get_template(name).space(w);
      ADD_FAILURE() << "no error for " << w.key();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Workload grouped = conv(1, 8, 5, 5, 8, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1});
  grouped.params[1].second[1] = 4;
  expect_error("conv2d_NCHWc.x86", grouped, "groups = 1");
  expect_error("conv2d_NCHWc.x86", conv(1, 8, 2, 2, 8, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}),
               "empty output");
  expect_error("dense_pack.x86", dense("dense_nopack.x86", 2, 2, 2), "is not a dense_pack.x86");
  expect_error("batch_matmul.x86", bmm(3, 2, 2, 2, 2), "batch must be 1");
  Workload f16 = dense("dense_pack.x86", 2, 2, 2);
  f16.dtype = "float16";
  expect_error("dense_pack.x86", f16, "float32 only");
}

// A register tile whose split does not divide the width (OW 13 by 4) and an
// output channel count not a multiple of 16, with the fused epilogue.
TEST(Templates, PartialTilesWithEpilogue) {
  const OpTemplate& t = ops::get_template("conv2d_NCHWc.x86");
  Workload w = conv(1, 8, 4, 13, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1});
  auto cfg = ops::detail::config_from_knobs(t.space(w),
                                            R"("tile_ic": [1, 8], "tile_oc": [1, 24], )"
                                            R"("tile_ow": [4, 4], "unroll_kw": 1, "oc_reg": 1, )"
                                            R"("oh_reg": 1, "kernel_outer": 0)");
  std::mt19937_64 rng(7);
  check_config(t, w, cfg, rng);
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// Counts rolled loops and the If statements inside any of them.
struct RolledLoopGuards : ir::IRVisitor {
  int rolled = 0, guards_inside = 0, depth = 0;
  void visit_for(const ir::ForNode* op) override {
    bool is_rolled = op->for_kind == ir::ForKind::Rolled;
    rolled += is_rolled;
    depth += is_rolled;
    ir::IRVisitor::visit_for(op);
    depth -= is_rolled;
  }
  void visit_if(const ir::IfThenElseNode* op) override {
    guards_inside += depth > 0;
    ir::IRVisitor::visit_if(op);
  }
};

// conv2d_NCHWc.x86's reduction chunks (ic_chunk: the input-channel blocks
// split outside the ow tiles, the accumulators kept in a row buffer between
// chunks) with register tiles that do not divide the row (3 of 7, 5 of 13:
// the last tile peeled off by peel_tail_loops), against the reference: both
// window orders, output-channel and row register tiles, chunks that do not
// divide the channel blocks' count evenly into the knob (96 channels in
// blocks of 8 and chunks of 64: 6 blocks a chunk; in blocks of 4: 12),
// strides, padding, batch 2.
TEST(Templates, ReductionChunksWithPeeledTailsMatchTheReference) {
  const OpTemplate& t = ops::get_template("conv2d_NCHWc.x86");
  struct Case {
    Workload w;
    const char* knobs;
  };
  const Case cases[] = {
      {conv(1, 96, 7, 7, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
       R"("tile_ic": [12, 8], "tile_oc": [2, 16], "tile_ow": [3, 3], "unroll_kw": 1, )"
       R"("oc_reg": 2, "oh_reg": 1, "kernel_outer": 0, "ic_chunk": 64)"},
      {conv(2, 96, 9, 13, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}),
       R"("tile_ic": [24, 4], "tile_oc": [2, 8], "tile_ow": [3, 5], "unroll_kw": 0, )"
       R"("oc_reg": 2, "oh_reg": 2, "kernel_outer": 1, "ic_chunk": 64)"},
      {conv(1, 128, 11, 11, 24, 3, 3, {2, 2}, {1, 0, 1, 0}, {1, 1}),
       R"("tile_ic": [8, 16], "tile_oc": [3, 8], "tile_ow": [2, 3], "unroll_kw": 1, )"
       R"("oc_reg": 4, "oh_reg": 1, "kernel_outer": 0, "ic_chunk": 64)"},
      {conv(1, 256, 14, 14, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
       R"("tile_ic": [16, 16], "tile_oc": [1, 32], "tile_ow": [5, 3], "unroll_kw": 1, )"
       R"("oc_reg": 1, "oh_reg": 1, "kernel_outer": 1, "ic_chunk": 128)"},
      // Pixel tiles: 7 x 7 = 49 pixels in tiles of 3 (the last of 1), with
      // and without chunks; 5 x 6 = 30 in tiles of 4 (the last of 2), batch 2.
      {conv(1, 96, 7, 7, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
       R"("tile_ic": [12, 8], "tile_oc": [2, 16], "tile_ow": [3, 3], "unroll_kw": 1, )"
       R"("oc_reg": 2, "oh_reg": 1, "kernel_outer": 0, "ic_chunk": 64, "pixel_tiles": 1)"},
      {conv(2, 48, 5, 6, 24, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}),
       R"("tile_ic": [6, 8], "tile_oc": [3, 8], "tile_ow": [2, 4], "unroll_kw": 0, )"
       R"("oc_reg": 4, "oh_reg": 2, "kernel_outer": 0, "ic_chunk": 0, "pixel_tiles": 1)"},
  };
  std::mt19937_64 rng(29);
  for (const Case& c : cases) {
    Config cfg = ops::detail::config_from_knobs(t.space(c.w), c.knobs);
    check_config(t, c.w, cfg, rng);
    // The chunked reduction and the peeled tile: no guard is left inside the
    // kernel's rolled loops (the chunks, the ow tiles, a chunk's blocks).
    Built b = build(t, c.w, cfg, false);
    SCOPED_TRACE(c.w.key() + "\n" + ir::to_string(b.plain.body));
    RolledLoopGuards found;
    found.visit(b.plain.body);
    EXPECT_GT(found.rolled, 0);
    EXPECT_EQ(found.guards_inside, 0);
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

bool holds_loop(const ir::Stmt& s) {
  struct Find : ir::IRVisitor {
    bool found = false;
    void visit_for(const ir::ForNode*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

bool stores_local(const ir::Stmt& s) {
  struct Find : ir::IRVisitor {
    bool found = false;
    void visit_store(const ir::StoreNode* op) override {
      found |= op->buffer->scope == ir::MemScope::Local;
    }
  } f;
  f.visit(s);
  return f.found;
}

// Counts the if/else statements whose then-case holds a loop, and the tests
// inside those then-cases' accumulating loops (loops that store to a Local
// buffer: the reduction over k): version_guarded_loops' full versions.
struct FullVersions : ir::IRVisitor {
  int versions = 0, guards_in_full_loops = 0;
  int accumulating_depth = 0, full_depth = 0;
  void visit_for(const ir::ForNode* op) override {
    bool accumulating = full_depth > 0 && stores_local(op->body);
    accumulating_depth += accumulating;
    ir::IRVisitor::visit_for(op);
    accumulating_depth -= accumulating;
  }
  void visit_if(const ir::IfThenElseNode* op) override {
    if (accumulating_depth > 0) ++guards_in_full_loops;
    if (op->else_case && holds_loop(op->then_case) && full_depth == 0) {
      ++versions;
      ++full_depth;
      visit(op->then_case);
      --full_depth;
      visit(op->else_case);
      return;
    }
    ir::IRVisitor::visit_if(op);
  }
};

// dense_pack.x86 and batch_matmul.x86 whose last parallel task holds fewer
// row tiles than the others, whose last row tile is partial (197 rows in
// tiles of 4), or whose last column tile is (200 or 13 columns in tiles of
// 16 or 8: per-lane loops beside each vector statement): the tests sit
// inside the k loop of every tile, so version_guarded_loops gives each tile
// a second version without them. Both versions against the reference, alone
// and with the epilogue.
TEST(Templates, PartialRowTasksAreVersionedAndMatchTheReference) {
  struct Case {
    Workload w;
    const char* knobs;
  };
  const Case cases[] = {
      {dense("dense_pack.x86", 197, 48, 24),
       R"("tile_y": [4, 16, 4], "tile_x": [1, 3, 16], "tile_k": [6, 4], "tile_order": 1)"},
      {dense("dense_pack.x86", 196, 32, 16),
       R"("tile_y": [4, 16, 4], "tile_x": [1, 2, 16], "tile_k": [4, 4], "tile_order": 0)"},
      {dense("dense_pack.x86", 13, 40, 9),
       R"("tile_y": [2, 2, 4], "tile_x": [1, 5, 8], "tile_k": [3, 3], "tile_order": 1)"},
      {dense("dense_pack.x86", 24, 200, 8),
       R"("tile_y": [3, 2, 4], "tile_x": [2, 8, 16], "tile_k": [2, 4], "tile_order": 1)"},
      {bmm(3, 10, 12, 3, 13), R"("tile_y": [1, 2, 5], "tile_x": [2, 1, 8], "tile_k": [3, 4])"},
      {bmm(2, 7, 8, 1, 37), R"("tile_y": [2, 1, 4], "tile_x": [3, 1, 16], "tile_k": [2, 4])"},
  };
  std::mt19937_64 rng(41);
  for (const Case& c : cases) {
    const Workload& w = c.w;
    const OpTemplate& t = ops::get_template(w.template_name);
    Config cfg = ops::detail::config_from_knobs(t.space(w), c.knobs);
    check_config(t, w, cfg, rng);
    Built b = build(t, w, cfg, true);
    for (const ir::LoweredFunc* f : {&b.plain, &b.fused}) {
      SCOPED_TRACE(w.key() + "\n" + ir::to_string(f->body));
      FullVersions found;
      found.visit(f->body);
      EXPECT_GT(found.versions, 0);
      EXPECT_EQ(found.guards_in_full_loops, 0);
    }
  }
}

// Reduction blocks (k_block): a task's accumulators in a buffer between
// blocks of k, on shapes that no tile divides (197 or 37 rows, 40 or 24
// columns of a packed panel of 16, K = 300 in blocks of 75), alone and with
// the epilogue, against the reference; the block loop is a rolled loop
// outside the register tiles, and a full row tile runs without guards.
TEST(Templates, DenseReductionBlocksMatchTheReference) {
  struct Case {
    Workload w;
    const char* knobs;
    int64_t block;
  };
  const Case cases[] = {
      {dense("dense_pack.x86", 197, 40, 512),
       R"("tile_y": [5, 8, 6], "tile_x": [2, 2, 16], "tile_k": [128, 4], "tile_order": 0, )"
       R"("k_block": 128)",
       128},
      {dense("dense_pack.x86", 37, 24, 300),
       R"("tile_y": [3, 2, 7], "tile_x": [2, 1, 16], "tile_k": [100, 3], "tile_order": 1, )"
       R"("k_block": 128)",
       75},
      {dense("dense_nopack.x86", 50, 64, 256),
       R"("tile_y": [2, 4, 8], "tile_x": [2, 2, 16], "tile_k": [64, 4], "tile_order": 0, )"
       R"("k_block": 128)",
       128},
      {dense("dense_pack.x86", 16, 32, 1024),
       R"("tile_y": [1, 2, 8], "tile_x": [1, 1, 32], "tile_k": [256, 4], "tile_order": 1, )"
       R"("k_block": 512)",
       512},
  };
  std::mt19937_64 rng(43);
  for (const Case& c : cases) {
    const OpTemplate& t = ops::get_template(c.w.template_name);
    Config cfg = ops::detail::config_from_knobs(t.space(c.w), c.knobs);
    const int64_t K = c.w.get("weight")[0];
    EXPECT_EQ(ops::detail::dense_k_block(cfg, K), c.block) << c.w.key();
    check_config(t, c.w, cfg, rng);
    Built b = build(t, c.w, cfg, true);
    for (const ir::LoweredFunc* f : {&b.plain, &b.fused}) {
      SCOPED_TRACE(c.w.key() + "\n" + ir::to_string(f->body));
      std::string text = ir::to_string(f->body);
      // The blocks: a rolled loop of K / block iterations, outside the tiles.
      EXPECT_NE(text.find("rolled (k.o.o, 0, " + std::to_string(K / c.block) + ")"),
                std::string::npos);
    }
  }
  // No block: k_block 0, or one block as long as K.
  Workload w = dense("dense_pack.x86", 64, 32, 128);
  const OpTemplate& t = ops::get_template(w.template_name);
  for (const char* kb : {"0", "128", "512"}) {
    Config cfg = ops::detail::config_from_knobs(
        t.space(w), std::string(R"("tile_y": [2, 4, 8], "tile_x": [1, 1, 32], )"
                                R"("tile_k": [32, 4], "tile_order": 0, "k_block": )") +
                        kb);
    EXPECT_EQ(ops::detail::dense_k_block(cfg, 128), 0) << kb;
  }
}

// The fallback's row tiles per task leave no task short where a count the
// split allows does so (196 rows = 49 tiles of 4: tasks of 7), and stay a
// power of two or a divisor of M.
TEST(Templates, DenseRowTasksSplitTheTilesEvenly) {
  using ops::detail::row_tiles_per_task;
  EXPECT_EQ(row_tiles_per_task(196, 4, 16), 7);
  EXPECT_EQ(row_tiles_per_task(128, 4, 16), 16);
  EXPECT_EQ(row_tiles_per_task(197, 4, 16), 4);  // 50 tiles; 10 is no candidate of 197
  EXPECT_EQ(row_tiles_per_task(3, 4, 16), 1);
  for (int64_t m : {1, 7, 50, 196, 197, 384, 1000})
    for (int64_t rows : {1, 2, 4, 6, 8})
      for (int64_t cap : {1, 4, 16, 64}) {
        int64_t y1 = row_tiles_per_task(m, rows, cap);
        EXPECT_GE(y1, 1);
        EXPECT_LE(y1, std::max<int64_t>(1, cap));
        EXPECT_TRUE(m % y1 == 0 || (y1 & (y1 - 1)) == 0) << m << " " << rows << " " << cap;
      }
}

// The fallback's row count fills the register budget when M has no divisor
// of at least half the cap: ViT's 197 rows as AVX2 code get 6-row tiles (12
// ymm accumulators; a power of two gave 4), as AVX-512 code 8; a divisor
// near the cap still wins (196: 7 or 4).
TEST(Templates, DenseFallbackRowsFillTheRegisterBudget) {
  const Isa avx2 = codegen::Target::parse("llvm -mcpu=haswell").isa();
  const Isa avx512 = codegen::Target::parse("llvm -mcpu=skylake-avx512").isa();
  auto rows = [](const char* name, ops::DenseWorkload mnk, const Isa& isa) {
    ops::Workload w = ops::dense_workload(name, mnk);
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    schedule::Config cfg = t.fallback(w, isa);
    EXPECT_TRUE(t.fits(w, cfg, isa)) << w.key();
    return cfg.split("tile_y").back();
  };
  EXPECT_EQ(rows("dense_pack.x86", {197, 768, 3072}, avx2), 6);
  EXPECT_EQ(rows("dense_pack.x86", {197, 768, 3072}, avx512), 8);
  EXPECT_EQ(rows("dense_pack.x86", {196, 768, 3072}, avx2), 4);
  EXPECT_EQ(rows("dense_pack.x86", {196, 768, 3072}, avx512), 7);
  EXPECT_EQ(rows("dense_pack.x86", {5, 64, 64}, avx2), 5);
}

}  // namespace
}  // namespace kiln::test
