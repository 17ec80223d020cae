// Which stored configs are the same config, as today's space reads them.
//
// A record stores its config as JSON with the knob values and the config's
// index in its space. The index shifts whenever the space grows (a knob, or
// a value of one, added), so comparing stored texts stops matching every
// record made before: a build then finds no in-graph record of a node's
// untuned config, and a shipped log made on another CPU drops its in-graph
// picks for the fallback (conv2d_NCHWc's oh_reg gaining 7: the Intel log's
// ResNet-18 1x1 downsample among them). Read through the workload's space
// (Config::from_json: the stored index ignored, a knob added later and
// absent at its first value), the two texts compare by what they configure.
#pragma once

#include <optional>
#include <string>

#include "schedule/config_space.h"

namespace kiln::tuner {

class ConfigMatcher {
 public:
  // `config_json`: the config to look for among `workload_key`'s records.
  // A workload or config that today's templates cannot read compares as
  // JSON text (canonical form).
  ConfigMatcher(const std::string& workload_key, const std::string& config_json);
  bool matches(const std::string& config_json) const;

 private:
  std::optional<schedule::ConfigSpace> space_;
  int64_t index_ = -1;
  std::string canonical_;
};

}  // namespace kiln::tuner
