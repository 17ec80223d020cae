// The parallel launcher behind kiln_parallel_for: kiln's own worker threads.
//
// Every parallel loop kiln generates starts as one contiguous block per thread,
// and a model launches one to three of them per kernel, a few hundred per run(),
// many only microseconds long (DenseNet-121's 7x7 concats: 2 us of work). On
// TBB, which this launcher used before, a launch cost about 2.6 us beyond its
// work (bench/runtime's kiln_bench_runtime, 2 threads of a Zen 5), more than
// such a kernel's work; here it costs about 1 us, the round trip of two cache
// lines between the cores. TVM's threading backend and ONNX Runtime's pool are
// built the same way, for the same reason.
//
// How a launch runs:
// - Workers 1..n-1 are started once; worker i runs block i of every launch and
//   the calling thread block 0. The same core gets the same block every time,
//   so a kernel split like its producer reads what its own core wrote.
// - A thread claims its block's iterations a chunk at a time from the front
//   (about kChunksPerBlock chunks). One that finishes its block takes the back
//   half of what is left of the fullest other block, as ONNX Runtime's pool
//   does, and goes on. On a shared VM one core often runs slower than the
//   other for a while: with fixed blocks a launch took as long as the slower
//   one (summed over ViT-B/16's 150 launches a run, the slower block ran 14-19 %
//   longer than the faster). Stealing made the zoo and ViT-B/16 1-3 % faster
//   in a quiet hour and 7-13 % in a noisy one (paired medians, 2 threads of
//   an Intel Xeon VM).
//   A block's last iteration is never taken (two left, at least), so a block
//   of one iteration, and where nothing is slow most of every block, stays on
//   its core. KILN_STATIC_BLOCKS=1 turns stealing off (fixed blocks), for
//   comparisons.
// - The caller publishes the job and bumps `epoch_`. An idle worker spins on
//   `epoch_` for kSpinMicros (kernels follow each other within microseconds),
//   then sleeps on it (a futex, through std::atomic::wait), so a program
//   between runs leaves no thread spinning.
// - The caller runs its block, then spins until every worker has acknowledged
//   the launch (each does, with or without a block: a worker never reads a
//   job the caller may be overwriting).
// - A launch from inside a launched block, or while another thread's launch
//   holds the pool, runs serially on the calling thread.
// - A forked child gets a new pool (the parent's workers do not exist there).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/c_runtime_api.h"

namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker spins before it sleeps, and how long the caller spins
// for its workers before it also yields its core (a worker descheduled on a
// busy machine). Long enough to span the gap between two kernels of a run.
constexpr auto kSpinMicros = std::chrono::microseconds(100);
// Workers' stacks: kernels keep register-tile buffers of up to 256 KiB each on
// the stack (kMaxLocalStackBytes in ir/expr.h); TBB's workers had 4 MiB.
constexpr size_t kWorkerStackBytes = size_t(8) << 20;
// A thread claims its block's iterations in about this many chunks, so that a
// thread that finishes first can take the rest of a slower one's block.
constexpr int64_t kChunksPerBlock = 16;

// True on a worker and on a caller inside its own block: a nested launch runs
// serially.
thread_local bool t_inside_launch = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield");
#endif
}

// Spins until `done()`, checking the clock every 64 pauses; returns false if
// `limit` passed first.
template <typename Done>
bool spin_until(Done&& done, Clock::duration limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (Clock::now() >= deadline) return done();
  }
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

int default_num_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

// n - 1 workers and the job they share.
class Pool {
 public:
  // Throws std::runtime_error, with no thread left running, when the system
  // refuses a worker.
  explicit Pool(int threads) : threads_(threads) {
    workers_.reserve(threads - 1);
    for (int i = 1; i < threads; ++i) {
      pthread_t worker;
      if (int rc = start_worker(i, &worker); rc != 0) {
        stop_workers();
        throw std::runtime_error("cannot start worker thread " + std::to_string(i) + " of " +
                                 std::to_string(threads) + ": " + std::strerror(rc));
      }
      workers_.push_back(worker);
    }
  }

  ~Pool() { stop_workers(); }

  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int threads() const { return threads_; }

