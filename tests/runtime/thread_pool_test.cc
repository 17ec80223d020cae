// The parallel launcher: every iteration runs exactly once, the thread count
// set through the API is honoured, errors from a block propagate, a block
// keeps its thread from launch to launch, a thread that finishes first takes
// over a slow block's iterations (not with KILN_STATIC_BLOCKS=1), and nested launches, launches
// from several threads, launches after the workers slept and launches in a forked child all
// complete.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/c_runtime_api.h"

namespace {

struct Record {
  std::vector<std::atomic<int>> hits;
  std::mutex mu;
  std::set<std::thread::id> threads;
  explicit Record(size_t n) : hits(n) {}
};

int32_t record_body(int64_t begin, int64_t end, void* closure) {
  auto* r = static_cast<Record*>(closure);
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->threads.insert(std::this_thread::get_id());
  }
  for (int64_t i = begin; i < end; ++i) r->hits[i]++;
  // Long enough that a second worker would pick up a block.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return 0;
}

int32_t failing_body(int64_t begin, int64_t end, void*) { return begin == 0 ? 0 : 7; }

class ThreadPool : public ::testing::Test {
 protected:
  void TearDown() override { kiln_set_num_threads(0); }
};

TEST_F(ThreadPool, EveryIterationRunsOnce) {
  for (int threads : {1, 2, 3, 8}) {
    kiln_set_num_threads(threads);
    for (int64_t extent : {1, 2, 7, 100, 1001}) {
      Record r(extent);
      ASSERT_EQ(kiln_parallel_for(extent, record_body, &r), 0);
      for (int64_t i = 0; i < extent; ++i) EXPECT_EQ(r.hits[i].load(), 1) << extent << " " << i;
    }
  }
}

TEST_F(ThreadPool, OneThreadMeansTheCallingThread) {
  kiln_set_num_threads(1);
  EXPECT_EQ(kiln_get_num_threads(), 1);
  Record r(64);
  kiln_parallel_for(64, record_body, &r);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(*r.threads.begin(), std::this_thread::get_id());
}

TEST_F(ThreadPool, SetCountIsReportedAndDefaultRestored) {
  kiln_set_num_threads(3);
  EXPECT_EQ(kiln_get_num_threads(), 3);
  kiln_set_num_threads(0);
  EXPECT_GE(kiln_get_num_threads(), 1);
}

