// The core compiler end to end on two hand-scheduled kernels (`kiln demo`):
// each is scheduled by hand, lowered, compiled with the JIT, checked against
// the reference and timed; the dense kernel is then emitted as a shared
// library, loaded through the runtime (no LLVM on that path) and checked again.
#include "driver/kernel_demo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

#include "codegen/codegen.h"
#include "ir/printer.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/reference.h"
#include "runtime/c_runtime_api.h"
#include "runtime/module.h"
#include "schedule/lower.h"
#include "support/temp_files.h"

namespace kiln::driver {

namespace {

// Median wall time of `repeat` calls, in milliseconds.
double median_ms(kiln_kernel_fn fn, std::vector<void*>& args, int repeat) {
  std::vector<double> t;
  fn(args.data());
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn(args.data());
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

bool report(const char* name, double err, double ms, double flops) {
  bool ok = err <= 1e-5;
  std::printf("  %-32s max rel. error %.2e %s   %8.3f ms  %7.1f GFLOP/s\n", name, err,
              ok ? "(ok)" : "(WRONG)", ms, flops / ms * 1e-6);
  return ok;
}

bool demo_dense(const codegen::Target& target, bool print_ir, bool print_asm) {
  ops::DenseWorkload w{512, 512, 512};
  auto space = ops::dense_pack_space(w, schedule::SplitPolicy::Factors);
  auto cfg = schedule::Config::from_json(
      space,
      R"({"knobs": {"tile_y": [8, 8, 8], "tile_x": [4, 4, 32], "tile_k": [128, 4], "tile_order": 1}})");
  auto kern = ops::dense_pack(w, cfg, /*pack_in_kernel=*/false);
  ir::LoweredFunc f = schedule::lower(kern.sch, kern.args, "dense_pack_512");
  if (print_ir) std::cout << ir::to_string(f) << "\n";
  if (print_asm) std::cout << codegen::emit_assembly({f}, target) << "\n";

  auto A = ops::reference::random_uniform(w.M * w.K, 1),
       B = ops::reference::random_uniform(w.K * w.N, 2);
  auto Bp = ops::pack_dense_weight(B.data(), w.K, w.N, ops::dense_pack_block(cfg));
  std::vector<float> ref(w.M * w.N), C(w.M * w.N);
  ops::reference::dense(A.data(), B.data(), ref.data(), w.M, w.N, w.K);
  std::vector<void*> args{A.data(), Bp.data(), C.data()};
  double flops = 2.0 * w.M * w.N * w.K;

  auto jit = codegen::jit_compile({f}, target);
  double ms = median_ms(jit->get_function(f.name), args, 20);
  bool ok = report("dense 512x512x512 (JIT)",
                   ops::reference::max_relative_error(C.data(), ref.data(), C.size()), ms, flops);

  support::TempDir dir("demo");  // removed on return and by kiln's signal handler
  std::string so = (dir.path() / "dense.so").string();
  codegen::build_shared_library({f}, target, so);
  {
    auto mod = runtime::Module::load(so);
    std::fill(C.begin(), C.end(), 0.0f);
    ms = median_ms(mod.get_function(f.name), args, 20);
    ok &= report("dense 512x512x512 (shared lib)",
                 ops::reference::max_relative_error(C.data(), ref.data(), C.size()), ms, flops);
  }
  return ok;
}

bool demo_conv(const codegen::Target& target) {
  ops::Conv2DParams p{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1};
  auto space = ops::conv2d_nchwc_space(p);
  auto cfg = schedule::Config::from_json(
      space,
      R"({"knobs": {"tile_ic": [4, 16], "tile_oc": [2, 32], "tile_ow": [8, 7], "unroll_kw": 1, )"
      R"("oc_reg": 1, "oh_reg": 1, "kernel_outer": 0}})");
  auto kern = ops::conv2d_nchwc(p, cfg);
  ir::LoweredFunc f = schedule::lower(kern.sch, kern.args, "conv2d_nchwc_64");
  int64_t icb = ops::conv2d_nchwc_ic_block(cfg), ocb = ops::conv2d_nchwc_oc_block(cfg);
  auto x = ops::reference::random_uniform(p.in_channels * p.height * p.width, 3);
  auto wt = ops::reference::random_uniform(p.out_channels * p.in_channels * 9, 4);
  auto xb = ops::nchw_to_nchwc(x.data(), 1, p.in_channels, p.height, p.width, icb);
  auto wb = ops::oihw_to_blocked(wt.data(), p.out_channels, p.in_channels, 3, 3, icb, ocb);
  int64_t out_n = p.out_channels * p.out_height() * p.out_width();
  std::vector<float> ref(out_n), out(out_n);
  ops::reference::conv2d_nchw(x.data(), wt.data(), ref.data(), p);
  std::vector<void*> args{xb.data(), wb.data(), out.data()};
  auto jit = codegen::jit_compile({f}, target);
  double ms = median_ms(jit->get_function(f.name), args, 20);
  auto plain =
      ops::nchwc_to_nchw(out.data(), 1, p.out_channels, p.out_height(), p.out_width(), ocb);
  double flops = 2.0 * out_n * p.in_channels * 9;
  return report("conv2d 64->64 3x3 56x56 NCHW16c",
                ops::reference::max_relative_error(plain.data(), ref.data(), out_n), ms, flops);
}

}  // namespace

bool run_kernel_demo(const codegen::Target& target, bool print_ir, bool print_asm) {
  bool ok = demo_dense(target, print_ir, print_asm);
  ok &= demo_conv(target);
  return ok;
}

}  // namespace kiln::driver
