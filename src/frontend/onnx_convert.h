// ONNX protobuf -> graph IR conversions used by onnx_import.cc. Private to
// src/frontend. The protobuf types are only forward-declared so that this
// header stays free of ONNX/protobuf includes (ONNX_NAMESPACE is onnx).
#pragma once

#include <string>

#include "graph/graph.h"

namespace onnx {
class TensorProto;
class TypeProto;
class NodeProto;
}  // namespace onnx

namespace kiln::frontend {

// "float32", "int64", ... for a TensorProto::DataType; `what` names the tensor
// in the ImportError thrown for types kiln has no name for (string, complex).
std::string dtype_name(int onnx_elem_type, const std::string& what);

// A constant tensor with its data copied out of raw_data or the typed fields.
// External data is not read yet: an ImportError naming the tensor. So is a
// negative dim, or a shape whose size in bytes overflows int64.
graph::Initializer convert_tensor(const onnx::TensorProto& t, const std::string& what);

// The type of a value when it is a tensor with a known dtype and a fully
// static shape; false otherwise (left for the graph's own inference). A shape
// whose size in bytes overflows int64 is an ImportError naming the value.
bool convert_type(const onnx::TypeProto& t, const std::string& what, graph::TensorType* out);

// A Constant node's value as a tensor named after its output; an ImportError
// naming `what` for an attribute kind kiln does not read.
onnx::TensorProto constant_tensor(const onnx::NodeProto& n, const std::string& what);

// A node with its attributes (graph-valued ones left out); `name` is the (unique) name kiln gives
// it.
graph::Node convert_node(const onnx::NodeProto& n, const std::string& name);

}  // namespace kiln::frontend
