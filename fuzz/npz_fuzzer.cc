// libFuzzer target: the npz reader (runtime/npz.h), which reads `kiln run
// --inputs` files and every package's weights (mod.params): zip through
// libarchive, then each member's .npy header and data.
#include "fuzz/fuzz_input.h"
#include "runtime/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::expect_clean_error_or_success(
      [&] { kiln::runtime::read_npz_memory(data, size, "fuzz.npz"); });
  return 0;
}
