// Workloads: what determines one kernel of an operator template.
//
// A workload is the template's name, a fixed-order list of named integer
// lists (shapes and attributes) and a dtype. Its canonical text key is what
// tuning records, build caches and log messages name a kernel by, e.g.
//   conv2d_NCHWc.x86(data=[1,64,56,56],kernel=[64,64,3,3],strides=[1,1],
//                    pads=[1,1,1,1],dilation=[1,1],dtype=float32)
// (one line, no spaces). The order of params is part of the key; each
// template documents the params it expects, in order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::ops {

struct Workload {
  std::string template_name;
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;  // order is part of the key
  std::string dtype = "float32";

  std::string key() const;
  // Parses key()'s format; anything else throws std::invalid_argument quoting the text.
  static Workload parse(const std::string& key);
  // The list named `name`; throws std::invalid_argument naming it and the workload if absent.
  const std::vector<int64_t>& get(const std::string& name) const;
  bool operator==(const Workload&) const = default;
};

}  // namespace kiln::ops
