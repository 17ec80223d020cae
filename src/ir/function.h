// A lowered kernel: what code generation consumes.
#pragma once

#include <string>
#include <vector>

#include "ir/stmt.h"

namespace kiln::ir {

// `int32_t name(void** args)`: args[i] is the data pointer of buffers[i].
// The body is flat loop IR (no TensorStore/Realize/TensorRead/Reduce left).
struct LoweredFunc {
  std::string name;
  std::vector<Buffer> args;
  Stmt body;
};

}  // namespace kiln::ir
