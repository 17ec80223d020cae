// Reading and writing whole ONNX files for the quantizer's frontend files
// (model_outputs.cc, qdq_writer.cc). Private to src/frontend: the protobuf
// types are only forward-declared here.
#pragma once

#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::frontend {

// Parses `path`; ImportError "PATH: why" for a missing, empty or non-ONNX file.
onnx::ModelProto read_onnx_proto(const std::string& path);
// The default domain's opset, 0 when the model imports none.
int64_t onnx_default_opset(const onnx::ModelProto& model);
// Serializes `model` to `out_path` through write_file_atomically.
void write_onnx_proto_atomically(const onnx::ModelProto& model, const std::string& out_path);
// `bytes` to OUT.tmpPID, then renamed to `out_path`: no half-written file on
// any error (the temporary is removed), an existing file untouched.
void write_file_atomically(const std::string& bytes, const std::string& out_path);

}  // namespace kiln::frontend
