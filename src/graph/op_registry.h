// The operator registry: everything kiln knows about one ONNX operator type,
// found by name. "Operators are data" (docs/design.md): the constant folder, the
// fuser, the kernel builder and the tests all discover operators here, never
// through special cases of their own.
//
// Each operator family registers itself from one file under src/graph/ops/
// (elementwise.cc, shape_ops.cc, reduce.cc, nn.cc, normalize.cc, ...) through an explicit
// register_*_ops() call listed in op_registry.cc (static initializers would be
// dropped by the linker from a static library).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ir/tensor.h"

namespace kiln::graph {

// How an operator fuses with its neighbours (TVM's OpPatternKind).
enum class OpPattern {
  kElemWise,   // out[i] = f(in0[i], in1[i], ...) with equal shapes
  kBroadcast,  // elementwise with numpy broadcasting
  kInjective,  // each output element reads a computable input element (reshape, slice, ...)
  kReduction,  // reduces or normalizes along axes (ReduceMean, Softmax, pooling, LayerNorm)
  kAnchor,     // a tunable template (Conv, Gemm, MatMul): injective epilogues fuse into it
  kOpaque,     // runs alone
};

// An operator that the graph does not support with the given attributes or
// input types (reported with the node's name by the caller).
class OpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A node's inputs for compute(): one TE tensor per node input (nullptr for an
// omitted optional input, and for inputs listed in constant_inputs), and the
// value of every input that is a graph constant (nullptr otherwise).
struct ComputeInputs {
  std::vector<ir::Tensor> tensors;
  std::vector<const Initializer*> constants;
};

// out_types: the inferred type of each node output (from shape inference).
// Returns one TE tensor per node output, each with exactly that shape and dtype.
// Throws OpError for attributes the compute does not support.
using ComputeFn = std::function<std::vector<ir::Tensor>(const Node& node, const ComputeInputs& in,
                                                        const std::vector<TensorType>& out_types)>;

// Host evaluation with ONNX semantics (the reference implementation, and the
// constant folder's engine). inputs: nullptr for an omitted optional input.
// Returns one tensor per node output. Throws OpError for unsupported cases.
using EvaluateFn = std::function<std::vector<Initializer>(
    const Node& node, const std::vector<const Initializer*>& inputs)>;

struct OpDef {
  std::string op_type;
  OpPattern pattern = OpPattern::kOpaque;
  EvaluateFn evaluate;
  // Empty for operators that only ever see constant inputs after folding
  // (Shape, ConstantOfShape, Range over constants) or that the graph passes
  // always rewrite away.
  ComputeFn compute;
  // Input positions that must be graph constants at build time (Reshape's
  // shape, Slice's starts/ends/axes/steps, Pad's pads, Resize's scales/sizes,
  // Clip's min/max, ...). They are read from ComputeInputs::constants and
  // never become kernel arguments.
  std::vector<int> constant_inputs;
  // Input positions whose values the operator never reads, only their types
  // (Shape's, Size's and EyeLike's input): the constant folders evaluate the
  // node from the type alone (an Initializer without data), and such an
  // input never becomes a kernel argument (compute gets a tensor of its type
  // that it must not read).
  std::vector<int> type_only_inputs = {};
  // Whether compute() also takes a constant_inputs position fed at run time
  // (as a tensor in ComputeInputs::tensors, its constant nullptr). Where
  // false, such a node is an error naming it at build time.
  bool constant_inputs_may_vary = false;
};

// Whether input i of def is in constant_inputs / type_only_inputs.
bool is_constant_input(const OpDef& def, size_t i);
bool is_type_only_input(const OpDef& def, size_t i);

// nullptr when kiln has no such operator.
const OpDef* find_op(const std::string& op_type);
// Throws OpError naming the operator type when it is unknown.
const OpDef& get_op(const std::string& op_type);
// Every registered operator type, sorted.
std::vector<std::string> registered_op_types();

// Called once by the registry to fill itself; each lives in src/graph/ops/<family>.cc.
void register_op(OpDef def);
void register_elementwise_ops();
void register_shape_ops();
void register_reduce_ops();
void register_nn_ops();
void register_layout_ops();
void register_template_ops();
void register_quantize_ops();
void register_requantize_ops();
void register_channel_norm_ops();
void register_recurrent_ops();
void register_einsum_ops();
void register_indexing_ops();
void register_ordering_ops();
void register_normalize_ops();
void register_sampling_ops();
void register_unpool_ops();
void register_linalg_ops();
void register_signal_ops();

}  // namespace kiln::graph
