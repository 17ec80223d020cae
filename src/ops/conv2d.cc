#include "ops/conv2d.h"

#include <stdexcept>

#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

// Zero padding of dims 2 and 3 (H and W in NCHW and in NCHW[x]c): out-of-range
// coordinates are clamped so that the (unselected) load stays in bounds.
Tensor pad_spatial(const Tensor& data, int64_t ph, int64_t pw, const std::string& name) {
  std::vector<Expr> shape = data->shape;
  int64_t H = *as_const_int(shape[2]), W = *as_const_int(shape[3]);
  shape[2] = make_int(H + 2 * ph);
  shape[3] = make_int(W + 2 * pw);
  return compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr h = i[2] - ph, w = i[3] - pw;
        Expr inside = logical_and(logical_and(h >= 0, h < H), logical_and(w >= 0, w < W));
        std::vector<Expr> idx(i.begin(), i.end());
        idx[2] = max(min(h, make_int(H - 1)), make_int(0));
        idx[3] = max(min(w, make_int(W - 1)), make_int(0));
        return select(inside, read(data, idx), make_float(0.0));
      },
      name);
}

void check(const Conv2DParams& p) {
  if (p.out_height() < 1 || p.out_width() < 1)
    throw std::invalid_argument("conv2d: empty output for these sizes");
}

}  // namespace

ConfigSpace conv2d_nchw_space(const Conv2DParams& p, SplitPolicy policy) {
  check(p);
  ConfigSpace space;
  space.define_split("tile_oc", p.out_channels, 2, policy);
  space.define_split("tile_oh", p.out_height(), 2, policy);
  space.define_split("tile_ow", p.out_width(), 2, policy);
  space.define_split("tile_ic", p.in_channels, 2, policy);
  space.define_knob("pad_mode", {0, 1, 2});
  space.define_knob("unroll_inner", {0, 1});
  return space;
}

Kernel conv2d_nchw(const Conv2DParams& p, const Config& cfg) {
  check(p);
  Tensor data = placeholder({p.batch, p.in_channels, p.height, p.width}, DataType::f32(), "data");
  Tensor weight = placeholder({p.out_channels, p.in_channels, p.kernel_h, p.kernel_w},
                              DataType::f32(), "weight");
  Tensor pad = pad_spatial(data, p.pad_h, p.pad_w, "data_pad");
  IterVar rc = reduce_axis(p.in_channels, "rc"), ry = reduce_axis(p.kernel_h, "ry"),
          rx = reduce_axis(p.kernel_w, "rx");
  Tensor out = compute(
      {p.batch, p.out_channels, p.out_height(), p.out_width()},
      [&](const std::vector<Var>& i) {
        Expr h = i[2] * p.stride_h + ry->var * p.dilation_h;
        Expr w = i[3] * p.stride_w + rx->var * p.dilation_w;
        return sum(at(pad, i[0], rc->var, h, w) * at(weight, i[1], rc->var, ry->var, rx->var),
                   {rc, ry, rx});
      },
      "conv");
  Kernel k{"conv2d_nchw", {data, weight, out}, schedule::create_schedule({out})};
  auto& sch = k.sch;
  Tensor CC = sch.cache_write(out, MemScope::Local);
  auto so = sch[out];
  auto oc = apply_split(so, so->axis(1), cfg.split("tile_oc"));
  auto oh = apply_split(so, so->axis(2), cfg.split("tile_oh"));
  auto ow = apply_split(so, so->axis(3), cfg.split("tile_ow"));
  so->reorder({so->axis(0), oc[0], oh[0], ow[0], oc[1], oh[1], ow[1]});
  so->parallel(so->fuse(so->axis(0), oc[0]));
  so->vectorize(ow[1]);

  auto sc = sch[CC];
  sc->compute_at(so, ow[0]);
  auto ic = apply_split(sc, sc->reduce_axis(0), cfg.split("tile_ic"));
  sc->reorder({ic[0], sc->reduce_axis(1), sc->reduce_axis(2), ic[1], sc->axis(1), sc->axis(2),
               sc->axis(3)});
  if (cfg.knob("unroll_inner")) sc->unroll(sc->axis(2));
  sc->vectorize(sc->axis(3));

  switch (cfg.knob("pad_mode")) {
    case 0: sch[pad]->compute_inline(); break;
    case 1: break;  // root: the whole padded input first
    default: sch[pad]->compute_at(sc, ic[0]); break;
  }
  return k;
}

ConfigSpace conv2d_nchwc_space(const Conv2DParams& p) {
  check(p);
  ConfigSpace space;
  space.define_split("tile_ic", p.in_channels, 2, SplitPolicy::Factors);
  space.define_split("tile_oc", p.out_channels, 2, SplitPolicy::Factors);
  space.define_split("tile_ow", p.out_width(), 2, SplitPolicy::Factors);
  space.define_knob("unroll_kw", {0, 1});
  return space;
}

