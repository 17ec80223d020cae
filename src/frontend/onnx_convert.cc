#include "frontend/onnx_convert.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "frontend/onnx_import.h"

namespace kiln::frontend {

std::string dtype_name(int t, const std::string& what) {
  using TP = onnx::TensorProto;
  switch (t) {
    case TP::FLOAT: return "float32";
    case TP::DOUBLE: return "float64";
    case TP::FLOAT16: return "float16";
    case TP::BFLOAT16: return "bfloat16";
    case TP::INT8: return "int8";
    case TP::INT16: return "int16";
    case TP::INT32: return "int32";
    case TP::INT64: return "int64";
    case TP::UINT8: return "uint8";
    case TP::UINT16: return "uint16";
    case TP::UINT32: return "uint32";
    case TP::UINT64: return "uint64";
    case TP::BOOL: return "bool";
  }
  const std::string name = TP::DataType_IsValid(t) ? TP::DataType_Name(t) : std::to_string(t);
  throw ImportError(what + ": element type " + name + " is not supported");
}

namespace {

// Copies typed repeated fields element by element, narrowing to the dtype's
// width: ONNX stores int8/16, uint8/16, bool, float16 and bfloat16 in
// int32_data, uint32 in uint64_data (little-endian host assumed).
template <typename Repeated>
void copy_narrowed(const Repeated& src, size_t elem, std::vector<uint8_t>* out) {
  out->resize(src.size() * elem);
  for (int i = 0; i < src.size(); ++i) {
    auto v = src.Get(i);
    std::memcpy(out->data() + i * elem, &v, elem);
  }
}

void copy_typed_data(const onnx::TensorProto& t, size_t elem, std::vector<uint8_t>* out) {
  using TP = onnx::TensorProto;
  switch (t.data_type()) {
    case TP::FLOAT: copy_narrowed(t.float_data(), elem, out); break;
    case TP::DOUBLE: copy_narrowed(t.double_data(), elem, out); break;
    case TP::INT64: copy_narrowed(t.int64_data(), elem, out); break;
    case TP::UINT32:
    case TP::UINT64: copy_narrowed(t.uint64_data(), elem, out); break;
    default: copy_narrowed(t.int32_data(), elem, out); break;
  }
}

}  // namespace

static void check_byte_size(const graph::TensorType& type, const std::string& what) {
  const std::string too_large = what + ": shape " + graph::shape_str(type.shape) + " of " +
                                type.dtype + " is too large (its size overflows int64)";
  int64_t n = 0;
  try {
    n = type.num_elements();
  } catch (const std::overflow_error&) {
    throw ImportError(too_large);
  }
  const auto elem = static_cast<int64_t>(graph::dtype_size(type.dtype));
  if (n > INT64_MAX / elem || -n > INT64_MAX / elem) throw ImportError(too_large);
}

graph::Initializer convert_tensor(const onnx::TensorProto& t, const std::string& what) {
  graph::Initializer init;
  init.type.dtype = dtype_name(t.data_type(), what);
  init.type.shape.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : init.type.shape)
    if (d < 0)
      throw ImportError(what + ": shape " + graph::shape_str(init.type.shape) +
                        " has a negative dim");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw ImportError(what + ": external tensor data is not supported yet");
  const size_t elem = graph::dtype_size(init.type.dtype);
  if (t.has_raw_data()) {
    init.data.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    copy_typed_data(t, elem, &init.data);
  }
  check_byte_size(init.type, what);
  const size_t want = static_cast<size_t>(init.type.num_elements()) * elem;
  if (init.data.size() != want)
    throw ImportError(what + ": holds " + std::to_string(init.data.size()) + " bytes, shape " +
                      graph::shape_str(init.type.shape) + " of " + init.type.dtype + " needs " +
                      std::to_string(want));
  return init;
}

bool convert_type(const onnx::TypeProto& t, const std::string& what, graph::TensorType* out) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return false;
  const auto& tt = t.tensor_type();
  if (tt.elem_type() == onnx::TensorProto::UNDEFINED) return false;
  graph::TensorType type;
  type.dtype = dtype_name(tt.elem_type(), what);
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value()) return false;
    type.shape.push_back(d.dim_value());
  }
  check_byte_size(type, what);
  *out = std::move(type);
  return true;
}

namespace {

graph::Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& what) {
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::INT: return a.i();
    case AP::FLOAT: return a.f();
    case AP::STRING: return a.s();
    case AP::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case AP::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case AP::TENSOR: return convert_tensor(a.t(), what);
    case AP::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default:
      throw ImportError(what + ": attribute kind " + AP::AttributeType_Name(a.type()) +
                        " is not supported");
  }
}

}  // namespace

// A Constant node's value as a tensor named after its output.
onnx::TensorProto constant_tensor(const onnx::NodeProto& n, const std::string& what) {
  using TP = onnx::TensorProto;
  onnx::TensorProto t;
  for (const auto& a : n.attribute()) {
    if (a.name() == "value") {
      t = a.t();
    } else if (a.name() == "value_float" || a.name() == "value_floats") {
      t.set_data_type(TP::FLOAT);
      if (a.name() == "value_floats") t.add_dims(a.floats_size());
      if (a.name() == "value_float") t.add_float_data(a.f());
      for (float f : a.floats()) t.add_float_data(f);
    } else if (a.name() == "value_int" || a.name() == "value_ints") {
      t.set_data_type(TP::INT64);
      if (a.name() == "value_ints") t.add_dims(a.ints_size());
      if (a.name() == "value_int") t.add_int64_data(a.i());
      for (int64_t i : a.ints()) t.add_int64_data(i);
    } else {
      throw ImportError(what + ": attribute '" + a.name() + "' is not supported");
    }
  }
  t.set_name(n.output(0));
  return t;
}

graph::Node convert_node(const onnx::NodeProto& n, const std::string& name) {
  graph::Node node;
  node.op_type = n.op_type();
  node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
  node.name = name;
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  for (const auto& a : n.attribute()) {
    // Graph-valued attributes are the host region's (host_subgraphs.h).
    if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
      continue;
    // Optional's `type`: inference has typed the output from it.
    if (a.type() == onnx::AttributeProto::TYPE_PROTO) continue;
    const std::string what =
        "node '" + name + "' (" + n.op_type() + ") attribute '" + a.name() + "'";
    node.attrs[a.name()] = convert_attribute(a, what);
  }
  return node;
}

}  // namespace kiln::frontend
