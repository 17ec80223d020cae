// kiln_workspace_alloc/free: the buffers generated kernels allocate for their
// intermediate stages (a padded input, Winograd's transformed tiles and
// GEMM results), freed before the kernel returns.
//
// Why a cache: a kernel's workspace has the same size on every call, and a
// model calls the same kernels in the same order on every run. Handing each
// request to malloc made glibc map and unmap (or grow and trim) megabytes per
// call, and the kernel then paid a page fault per 4 KiB touched: Winograd's
// 2 x 1.8 MB of tiles cost more in faults than in arithmetic (a ResNet-18 3x3
// layer ran 2.8x slower in the tuner's measurement than warm). So each
// thread keeps the blocks it freed and hands them out again: after the first
// run, run() allocates nothing.
//
// Blocks are per thread (no lock; a kernel frees on the thread that
// allocated), reused for requests of the same size class (powers of two), and
// bounded (kMaxCachedBlocks per thread, kMaxCachedBytes per thread): past the
// bound a freed block goes back to the system.
//
// Where blocks lie: allocate_buffer's placement (runtime/buffer.h), so a
// block of a page or more starts one line into a page and its payload two
// lines in, in a package as in the tuner's measurement.
#include <cstdint>
#include <new>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/c_runtime_api.h"

namespace {

using kiln::runtime::allocate_buffer;
using kiln::runtime::free_buffer;

constexpr size_t kAlignment = 64;
constexpr size_t kMaxCachedBlocks = 32;
constexpr size_t kMaxCachedBytes = size_t(1) << 30;

// A block: one header line holding its capacity, then the 64-byte aligned
// payload the kernel sees.
struct Header {
  size_t capacity;  // payload bytes
};
static_assert(sizeof(Header) <= kAlignment);

// The size class of a request: the next power of two, at least one line, so
// that requests of nearby sizes share blocks.
size_t size_class(int64_t bytes) {
  size_t want = bytes > 0 ? static_cast<size_t>(bytes) : 1;
  size_t c = kAlignment;
  while (c < want) c <<= 1;
  return c;
}

class ThreadCache {
 public:
  ~ThreadCache() {
    for (void* b : blocks_) free_buffer(b);
  }
  // A cached block of exactly this capacity, or nullptr.
  void* take(size_t capacity) {
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (header(blocks_[i])->capacity == capacity) {
        void* b = blocks_[i];
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        bytes_ -= capacity;
        return b;
      }
    return nullptr;
  }
  // Keeps the block, or frees it past the bounds.
  void give(void* block) {
    size_t capacity = header(block)->capacity;
    if (blocks_.size() >= kMaxCachedBlocks || bytes_ + capacity > kMaxCachedBytes) {
      free_buffer(block);
      return;
    }
    blocks_.push_back(block);
    bytes_ += capacity;
  }

  static Header* header(void* block) { return static_cast<Header*>(block); }

 private:
  std::vector<void*> blocks_;  // block starts (the header)
  size_t bytes_ = 0;
};

ThreadCache& cache() {
  thread_local ThreadCache c;
  return c;
}

}  // namespace

extern "C" void* kiln_workspace_alloc(int64_t bytes) {
  size_t capacity = size_class(bytes);
  void* block = cache().take(capacity);
  if (!block) {
    try {
      block = allocate_buffer(kAlignment + capacity);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    ThreadCache::header(block)->capacity = capacity;
  }
  return static_cast<char*>(block) + kAlignment;
}

extern "C" void kiln_workspace_free(void* ptr) {
  if (!ptr) return;
  cache().give(static_cast<char*>(ptr) - kAlignment);
}
