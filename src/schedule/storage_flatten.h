// Maps multi-dimensional tensor accesses onto flat buffers: Realize becomes
// Allocate (the realized region, row-major, its min at offset 0), TensorStore
// becomes Store and TensorRead becomes Load.
#pragma once

#include <map>

#include "ir/stmt.h"
#include "ir/tensor.h"

namespace kiln::schedule {

// `args` binds the kernel's argument tensors (inputs and outputs) to buffers.
ir::Stmt storage_flatten(const ir::Stmt& s,
                         const std::map<const ir::TensorNode*, ir::Buffer>& args);

}  // namespace kiln::schedule
