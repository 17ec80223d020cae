// Where kiln places the buffers kernels see (runtime/buffer.h).
#include "runtime/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/ndarray.h"

namespace {

using kiln::runtime::allocate_buffer;
using kiln::runtime::buffer_placement;
using kiln::runtime::Bytes;
using kiln::runtime::free_buffer;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(Buffer, OneLineIntoAPageFromAPageUp) {
  EXPECT_EQ(buffer_placement(0).alignment, 64u);
  EXPECT_EQ(buffer_placement(0).offset, 0u);
  EXPECT_EQ(buffer_placement(4095).alignment, 64u);
  EXPECT_EQ(buffer_placement(4096).alignment, 4096u);
  EXPECT_EQ(buffer_placement(4096).offset, 64u);
  for (size_t bytes : {size_t(0), size_t(1), size_t(64), size_t(4095), size_t(4096), size_t(100000),
                       size_t(16) << 20}) {
    auto at = buffer_placement(bytes);
    void* p = allocate_buffer(bytes);
    EXPECT_EQ(address(p) % at.alignment, at.offset) << bytes << " bytes";
    std::memset(p, 0x5a, bytes);  // the whole request is usable
    free_buffer(p);
  }
  free_buffer(nullptr);  // like free()
}

// NDArray and the tuner's buffers (runtime::Bytes) follow the same rule, so
// that a tuned kernel runs on buffers placed as it was timed on.
TEST(Buffer, TensorsAndTunerBuffersArePlacedAlike) {
  for (int64_t n : {1, 16, 1023, 1024, 1025, 1 << 22}) {
    auto at = buffer_placement(size_t(n) * 4);
    auto a = kiln::runtime::NDArray::empty({n}, kiln::runtime::DType::f32());
    EXPECT_EQ(address(a.data()) % at.alignment, at.offset) << n << " floats";
    Bytes b(size_t(n) * 4, 1);
    EXPECT_EQ(address(b.data()) % at.alignment, at.offset) << n * 4 << " bytes";
    Bytes copy = b;
    EXPECT_EQ(address(copy.data()) % at.alignment, at.offset);
    EXPECT_EQ(copy, b);
  }
}

}  // namespace
