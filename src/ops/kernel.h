// A scheduled operator instance, ready to lower: its schedule, its buffer
// arguments in call order, and a kernel name.
#pragma once

#include <string>
#include <vector>

#include "ir/tensor.h"
#include "schedule/schedule.h"

namespace kiln::ops {

struct Kernel {
  std::string name;
  std::vector<ir::Tensor> args;
  schedule::Schedule sch;
};

}  // namespace kiln::ops
