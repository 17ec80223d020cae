// ONNX import: the first stage of the pipeline (model.onnx -> graph::Graph).
// Only the .cc files of this folder include ONNX/protobuf headers; callers see
// kiln's own graph IR.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::frontend {

// Every failure to import a model, with one message that names the file and
// the offending node, tensor or input (design invariant 5).
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Input name -> full shape, as given by --input-shapes.
using InputShapes = std::map<std::string, std::vector<int64_t>>;

// The ONNX default-domain opsets kiln imports as written; older models are
// converted to kMinOpset first (opset_upgrade.h).
inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 18;

// Reads, checks and converts an ONNX model:
//  1. parse the file (missing, truncated and non-ONNX files are errors),
//  2. bring an opset older than kMinOpset up to it with ONNX's version
//     converter; require a default-domain opset in [kMinOpset, kMaxOpset],
//  3. report every unsupported operator at once (before the ONNX checker,
//     which would stop at the first unknown one),
//  4. run onnx::checker::check_model,
//  5. bind `input_shapes` to the graph inputs: every dynamic axis must end up
//     bound; a key naming no input or a shape of the wrong rank or that
//     contradicts a static axis is an error,
//  6. run ONNX shape inference (strict); while some node output is left
//     untyped, fold small constant subgraphs (shape_folding.h) and infer
//     again; convert to graph::Graph, rewriting operators whose meaning
//     changed since the model's opset into their newest form (legacy_ops.h).
// Constant nodes become initializers (before step 6). Throws ImportError.
graph::Graph import_onnx(const std::string& path, const InputShapes& input_shapes = {});

// Refuses, as import_onnx does first, a model whose default-domain opset kiln cannot import
// (none, or newer than kMaxOpset): ImportError "PATH: opset N is not supported (...)". For
// tools that read a model without importing it first (kiln quantize).
void check_model_opset(const std::string& path);

// Parses the CLI's --input-shapes text, "input:[1,3,224,224],mask:[1,128]".
// A name may itself contain ':' (the last ':' before '[' separates). Empty
// text gives an empty map. Throws ImportError for malformed text.
InputShapes parse_input_shapes(const std::string& text);

}  // namespace kiln::frontend
