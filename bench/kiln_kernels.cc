#include "kiln_kernels.h"

#include <random>
#include <stdexcept>

#include "codegen/codegen.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/reference.h"
#include "schedule/lower.h"
#include "timer.h"

namespace kiln::bench {

namespace {

using schedule::Config;
using schedule::ConfigSpace;

void check(const char* what, double err) {
  if (!(err <= 1e-4))
    throw std::runtime_error(std::string(what) + ": kernel output differs from the reference (" +
                             std::to_string(err) + ")");
}

// One hand-picked knob: a split by its inner factors (the outermost derived
// from `extent`, as KnobValues::split does) or a plain knob value.
struct Pick {
  std::string name;
  int64_t extent = 0;          // splits only
  std::vector<int64_t> value;  // inner factors of a split, or {value} of a knob
};

Pick split(std::string name, int64_t extent, std::vector<int64_t> inner) {
  return {std::move(name), extent, std::move(inner)};
}
Pick knob(std::string name, int64_t value) { return {std::move(name), 0, {value}}; }

std::string list_json(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// A knob's value in cfg as JSON, whatever its kind.
std::string value_json(const ConfigSpace& space, const Config& cfg, const std::string& name) {
  switch (space.knob_kind(name)) {
    case schedule::KnobKind::Split: return list_json(cfg.split(name));
    case schedule::KnobKind::Knob: return std::to_string(cfg.knob(name));
    case schedule::KnobKind::Reorder: {
      const auto& perm = cfg.reorder(name);
      return list_json(std::vector<int64_t>(perm.begin(), perm.end()));
    }
    case schedule::KnobKind::Annotate: {
      std::string s = "[";
      for (auto a : cfg.annotate(name))
        s += std::string(s.size() > 1 ? ", " : "") + "\"" + schedule::annotation_name(a) + "\"";
      return s + "]";
    }
  }
  throw std::logic_error("unknown knob kind");
}

std::string pick_json(const Pick& p) {
  if (p.extent == 0) return std::to_string(p.value.at(0));
  int64_t inner = 1;
  for (int64_t f : p.value) inner *= f;
  std::vector<int64_t> full{(p.extent + inner - 1) / inner};
  full.insert(full.end(), p.value.begin(), p.value.end());
  return list_json(full);
}

// cfg with `pick` replacing one knob's value; throws std::invalid_argument
// (from Config::from_json) when the space has no such knob or value.
Config with_pick(const ConfigSpace& space, const Config& cfg, const Pick& pick) {
  bool known = false;
  std::string knobs;
  for (const std::string& name : space.knob_names()) {
    known = known || name == pick.name;
    knobs += (knobs.empty() ? "\"" : ", \"") + name +
             "\": " + (name == pick.name ? pick_json(pick) : value_json(space, cfg, name));
  }
  if (!known) throw std::invalid_argument("the space has no knob '" + pick.name + "'");
  return Config::from_json(space, "{\"knobs\": {" + knobs + "}}");
}

// The template's fallback with each pick applied on top, in order.
Config picked_config(const ops::OpTemplate& t, const ops::Workload& w,
                     const std::vector<Pick>& picks, std::vector<std::string>& dropped) {
  ConfigSpace space = t.space(w);
  Config cfg = t.fallback(w, codegen::Target::host().isa());
  for (const Pick& p : picks) {
    try {
      cfg = with_pick(space, cfg, p);
    } catch (const std::invalid_argument& e) {
      dropped.push_back(t.name() + " " + p.name + " = " + pick_json(p) + ": " + e.what());
    }
  }
  return cfg;
}

// The hand-picked register tiles. Dense: rows x 32 (two zmm vectors) for big
// M; a 1 x 40 (zmm, zmm, ymm) row for the batch-1 GEMV with k unrolled 16 deep
// so that many weight loads are in flight.
Config dense_config(int64_t M, int64_t N, int64_t K, std::vector<std::string>& dropped) {
  const ops::OpTemplate& t = ops::dense_pack_template();
  ops::Workload w = ops::dense_workload(t.name(), {M, N, K});
  if (M == 1)
    return picked_config(t, w,
                         {split("tile_y", M, {1, 1}), split("tile_x", N, {1, 40}),
                          split("tile_k", K, {16}), knob("tile_order", 1)},
                         dropped);
  return picked_config(t, w,
                       {split("tile_y", M, {8, 8}), split("tile_x", N, {16, 32}),
                        split("tile_k", K, {4}), knob("tile_order", 1)},
                       dropped);
}

// Conv: 7 output columns x 64 output channels (28 zmm accumulators).
Config conv2d_config(const ops::Conv2DParams& p, std::vector<std::string>& dropped) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_template();
  ops::Workload w = ops::conv2d_workload(
      t.name(), ops::Conv2DAttrs{p.batch, p.in_channels, p.height, p.width, p.out_channels,
                                 p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
                                 p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, 1});
  return picked_config(
      t, w,
      {split("tile_ic", p.in_channels, {16}), split("tile_oc", p.out_channels, {64}),
       split("tile_ow", p.out_width(), {7}), knob("unroll_kw", 1)},
      dropped);
}

ops::Conv2DParams conv_params(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                              int64_t KW, int64_t stride, int64_t pad) {
  return {N, C, H, W, OC, KH, KW, stride, stride, pad, pad, 1, 1};
}

}  // namespace

ConfigCheck kiln_dense_config(int64_t M, int64_t N, int64_t K) {
  ConfigCheck c;
  c.config = dense_config(M, N, K, c.dropped).to_json();
  return c;
}

ConfigCheck kiln_conv2d_config(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                               int64_t KW, int64_t stride, int64_t pad) {
  ConfigCheck c;
  c.config = conv2d_config(conv_params(N, C, H, W, OC, KH, KW, stride, pad), c.dropped).to_json();
  return c;
}

KilnResult kiln_dense_ms(int64_t M, int64_t N, int64_t K, int repeat) {
  KilnResult r;
  Config cfg = dense_config(M, N, K, r.dropped);
  auto kern = ops::dense_pack({M, N, K}, cfg, /*pack_in_kernel=*/false);
  auto f = schedule::lower(kern.sch, kern.args, "dense_pack");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  auto fn = mod->get_function(f.name);

  auto A = ops::reference::random_uniform(M * K, 1), B = ops::reference::random_uniform(K * N, 2);
  auto Bp = ops::pack_dense_weight(B.data(), K, N, ops::dense_pack_block(cfg));
  std::vector<float> C(M * N), ref(M * N);
  std::vector<void*> args{A.data(), Bp.data(), C.data()};
  fn(args.data());
  ops::reference::dense(A.data(), B.data(), ref.data(), M, N, K);
  r.rel_error = ops::reference::max_relative_error(C.data(), ref.data(), C.size());
  check("dense", r.rel_error);
  r.median_ms = time_ms([&] { fn(args.data()); }, 3, repeat).median_ms;
  r.config = cfg.to_json();
  return r;
}

KilnResult kiln_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                          int64_t KW, int64_t stride, int64_t pad, int repeat) {
  KilnResult r;
  ops::Conv2DParams p = conv_params(N, C, H, W, OC, KH, KW, stride, pad);
  Config cfg = conv2d_config(p, r.dropped);
  auto kern = ops::conv2d_nchwc(p, cfg);
  auto f = schedule::lower(kern.sch, kern.args, "conv2d_nchwc");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  auto fn = mod->get_function(f.name);

  int64_t icb = ops::conv2d_nchwc_ic_block(cfg), ocb = ops::conv2d_nchwc_oc_block(cfg);
  int64_t ow = p.out_width();
  auto x = ops::reference::random_uniform(N * C * H * W, 3),
       wt = ops::reference::random_uniform(OC * C * KH * KW, 4);
  auto xb = ops::nchw_to_nchwc(x.data(), N, C, H, W, icb);
  auto wb = ops::oihw_to_blocked(wt.data(), OC, C, KH, KW, icb, ocb);
  int64_t out_n = N * OC * p.out_height() * ow;
  std::vector<float> out(out_n), ref(out_n);
  std::vector<void*> args{xb.data(), wb.data(), out.data()};
  fn(args.data());
  ops::reference::conv2d_nchw(x.data(), wt.data(), ref.data(), p);
  auto plain = ops::nchwc_to_nchw(out.data(), N, OC, p.out_height(), ow, ocb);
  r.rel_error = ops::reference::max_relative_error(plain.data(), ref.data(), out_n);
  check("conv2d", r.rel_error);
  r.median_ms = time_ms([&] { fn(args.data()); }, 3, repeat).median_ms;
  r.config = cfg.to_json();
  return r;
}

}  // namespace kiln::bench
