#include "onednn_reference.h"

#include <dlfcn.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "ops/reference.h"
#include "timer.h"

namespace kiln::bench {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// Enough warm-up runs to start OpenMP's threads and fault in every buffer.
int warmup_for(int repeat) { return std::max(3, repeat / 5); }

// One CPU engine and stream for the whole process, as an application would.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

Context& context() {
  static Context ctx;
  return ctx;
}

// Memory in descriptor `md` filled with values in [-1, 1]: written plainly in
// `plain` layout, then reordered when oneDNN chose another (blocked) layout.
memory filled(const memory::desc& md, const memory::dims& dims, tag plain, uint32_t seed) {
  Context& ctx = context();
  memory user({dims, dt::f32, plain}, ctx.engine);
  std::vector<float> values =
      kiln::ops::reference::random_uniform(user.get_desc().get_size() / sizeof(float), seed);
  std::copy(values.begin(), values.end(), static_cast<float*>(user.get_data_handle()));
  if (md == user.get_desc()) return user;
  memory blocked(md, ctx.engine);
  dnnl::reorder(user, blocked).execute(ctx.stream, user, blocked);
  ctx.stream.wait();
  return blocked;
}

double time_primitive(const dnnl::primitive& p, const std::unordered_map<int, memory>& args,
                      int repeat) {
  dnnl::stream& s = context().stream;
  auto run = [&] {
    p.execute(s, args);
    s.wait();
  };
  return time_ms(run, warmup_for(repeat), repeat).median_ms;
}

}  // namespace

int set_onednn_threads(int n) {
  // Debian's libdnnl pulls in libgomp, but kiln_bench does not link it
  // itself, so its entry points are looked up in the loaded libraries rather
  // than called (OMP_NUM_THREADS is read when libgomp loads: too early to set).
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (!set || !get) return -1;
  set(n);
  return get();
}

double onednn_sgemm_ms(int64_t M, int64_t N, int64_t K, int repeat, std::vector<float>* result) {
  // dnnl_sgemm rather than a matmul primitive on plain layouts: measured here
  // it is the faster of the two (1024^3: ~7% faster; M = 1: ~25% faster), and
  // the reference should be oneDNN's best. B stays the caller's row-major
  // matrix: oneDNN packs it on every call, as any sgemm does.
  std::vector<float> a = kiln::ops::reference::random_uniform(M * K, 1),
                     b = kiln::ops::reference::random_uniform(K * N, 2), c(M * N);
  auto run = [&] {
    dnnl_status_t st =
        dnnl_sgemm('N', 'N', M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
    if (st != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
  };
  double ms = time_ms(run, warmup_for(repeat), repeat).median_ms;
  if (result) *result = c;
  return ms;
}

double onednn_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                        int64_t KW, int64_t stride, int64_t pad, int repeat,
                        std::vector<float>* result) {
  Context& ctx = context();
  const int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
  const memory::dims src_dims{N, C, H, W}, wei_dims{OC, C, KH, KW}, dst_dims{N, OC, OH, OW};
  // format_tag::any lets oneDNN pick its blocked layouts for the primitive.
  memory::desc src_any(src_dims, dt::f32, tag::any), wei_any(wei_dims, dt::f32, tag::any),
      dst_any(dst_dims, dt::f32, tag::any);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::convolution_direct, src_any, wei_any,
                                       dst_any, {stride, stride}, {pad, pad}, {pad, pad});
  dnnl::convolution_forward::primitive_desc pd(desc, ctx.engine);
  memory src = filled(pd.src_desc(), src_dims, tag::nchw, 3);
  memory wei = filled(pd.weights_desc(), wei_dims, tag::oihw, 4);
  memory dst(pd.dst_desc(), ctx.engine);
  double ms =
      time_primitive(dnnl::convolution_forward(pd),
                     {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}}, repeat);
  if (result) {
    memory plain({dst_dims, dt::f32, tag::nchw}, ctx.engine);
    dnnl::reorder(dst, plain).execute(ctx.stream, dst, plain);
    ctx.stream.wait();
    const float* p = static_cast<const float*>(plain.get_data_handle());
    result->assign(p, p + N * OC * OH * OW);
  }
  return ms;
}

}  // namespace kiln::bench
