// Where kiln places the memory that kernels read and write: the graph
// executor's storages and parameters (NDArray), kernels' workspaces
// (kiln_workspace_alloc) and the tuner's measurement buffers. One rule for
// all, so that the tuner times a kernel on buffers placed as a package places
// them.
//
// Why it matters: a kernel's speed can depend on where its buffers start
// within a 4 KiB page (cache sets, 4K aliasing between loads and stores). A
// Winograd config (512 channels, 7x7, F(2x2) p_tile 4, AVX2 code, one thread
// on a Zen 4) ran 1.2-1.3x slower with its buffers one line into a page than
// at a page's start or 16 bytes in. The tuner's worker had them 16 bytes in
// (std::vector), timed that config as fast as the fallback, and the package,
// whose large buffers glibc had put one line in, ran it 1.3x slower. Before
// this rule the placement was glibc's accident: blocks it maps start one line
// into a page, smaller ones wherever the heap has room, and which is which
// moves with the process's history (glibc raises its mapping threshold as
// blocks are freed).
//
// The rule: a buffer of a page or more starts one line (64 bytes) into a page,
// a smaller one on a line. One line in, because that is where every package
// measured in bench/ so far had its large buffers, and nothing measured asks to
// move them: ResNet-50's kernels (AVX-512, Zen 4) ran within 8 % of each other
// at +0, +64, +128 and +2048 bytes, their sum within 0.3 %
// (bench/runtime/results/buffer-placement-2026-11-29-zen4.md). What the rule
// buys is that the tuner sees what the package runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace kiln::runtime {

// Where a buffer of `bytes` starts: at `offset` bytes past a multiple of `alignment`.
struct BufferPlacement {
  size_t alignment;
  size_t offset;
};
BufferPlacement buffer_placement(size_t bytes);

// At least `bytes` (0 allowed), placed by buffer_placement(bytes); throws
// std::bad_alloc. Free with free_buffer (nullptr is ignored).
void* allocate_buffer(size_t bytes);
void free_buffer(void* p);

// A std allocator over allocate_buffer, for vectors that kernels read or write.
template <typename T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() = default;
  template <typename U>
  BufferAllocator(const BufferAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(allocate_buffer(n * sizeof(T)));
  }
  void deallocate(T* p, size_t) { free_buffer(p); }
  template <typename U>
  bool operator==(const BufferAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const BufferAllocator<U>&) const {
    return false;
  }
};

// Bytes placed as a package places them.
using Bytes = std::vector<uint8_t, BufferAllocator<uint8_t>>;

}  // namespace kiln::runtime
