// kiln's graph IR for a whole model: what the frontend produces and the graph
// passes (shape inference, folding, layout, fusion, memory planning) consume.
// Plain data with value semantics; no ONNX or LLVM types leak in here, so any
// folder above `graph` can include it without pulling in protobuf.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace kiln::graph {

// dtype is a lowercase name ("float32", "int64", "bool", ...) so that error
// messages and mod.json can use it as is. A shape entry is >= 0: dynamic axes
// are bound (or rejected) before a Graph is built.
struct TensorType {
  std::string dtype;
  std::vector<int64_t> shape;

  // Throws std::overflow_error where the product of the shape overflows int64
  // (only a malformed model's shape can: the importer turns it into its error).
  int64_t num_elements() const;
  bool operator==(const TensorType&) const = default;
};

struct ValueInfo {
  std::string name;
  TensorType type;
};

// A constant tensor (weights). `data` holds the elements in row-major order,
// little-endian, exactly num_elements() * dtype_size(type.dtype) bytes.
struct Initializer {
  TensorType type;
  std::vector<uint8_t> data;

  // Typed copy of the data; throws std::logic_error if T does not match dtype.
  template <typename T>
  std::vector<T> as() const;
};

// A node attribute: ONNX's INT, FLOAT, STRING, INTS, FLOATS, TENSOR and
// STRINGS kinds (ConstantOfShape's `value` is a TENSOR, LSTM's `activations`
// STRINGS). Graph-valued attributes (If's branches, Loop's and Scan's
// bodies) are Node::subgraphs instead.
using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, Initializer, std::vector<std::string>>;

struct Subgraph;

struct Node {
  std::string op_type;
  std::string domain;               // "" for the default ONNX operator set
  std::string name;                 // unique in the graph (the frontend names nameless nodes)
  std::vector<std::string> inputs;  // "" marks an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  // Graph-valued attributes, by name: only nodes of the host region have them.
  std::map<std::string, std::shared_ptr<const Subgraph>> subgraphs;

  // Typed attribute access; nullopt when absent, std::logic_error when the
  // attribute has another type (a malformed model, not a missing default).
  template <typename T>
  std::optional<T> attr(const std::string& key) const;
};

// The part of a model that runs on tensors whose shapes are known only at run
// time: NonZero, Unique, Compress, NonMaxSuppression, TopK with a run-time k,
// Reshape/Expand/Tile/Slice/... fed by run-time values, and every node that
// reads what they produce (frontend/host_region.h). The graph passes never
// see these nodes; the executor runs them after the kernels, on buffers sized
// per run (runtime/host_op.h). Empty for a model whose shapes are all static.
// A graph-valued attribute of a host node (If's then_branch, Loop's body):
// its formal inputs and outputs and its nodes in execution order. Its values'
// types and constants live in the enclosing HostRegion (ONNX names are unique
// across a graph and its subgraphs); a node may read any value of the
// enclosing scopes.
struct Subgraph {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Node> nodes;
};

struct HostRegion {
  std::vector<Node> nodes;  // in execution order
  // Every value the nodes (and their subgraphs) produce, with its type: a
  // dtype name for a tensor, "sequence<float32>" for a sequence of tensors,
  // "optional<float32>" or "optional<sequence<float32>>" for an optional.
  std::map<std::string, std::string> dtypes;
  std::map<std::string, Initializer> constants;  // initializers the nodes read
  // Graph inputs that only the host region holds (sequences, optionals), in
  // the model's order; their types are in `dtypes`.
  std::vector<std::string> inputs;
  // The model's outputs in order: values of the nodes above, or of the graph
  // (whose `outputs` then also lists what the nodes read from it).
  std::vector<std::string> outputs;
  bool empty() const { return nodes.empty(); }
  bool produces(const std::string& value) const { return dtypes.count(value) != 0; }
};

struct Graph {
  std::vector<ValueInfo> inputs;  // runtime inputs only, never initializers
  std::vector<std::string> outputs;
  std::map<std::string, Initializer> initializers;
  std::vector<Node> nodes;  // topologically sorted
  // Inferred type of every value whose type is known: inputs, initializers,
  // node outputs and graph outputs.
  std::map<std::string, TensorType> value_info;
  HostRegion host;

  const Node* find_node(const std::string& name) const;
  // The type of a value, or nullptr when it is unknown.
  const TensorType* type_of(const std::string& value) const;
};

// Bytes per element of a dtype name; throws std::invalid_argument for an
// unknown name.
size_t dtype_size(const std::string& dtype);

// The bytes of all the graph's initializers (its weights, as stored).
int64_t initializer_bytes(const Graph& g);

// "[1, 3, 224, 224]" for messages.
std::string shape_str(const std::vector<int64_t>& shape);

// The product of the dims; throws std::overflow_error when it overflows int64.
int64_t checked_num_elements(const std::vector<int64_t>& shape);

// ---- template definitions ---------------------------------------------------

namespace detail {
// The dtype name that matches a C++ element type.
template <typename T>
constexpr const char* dtype_name_of() {
  if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, int8_t>)
    return "int8";
  else if constexpr (std::is_same_v<T, uint8_t>)
    return "uint8";
  else
    static_assert(sizeof(T) == 0, "no kiln dtype for this element type");
}
[[noreturn]] void throw_bad_attr(const std::string& node, const std::string& key);
[[noreturn]] void throw_bad_cast(const std::string& dtype, const char* wanted);
}  // namespace detail

template <typename T>
std::vector<T> Initializer::as() const {
  const char* wanted = detail::dtype_name_of<T>();
  if (type.dtype != wanted) detail::throw_bad_cast(type.dtype, wanted);
  std::vector<T> out(data.size() / sizeof(T));
  if (!data.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::optional<T> Node::attr(const std::string& key) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return std::nullopt;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  detail::throw_bad_attr(name, key);
}

}  // namespace kiln::graph
