// libFuzzer target: the ONNX import path (frontend::import_onnx: protobuf
// parsing, opset and operator checks, the ONNX checker, input binding, shape
// inference with constant folding, conversion to kiln's graph). Bad models
// must be an ImportError, never a crash.
#include <cstdio>
#include <cstdlib>

#include "frontend/onnx_import.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_file("model.onnx", data, size);
  try {
    kiln::frontend::import_onnx(path);
  } catch (const kiln::frontend::ImportError& e) {
    // The documented error: the CLI prints it and exits 1.
  } catch (const std::exception& e) {
    // Not an ImportError: an internal failure escaped the importer's checks.
    std::fprintf(stderr, "fuzz: import_onnx threw a non-ImportError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
