// The parallel launcher: every iteration runs exactly once, the thread count
// set through the API is honoured, and errors from a block propagate.
#include <gtest/gtest.h>

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

// On a line; from a page up (the size class: the next power of two) two lines
// into a page, behind allocate_buffer's header line and the workspace's own
// (runtime/buffer.h). The whole request is usable.
TEST_F(ThreadPool, WorkspaceIsAligned) {
  for (int64_t bytes : {1, 63, 64, 1000, 2048, 3000, 4096, 5000, 1 << 20}) {
    void* p = kiln_workspace_alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    if (bytes > 2048) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 128u) << bytes << " bytes";
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
