#include "tuner/config_match.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ops/op_template.h"

namespace kiln::tuner {

namespace {

// Sorted keys, compact: the records database's form; unparsable text as is.
std::string canonical(const std::string& json) {
  try {
    return nlohmann::json::parse(json).dump();
  } catch (const std::exception&) {
    return json;
  }
}

}  // namespace

ConfigMatcher::ConfigMatcher(const std::string& workload_key, const std::string& config_json)
    : canonical_(canonical(config_json)) {
  try {
    ops::Workload w = ops::Workload::parse(workload_key);
    space_ = ops::get_template(w.template_name).space(w);
    index_ = schedule::Config::from_json(*space_, config_json).index();
  } catch (const std::exception&) {
    space_.reset();  // a workload or config of another kiln: compare the texts
  }
}

bool ConfigMatcher::matches(const std::string& config_json) const {
  if (!space_) return canonical(config_json) == canonical_;
  try {
    return schedule::Config::from_json(*space_, config_json).index() == index_;
  } catch (const std::exception&) {
    return false;  // a knob or value today's space lacks: another config
  }
}

}  // namespace kiln::tuner
