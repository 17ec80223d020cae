#include "runtime/buffer.h"

#include <cstdint>
#include <cstdlib>

namespace kiln::runtime {

namespace {

constexpr size_t kLineBytes = 64;
constexpr size_t kPageBytes = 4096;

// The line before every buffer holds what aligned_alloc returned, so that
// free_buffer needs no size and the placement's offset can be a whole line.
void*& system_block(void* p) { return static_cast<void**>(p)[-1]; }

}  // namespace

BufferPlacement buffer_placement(size_t bytes) {
  if (bytes >= kPageBytes) return {kPageBytes, kLineBytes};
  return {kLineBytes, 0};
}

void* allocate_buffer(size_t bytes) {
  BufferPlacement at = buffer_placement(bytes);
  // One line for the header below the buffer; for a line-aligned buffer that
  // line is the block's first, for a page-placed one the page's first.
  size_t before = at.offset > 0 ? at.offset : kLineBytes;
  if (bytes > SIZE_MAX - before - at.alignment) throw std::bad_alloc();
  // aligned_alloc needs a size that is a multiple of the alignment.
  size_t size = (before + bytes + at.alignment - 1) / at.alignment * at.alignment;
  void* block = std::aligned_alloc(at.alignment, size);
  if (!block) throw std::bad_alloc();
  void* p = static_cast<char*>(block) + before;
  system_block(p) = block;
  return p;
}

void free_buffer(void* p) {
  if (p) std::free(system_block(p));
}

}  // namespace kiln::runtime
