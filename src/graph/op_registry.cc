#include "graph/op_registry.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace kiln::graph {
namespace {

std::map<std::string, OpDef>& table() {
  static std::map<std::string, OpDef> t;
  return t;
}

void ensure_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_ops();
    register_shape_ops();
    register_reduce_ops();
    register_nn_ops();
    register_layout_ops();
    register_template_ops();
    register_quantize_ops();
    register_requantize_ops();
    register_channel_norm_ops();
    register_recurrent_ops();
    register_einsum_ops();
    register_indexing_ops();
    register_ordering_ops();
    register_normalize_ops();
    register_sampling_ops();
    register_unpool_ops();
    register_linalg_ops();
    register_signal_ops();
  });
}

}  // namespace

void register_op(OpDef def) {
  std::string name = def.op_type;
  if (!table().emplace(name, std::move(def)).second)
    throw std::logic_error("operator registered twice: " + name);
}

bool is_constant_input(const OpDef& def, size_t i) {
  return std::find(def.constant_inputs.begin(), def.constant_inputs.end(), static_cast<int>(i)) !=
         def.constant_inputs.end();
}

bool is_type_only_input(const OpDef& def, size_t i) {
  return std::find(def.type_only_inputs.begin(), def.type_only_inputs.end(), static_cast<int>(i)) !=
         def.type_only_inputs.end();
}

const OpDef* find_op(const std::string& op_type) {
  ensure_registered();
  auto it = table().find(op_type);
  return it == table().end() ? nullptr : &it->second;
}

const OpDef& get_op(const std::string& op_type) {
  if (const OpDef* d = find_op(op_type)) return *d;
  throw OpError("kiln has no operator " + op_type);
}

std::vector<std::string> registered_op_types() {
  ensure_registered();
  std::vector<std::string> names;
  for (auto& [k, v] : table()) names.push_back(k);
  return names;
}

}  // namespace kiln::graph