  int32_t launch(int64_t extent, kiln_parallel_body_fn body, void* closure) {
    body_ = body;
    closure_ = closure;
    extent_ = extent;
    blocks_ = std::min<int64_t>(extent, threads_);
    balanced_ = stealing_ && extent <= int64_t(UINT32_MAX);
    chunk_ = std::max<int64_t>(1, extent / blocks_ / kChunksPerBlock);
    status_.store(0, std::memory_order_relaxed);
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    publish();
    t_inside_launch = true;
    run_block(0);
    t_inside_launch = false;
    auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
    while (!spin_until(all_done, kSpinMicros)) std::this_thread::yield();
    return status_.load(std::memory_order_relaxed);
  }

 private:
  // 0, or pthread_create's error.
  int start_worker(int index, pthread_t* thread) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kWorkerStackBytes);
    auto* arg = new std::pair<Pool*, int>(this, index);
    int rc = pthread_create(
        thread, &attr,
        [](void* p) -> void* {
          std::unique_ptr<std::pair<Pool*, int>> a(static_cast<std::pair<Pool*, int>*>(p));
          a->first->work(a->second);
          return nullptr;
        },
        arg);
    pthread_attr_destroy(&attr);
    if (rc != 0) delete arg;
    return rc;
  }

  void stop_workers() {
    stopping_.store(true, std::memory_order_relaxed);
    publish();
    for (pthread_t w : workers_) pthread_join(w, nullptr);
  }

  // Makes the job written before it visible and wakes sleeping workers. The
  // seq_cst pair (this increment and the check of sleeping_, against a
  // worker's increment of sleeping_ and its check of epoch_) means a worker
  // either sees the new epoch or is counted and woken; std::atomic::wait
  // also re-checks the value before it sleeps.
  void publish() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();
  }

  // Block `index` of the launch, then whatever this thread can steal.
  void run_block(int64_t index) {
    if (!balanced_) {
      if (index < blocks_) run_range(extent_ * index / blocks_, extent_ * (index + 1) / blocks_);
      return;
    }
    if (index < blocks_) {
      // Each thread publishes its own block: its line stays in its core's
      // cache. Every block is empty between launches (all iterations ran),
      // and no thief touches an empty block, so a store is enough; a thief
      // that looks before it finds nothing to take from this block.
      ranges_[index].value.store(
          pack_range(extent_ * index / blocks_, extent_ * (index + 1) / blocks_),
          std::memory_order_release);
      drain(index);
    }
    while (steal_into(index)) drain(index);
  }

  void run_range(int64_t begin, int64_t end) {
    int32_t rc = body_(begin, end, closure_);
    if (rc != 0) {
      int32_t zero = 0;
      status_.compare_exchange_strong(zero, rc, std::memory_order_relaxed);
    }
  }

  // Runs block `index`'s remaining iterations in chunks from its front.
  void drain(int64_t index) {
    std::atomic<uint64_t>& range = ranges_[index].value;
    uint64_t r = range.load(std::memory_order_acquire);
    for (;;) {
      const int64_t lo = range_lo(r), hi = range_hi(r);
      if (lo >= hi) return;
      const int64_t end = std::min(hi, lo + chunk_);
      if (range.compare_exchange_weak(r, pack_range(end, hi), std::memory_order_acq_rel))
        run_range(lo, end), r = range.load(std::memory_order_acquire);
    }
  }

  // Takes the back half of the block with the most iterations left (at least
  // two: a block's last iteration stays with its own thread) into this
  // thread's block; false when no block has that many left.
  bool steal_into(int64_t index) {
    if (index >= blocks_) return false;  // no block of its own to put the iterations in
    for (;;) {
      int64_t victim = -1, most = 1;
      uint64_t seen = 0;
      for (int64_t b = 0; b < blocks_; ++b) {
        uint64_t r = ranges_[b].value.load(std::memory_order_acquire);
        if (b != index && range_hi(r) - range_lo(r) > most)
          victim = b, most = range_hi(r) - range_lo(r), seen = r;
      }
      if (victim < 0) return false;
      const int64_t lo = range_lo(seen), hi = range_hi(seen), split = hi - most / 2;
      if (!ranges_[victim].value.compare_exchange_strong(seen, pack_range(lo, split),
                                                         std::memory_order_acq_rel))
        continue;  // the owner or another thief moved first
      // Only this thread writes its own empty block (thieves skip blocks with
      // fewer than two iterations left), so a store publishes the new range.
      ranges_[index].value.store(pack_range(split, hi), std::memory_order_release);
      return true;
    }
  }

  static uint64_t pack_range(int64_t lo, int64_t hi) { return uint64_t(lo) << 32 | uint64_t(hi); }
  static int64_t range_lo(uint64_t r) { return int64_t(r >> 32); }
  static int64_t range_hi(uint64_t r) { return int64_t(r & 0xffffffffu); }

  uint32_t wait_for_epoch_after(uint32_t seen) {
    auto changed = [&] { return epoch_.load(std::memory_order_acquire) != seen; };
    while (!spin_until(changed, kSpinMicros)) {
      sleeping_.fetch_add(1, std::memory_order_seq_cst);
      if (epoch_.load(std::memory_order_seq_cst) == seen)
        epoch_.wait(seen, std::memory_order_acquire);
      sleeping_.fetch_sub(1, std::memory_order_relaxed);
    }
    return epoch_.load(std::memory_order_acquire);
  }

  void work(int index) {
    t_inside_launch = true;  // a worker's own launches run serially
    uint32_t seen = 0;
    for (;;) {
      seen = wait_for_epoch_after(seen);
      if (stopping_.load(std::memory_order_relaxed)) return;
      run_block(index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const int threads_;
  const bool stealing_ = !env_flag("KILN_STATIC_BLOCKS");
  std::vector<pthread_t> workers_;
  // The job: written by the caller before publish(), read by workers after
  // they see the new epoch.
  kiln_parallel_body_fn body_ = nullptr;
  void* closure_ = nullptr;
  int64_t extent_ = 0;
  int64_t blocks_ = 0;
  bool balanced_ = false;  // stealing on, and the range fits ranges_'s packing
  int64_t chunk_ = 1;
  // Each block's iterations not yet claimed, [lo, hi) packed as lo << 32 | hi.
  struct alignas(64) Range {
    std::atomic<uint64_t> value{0};
  };
  std::vector<Range> ranges_ = std::vector<Range>(threads_);
  std::atomic<bool> stopping_{false};
  alignas(64) std::atomic<uint32_t> epoch_{0};
  alignas(64) std::atomic<int32_t> pending_{0};
  std::atomic<int32_t> status_{0};
  alignas(64) std::atomic<int32_t> sleeping_{0};
};

// The thread count and the pool for it. `mu` is held by a launch for its
// whole length and by a change of the count.
struct Launcher {
  std::mutex mu;
  std::atomic<int> threads{default_num_threads()};
  std::unique_ptr<Pool> pool;
};

// Never destroyed: workers may still sleep on it while the process exits.
Launcher* g_launcher = nullptr;

Launcher& launcher() {
  static const bool created = [] {
    g_launcher = new Launcher;
    // A forked child has none of the parent's workers, and the parent's lock
    // may be held by a thread that does not exist there: the child starts
    // over (the parent's launcher is abandoned, not destroyed).
    pthread_atfork(nullptr, nullptr, [] { g_launcher = new Launcher; });
    return true;
  }();
  (void)created;
  return *g_launcher;
}

}  // namespace

extern "C" int32_t kiln_parallel_for(int64_t extent, kiln_parallel_body_fn body, void* closure) {
  if (extent <= 0) return 0;
  Launcher& l = launcher();
  int threads = l.threads.load(std::memory_order_relaxed);
  if (threads == 1 || extent == 1 || t_inside_launch) return body(0, extent, closure);
  std::unique_lock<std::mutex> lock(l.mu, std::try_to_lock);
  if (!lock.owns_lock()) return body(0, extent, closure);  // another thread's launch
  threads = l.threads.load(std::memory_order_relaxed);
  if (!l.pool || l.pool->threads() != threads) {
    l.pool.reset();
    if (threads == 1) return body(0, extent, closure);
    try {
      l.pool = std::make_unique<Pool>(threads);
    } catch (const std::exception& e) {
      // Said once; every later launch runs on its caller.
      std::fprintf(stderr, "kiln: %s; running on one thread\n", e.what());
      l.threads.store(1, std::memory_order_relaxed);
      return body(0, extent, closure);
    }
  }
  return l.pool->launch(extent, body, closure);
}

extern "C" void kiln_set_num_threads(int32_t n) {
  Launcher& l = launcher();
  std::lock_guard<std::mutex> lock(l.mu);
  int threads = n > 0 ? n : default_num_threads();
  if (threads == l.threads.load(std::memory_order_relaxed)) return;  // keep the workers
  l.threads.store(threads, std::memory_order_relaxed);
  l.pool.reset();  // the next launch starts workers for the new count
}

extern "C" int32_t kiln_get_num_threads(void) {
  return launcher().threads.load(std::memory_order_relaxed);
}