TEST_F(ThreadPool, DefaultComesFromTheEnvironment) {
  ::setenv("KILN_NUM_THREADS", "3", 1);
  kiln_set_num_threads(0);
  EXPECT_EQ(kiln_get_num_threads(), 3);
  ::unsetenv("KILN_NUM_THREADS");
  kiln_set_num_threads(0);
  EXPECT_EQ(kiln_get_num_threads(),
            static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_F(ThreadPool, BlockErrorPropagates) {
  kiln_set_num_threads(2);
  EXPECT_EQ(kiln_parallel_for(10, failing_body, nullptr), 7);
}

// Block b of every launch runs on the same thread (the caller runs block 0):
// a kernel split like its producer reads what its own core wrote.
struct BlockThreads {
  std::mutex mu;
  std::vector<std::thread::id> by_block;
};

int32_t note_block_thread(int64_t begin, int64_t, void* closure) {
  auto* b = static_cast<BlockThreads*>(closure);
  std::lock_guard<std::mutex> lock(b->mu);
  b->by_block[begin] = std::this_thread::get_id();
  return 0;
}

TEST_F(ThreadPool, EachBlockKeepsItsThread) {
  kiln_set_num_threads(3);
  BlockThreads first;
  first.by_block.resize(3);
  ASSERT_EQ(kiln_parallel_for(3, note_block_thread, &first), 0);
  EXPECT_EQ(first.by_block[0], std::this_thread::get_id());
  EXPECT_NE(first.by_block[1], first.by_block[2]);
  for (int launch = 0; launch < 200; ++launch) {
    BlockThreads again;
    again.by_block.resize(3);
    ASSERT_EQ(kiln_parallel_for(3, note_block_thread, &again), 0);
    ASSERT_EQ(again.by_block, first.by_block) << "launch " << launch;
  }
}

// Each iteration notes its thread; on the launching thread each takes 1 ms,
// as on a core that something else slows down.
struct SlowCaller {
  std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> hits;
  std::atomic<int> on_caller{0}, elsewhere{0};
  explicit SlowCaller(size_t n) : hits(n) {}
};

int32_t slow_on_caller(int64_t begin, int64_t end, void* closure) {
  auto* s = static_cast<SlowCaller*>(closure);
  const bool caller = std::this_thread::get_id() == s->caller;
  for (int64_t i = begin; i < end; ++i) {
    s->hits[i]++;
    (caller ? s->on_caller : s->elsewhere)++;
    if (caller) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

TEST_F(ThreadPool, AThreadThatFinishesFirstTakesOverTheSlowBlock) {
  kiln_set_num_threads(2);
  SlowCaller s(64);
  ASSERT_EQ(kiln_parallel_for(64, slow_on_caller, &s), 0);
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(s.hits[i].load(), 1) << i;
  // The worker's own block is 32 iterations; it steals the back half of what
  // the caller has left, again and again, while the caller sleeps.
  EXPECT_GT(s.elsewhere.load(), 40) << "the worker ran only its own block";
  EXPECT_GE(s.on_caller.load(), 1);
}

TEST_F(ThreadPool, StaticBlocksWhenAsked) {
  ASSERT_EQ(setenv("KILN_STATIC_BLOCKS", "1", 1), 0);
  kiln_set_num_threads(3);
  kiln_set_num_threads(2);  // a new pool, which reads the variable
  SlowCaller s(64);
  ASSERT_EQ(kiln_parallel_for(64, slow_on_caller, &s), 0);
  unsetenv("KILN_STATIC_BLOCKS");
  kiln_set_num_threads(3);  // the pool of the next launch steals again
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(s.hits[i].load(), 1) << i;
  EXPECT_EQ(s.on_caller.load(), 32);
  EXPECT_EQ(s.elsewhere.load(), 32);
}

// A block that launches again: the inner loop runs on the block's thread.
struct Nested {
  std::atomic<int64_t> inner_iterations{0};
  std::atomic<int> inner_on_other_thread{0};
};

int32_t inner_body(int64_t begin, int64_t end, void* closure) {
  static_cast<Nested*>(closure)->inner_iterations += end - begin;
  return 0;
}

int32_t outer_body(int64_t begin, int64_t end, void* closure) {
  auto* n = static_cast<Nested*>(closure);
  for (int64_t i = begin; i < end; ++i) {
    std::thread::id me = std::this_thread::get_id();
    struct Probe {
      std::thread::id outer;
      Nested* n;
    } probe{me, n};
    kiln_parallel_for(
        10,
        [](int64_t b, int64_t e, void* c) -> int32_t {
          auto* p = static_cast<Probe*>(c);
          if (std::this_thread::get_id() != p->outer) p->n->inner_on_other_thread++;
          return inner_body(b, e, p->n);
        },
        &probe);
  }
  return 0;
}

TEST_F(ThreadPool, NestedLaunchRunsOnTheBlocksThread) {
  kiln_set_num_threads(2);
  Nested n;
  ASSERT_EQ(kiln_parallel_for(8, outer_body, &n), 0);
  EXPECT_EQ(n.inner_iterations.load(), 80);
  EXPECT_EQ(n.inner_on_other_thread.load(), 0);
}

int32_t sum_body(int64_t begin, int64_t end, void* closure) {
  auto* sum = static_cast<std::atomic<int64_t>*>(closure);
  for (int64_t i = begin; i < end; ++i) *sum += i;
  return 0;
}

// Programs that run models from several threads: every launch completes with
// every iteration once, whether it got the workers or ran on its caller.
TEST_F(ThreadPool, LaunchesFromSeveralThreadsAllComplete) {
  kiln_set_num_threads(2);
  constexpr int kCallers = 4, kLaunches = 500;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&wrong, c] {
      for (int l = 0; l < kLaunches; ++l) {
        int64_t extent = 1 + (c * 7 + l) % 97;
        std::atomic<int64_t> sum{0};
        if (kiln_parallel_for(extent, sum_body, &sum) != 0 ||
            sum.load() != extent * (extent - 1) / 2)
          wrong++;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Idle workers sleep after a while; a launch wakes them.
TEST_F(ThreadPool, LaunchAfterTheWorkersSleptCompletes) {
  kiln_set_num_threads(4);
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Record r(4);
    ASSERT_EQ(kiln_parallel_for(4, record_body, &r), 0);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.hits[i].load(), 1);
    EXPECT_EQ(r.threads.size(), 4u) << "round " << round;
  }
}

// The parent's workers do not exist in a forked child: its launches start
// workers of its own and complete (an alarm ends a child that hangs).
TEST_F(ThreadPool, ForkedChildLaunchesComplete) {
  kiln_set_num_threads(2);
  std::atomic<int64_t> sum{0};
  ASSERT_EQ(kiln_parallel_for(100, sum_body, &sum), 0);  // the parent's workers exist
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);
    std::atomic<int64_t> s{0};
    int32_t rc = kiln_parallel_for(1000, sum_body, &s);
    _exit(rc == 0 && s.load() == 999 * 1000 / 2 && kiln_get_num_threads() == 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed (signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// On a line; from a page up (the size class: the next power of two) two lines
// into a page, behind allocate_buffer's header line and the workspace's own
// (runtime/buffer.h). The whole request is usable.
TEST_F(ThreadPool, WorkspaceIsAligned) {
  for (int64_t bytes : {1, 63, 64, 1000, 2048, 3000, 4096, 5000, 1 << 20}) {
    void* p = kiln_workspace_alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    if (bytes > 2048) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 128u) << bytes << " bytes";
    }
    std::memset(p, 7, static_cast<size_t>(bytes));
    kiln_workspace_free(p);
  }
}

// A kernel's workspace has the same size on every call: the block it freed
// comes back (no system allocation, no page faults after the first run);
// blocks in use are never handed out twice; a size class holds nearby sizes.
TEST_F(ThreadPool, WorkspaceBlocksAreReusedOnTheSameThread) {
  void* a = kiln_workspace_alloc(1800000);
  void* b = kiln_workspace_alloc(1800000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  std::memset(a, 1, 1800000);  // the whole request is usable
  std::memset(b, 2, 1800000);
  kiln_workspace_free(a);
  void* c = kiln_workspace_alloc(1700000);  // same power-of-two class (2 MiB)
  EXPECT_EQ(c, a);
  void* d = kiln_workspace_alloc(1800000);  // a is taken again, b is in use: a new block
  EXPECT_NE(d, a);
  EXPECT_NE(d, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 64, 0u);
  kiln_workspace_free(b);
  kiln_workspace_free(c);
  kiln_workspace_free(d);
  // Another thread has its own blocks.
  void* other = nullptr;
  std::thread([&] {
    other = kiln_workspace_alloc(1800000);
    kiln_workspace_free(other);
  }).join();
  void* e = kiln_workspace_alloc(1800000);
  EXPECT_TRUE(e == a || e == b || e == d);
  kiln_workspace_free(e);
  kiln_workspace_free(nullptr);  // like free()
}

}  // namespace
