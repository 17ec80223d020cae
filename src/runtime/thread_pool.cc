// The parallel launcher behind kiln_parallel_for, on TBB.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/c_runtime_api.h"

namespace {

int default_num_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

// The arena fixes the worker count; it is rebuilt when the count changes.
struct Pool {
  std::mutex mu;
  int threads = default_num_threads();
  std::unique_ptr<tbb::task_arena> arena;

  tbb::task_arena& get() {
    std::lock_guard<std::mutex> lock(mu);
    if (!arena) arena = std::make_unique<tbb::task_arena>(threads);
    return *arena;
  }
  void set(int n) {
    std::lock_guard<std::mutex> lock(mu);
    threads = n > 0 ? n : default_num_threads();
    arena.reset();
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

extern "C" int32_t kiln_parallel_for(int64_t extent, kiln_parallel_body_fn body, void* closure) {
  if (extent <= 0) return 0;
  int threads = kiln_get_num_threads();
  if (threads == 1 || extent == 1) return body(0, extent, closure);
  // Static blocks, one per thread: kernels are balanced loops, and a static
  // split keeps each thread on the same data from call to call.
  int64_t blocks = std::min<int64_t>(extent, threads);
  std::atomic<int32_t> status{0};
  pool().get().execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, blocks, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t b = r.begin(); b != r.end(); ++b) {
            int64_t begin = extent * b / blocks, end = extent * (b + 1) / blocks;
            int32_t rc = body(begin, end, closure);
            if (rc != 0) {
              int32_t zero = 0;
              status.compare_exchange_strong(zero, rc);
            }
          }
        },
        tbb::static_partitioner());
  });
  return status.load();
}

extern "C" void kiln_set_num_threads(int32_t n) { pool().set(n); }

extern "C" int32_t kiln_get_num_threads(void) {
  std::lock_guard<std::mutex> lock(pool().mu);
  return pool().threads;
}
