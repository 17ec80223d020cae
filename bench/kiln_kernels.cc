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

void check(const char* what, double err) {
  if (!(err <= 1e-4))
    throw std::runtime_error(std::string(what) + ": kernel output differs from the reference (" +
                             std::to_string(err) + ")");
}

// The hand-picked schedule per dense shape: a register tile of rows x 32
// (two zmm vectors) for big M, a 1 x 40 (zmm, zmm, ymm) row for the batch-1 GEMV
// with k unrolled 16 deep so that many weight loads are in flight.
std::string dense_config(int64_t M, int64_t N, int64_t K) {
  if (M == 1)
    return R"({"knobs": {"tile_y": [1, 1, 1], "tile_x": [25, 1, 40], "tile_k": [)" +
           std::to_string(K / 16) + R"(, 16], "tile_order": 1}})";
  return R"({"knobs": {"tile_y": [16, 8, 8], "tile_x": [2, 16, 32], "tile_k": [256, 4], "tile_order": 1}})";
}

}  // namespace

KilnResult kiln_dense_ms(int64_t M, int64_t N, int64_t K, int repeat) {
  ops::DenseWorkload w{M, N, K};
  auto space = ops::dense_pack_space(w, schedule::SplitPolicy::All);
  auto cfg = schedule::Config::from_json(space, dense_config(M, N, K));
  auto kern = ops::dense_pack(w, cfg, /*pack_in_kernel=*/false);
  auto f = schedule::lower(kern.sch, kern.args, "dense_pack");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  auto fn = mod->get_function(f.name);

  auto A = ops::reference::random_uniform(M * K, 1), B = ops::reference::random_uniform(K * N, 2);
  auto Bp = ops::pack_dense_weight(B.data(), K, N, ops::dense_pack_block(cfg));
  std::vector<float> C(M * N), ref(M * N);
  std::vector<void*> args{A.data(), Bp.data(), C.data()};
  fn(args.data());
  ops::reference::dense(A.data(), B.data(), ref.data(), M, N, K);
  check("dense", ops::reference::max_relative_error(C.data(), ref.data(), C.size()));
  auto t = time_ms([&] { fn(args.data()); }, 3, repeat);
  return {t.median_ms, cfg.to_json()};
}

KilnResult kiln_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                          int64_t KW, int64_t stride, int64_t pad, int repeat) {
  ops::Conv2DParams p{N, C, H, W, OC, KH, KW, stride, stride, pad, pad, 1, 1};
  auto space = ops::conv2d_nchwc_space(p);
  // Register tile: 7 output columns x 64 output channels (28 zmm accumulators).
  int64_t ow = p.out_width();
  auto cfg = schedule::Config::from_json(
      space, R"({"knobs": {"tile_ic": [)" + std::to_string(C / 16) + R"(, 16], "tile_oc": [)" +
                 std::to_string(OC / 64) + R"(, 64], "tile_ow": [)" + std::to_string(ow / 7) +
                 R"(, 7], "unroll_kw": 1}})");
  auto kern = ops::conv2d_nchwc(p, cfg);
  auto f = schedule::lower(kern.sch, kern.args, "conv2d_nchwc");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  auto fn = mod->get_function(f.name);

  int64_t icb = ops::conv2d_nchwc_ic_block(cfg), ocb = ops::conv2d_nchwc_oc_block(cfg);
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
  check("conv2d", ops::reference::max_relative_error(plain.data(), ref.data(), out_n));
  auto t = time_ms([&] { fn(args.data()); }, 3, repeat);
  return {t.median_ms, cfg.to_json()};
}

}  // namespace kiln::bench