int64_t conv2d_nchwc_ic_block(const Config& cfg) { return cfg.split("tile_ic").back(); }
int64_t conv2d_nchwc_oc_block(const Config& cfg) { return cfg.split("tile_oc").back(); }

Kernel conv2d_nchwc(const Conv2DParams& p, const Config& cfg) {
  check(p);
  int64_t icb = conv2d_nchwc_ic_block(cfg), ocb = conv2d_nchwc_oc_block(cfg);
  if (p.in_channels % icb || p.out_channels % ocb)
    throw std::invalid_argument("conv2d_NCHWc: channel blocks must divide the channels");
  int64_t ICo = p.in_channels / icb, OCo = p.out_channels / ocb;
  Tensor data = placeholder({p.batch, ICo, p.height, p.width, icb}, DataType::f32(), "data");
  Tensor weight =
      placeholder({OCo, ICo, p.kernel_h, p.kernel_w, icb, ocb}, DataType::f32(), "weight");
  Tensor pad = pad_spatial(data, p.pad_h, p.pad_w, "data_pad");
  IterVar ico = reduce_axis(ICo, "ico"), kh = reduce_axis(p.kernel_h, "kh"),
          kw = reduce_axis(p.kernel_w, "kw"), ici = reduce_axis(icb, "ici");
  Tensor out = compute(
      {p.batch, OCo, p.out_height(), p.out_width(), ocb},
      [&](const std::vector<Var>& i) {
        Expr h = i[2] * p.stride_h + kh->var * p.dilation_h;
        Expr w = i[3] * p.stride_w + kw->var * p.dilation_w;
        return sum(at(pad, i[0], ico->var, h, w, ici->var) *
                       at(weight, i[1], ico->var, kh->var, kw->var, ici->var, i[4]),
                   {ico, kh, kw, ici});
      },
      "conv");
  Kernel k{"conv2d_NCHWc", {data, weight, out}, schedule::create_schedule({out})};
  auto& sch = k.sch;
  auto sp = sch[pad];
  sp->parallel(sp->fuse({sp->axis(0), sp->axis(1), sp->axis(2)}));
  sp->vectorize(sp->axis(4));

  Tensor CC = sch.cache_write(out, MemScope::Local);
  auto so = sch[out];
  auto ow = apply_split(so, so->axis(3), cfg.split("tile_ow"));
  so->parallel(so->fuse({so->axis(0), so->axis(1), so->axis(2)}));
  so->vectorize(so->axis(4));

  auto sc = sch[CC];
  sc->compute_at(so, ow[0]);
  sc->reorder({sc->reduce_axis(0), sc->reduce_axis(1), sc->reduce_axis(2), sc->reduce_axis(3),
               sc->axis(3), sc->axis(4)});
  if (cfg.knob("unroll_kw")) sc->unroll(sc->reduce_axis(2));
  sc->unroll(sc->axis(3));
  sc->vectorize(sc->axis(4));
  return k;
}

namespace {

// Calls f(plain offset, blocked offset) for every element of an NCHW tensor
// and its NCHW[cb]c counterpart.
template <typename F>
void for_each_nchwc_pair(int64_t n, int64_t c, int64_t h, int64_t w, int64_t cb, F f) {
  for (int64_t a = 0; a < n; ++a)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z)
          f(((a * c + ch) * h + y) * w + z,
            ((((a * (c / cb) + ch / cb) * h + y) * w + z) * cb) + ch % cb);
}

}  // namespace

std::vector<float> nchw_to_nchwc(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb) {
  std::vector<float> out(static_cast<size_t>(n * c * h * w));
  for_each_nchwc_pair(n, c, h, w, cb,
                      [&](int64_t plain, int64_t blocked) { out[blocked] = x[plain]; });
  return out;
}

std::vector<float> nchwc_to_nchw(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb) {
  std::vector<float> out(static_cast<size_t>(n * c * h * w));
  for_each_nchwc_pair(n, c, h, w, cb,
                      [&](int64_t plain, int64_t blocked) { out[plain] = x[blocked]; });
  return out;
}

std::vector<float> oihw_to_blocked(const float* wt, int64_t oc, int64_t ic, int64_t kh, int64_t kw,
                                   int64_t icb, int64_t ocb) {
  std::vector<float> out(static_cast<size_t>(oc * ic * kh * kw));
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t dst =
              (((((o / ocb) * (ic / icb) + i / icb) * kh + y) * kw + x) * icb + i % icb) * ocb +
              o % ocb;
          out[dst] = wt[((o * ic + i) * kh + y) * kw + x];
        }
  return out;
}

}  // namespace kiln::ops
