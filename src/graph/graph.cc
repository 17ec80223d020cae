#include "graph/graph.h"

#include <sstream>
#include <stdexcept>

namespace kiln::graph {

int64_t TensorType::num_elements() const { return checked_num_elements(shape); }

int64_t checked_num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw std::overflow_error("shape " + shape_str(shape) +
                                " has more elements than int64 holds");
  return n;
}

const Node* Graph::find_node(const std::string& name) const {
  for (const Node& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

const TensorType* Graph::type_of(const std::string& value) const {
  auto it = value_info.find(value);
  return it == value_info.end() ? nullptr : &it->second;
}

int64_t initializer_bytes(const Graph& g) {
  int64_t bytes = 0;
  for (const auto& [name, init] : g.initializers) bytes += static_cast<int64_t>(init.data.size());
  return bytes;
}

size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"uint16", 2},
      {"uint32", 4},  {"uint64", 8},  {"bool", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) throw std::invalid_argument("unknown dtype '" + dtype + "'");
  return it->second;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

namespace detail {
void throw_bad_attr(const std::string& node, const std::string& key) {
  throw std::logic_error("node '" + node + "': attribute '" + key + "' has another type");
}
void throw_bad_cast(const std::string& dtype, const char* wanted) {
  throw std::logic_error("initializer of dtype " + dtype + " read as " + wanted);
}
}  // namespace detail

}  // namespace kiln::graph
