// What the quantizer (src/quantize) needs to know of an ONNX file, without
// ONNX types: its inputs, nodes and float initializers (model_summary), and
// the same model with more graph outputs (write_model_with_outputs), so that
// a build of it exposes the activations calibration observes.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln::frontend {

struct OnnxNodeSummary {
  std::string name;     // the ONNX node name, possibly empty
  std::string label;    // name, or "OpType#INDEX" for an unnamed node (messages, --keep-float)
  std::string op_type;  // default-domain op type ("" domain or ai.onnx); others keep "domain:"
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional input
  std::map<std::string, int64_t> int_attrs;
  std::map<std::string, float> float_attrs;
};

struct FloatInitializer {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct OnnxInputSummary {
  std::string name;
  std::string dtype;           // graph dtype name: "float32", "int64", ...
  std::vector<int64_t> shape;  // -1 for a dynamic axis
};

struct OnnxModelSummary {
  std::string path;    // the file read
  std::string source;  // the file messages name (the user's model); empty: path
  const std::string& name() const { return source.empty() ? path : source; }
  int64_t opset = 0;                     // the default domain's
  std::vector<OnnxInputSummary> inputs;  // graph inputs that are not initializers
  std::vector<std::string> outputs;
  std::vector<OnnxNodeSummary> nodes;  // graph order
  std::set<std::string> initializers;  // every initializer's name
  // The float32 initializers (raw_data or float_data), by name. External data
  // is not read (such a tensor is missing here and its node stays float).
  std::map<std::string, FloatInitializer> float_initializers;
};

// Reads `path` (an unreadable or non-ONNX file throws ImportError naming it).
OnnxModelSummary model_summary(const std::string& path);

// Writes the model at `path` with `tensors` appended to its graph outputs
// (float32, shapes left to the importer's inference; ones already outputs are
// skipped) to `out_path`. Tensors must be float32 values of the graph.
void write_model_with_outputs(const std::string& path, const std::vector<std::string>& tensors,
                              const std::string& out_path);

}  // namespace kiln::frontend
