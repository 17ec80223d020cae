#include "graph/passes/decompose_reductions.h"

#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

struct Parts {
  const char* before;     // elementwise op on x, or nullptr
  bool square;            // x * x instead
  const char* reduction;  // ReduceSum or ReduceMax
  const char* after;      // elementwise op on the result, or nullptr
};

bool parts_of(const std::string& op, Parts* p) {
  if (op == "ReduceL1")
    *p = {"Abs", false, "ReduceSum", nullptr};
  else if (op == "ReduceL2")
    *p = {nullptr, true, "ReduceSum", "Sqrt"};
  else if (op == "ReduceSumSquare")
    *p = {nullptr, true, "ReduceSum", nullptr};
  else if (op == "ReduceMin")
    *p = {"Neg", false, "ReduceMax", "Neg"};
  else
    return false;
  return true;
}

}  // namespace

int decompose_reductions(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    Parts p{};
    const TensorType* x = n.inputs.empty() ? nullptr : g.type_of(n.inputs[0]);
    const TensorType* y = n.outputs.size() == 1 ? g.type_of(n.outputs[0]) : nullptr;
    if (!(n.domain.empty() || n.domain == "ai.onnx") || !parts_of(n.op_type, &p) || !x || !y ||
        x->dtype != "float32")
      return false;
    auto emit = [&](const std::string& op, std::vector<std::string> inputs, const TensorType& type,
                    const std::string& output) {
      Node k;
      k.op_type = op;
      k.name = n.name + "/" + op + (output.empty() ? "" : "_out");
      k.inputs = std::move(inputs);
      k.outputs = {output.empty() ? unique_value_name(g, n.name + "/" + op) : output};
      if (output.empty()) g.value_info[k.outputs[0]] = type;
      out.push_back(k);
      return k.outputs[0];
    };
    std::string v = n.inputs[0];
    if (p.before) v = emit(p.before, {v}, *x, "");
    if (p.square) v = emit("Mul", {v, v}, *x, "");
    Node r = n;
    r.op_type = p.reduction;
    r.name = n.name + "/" + p.reduction;
    r.inputs[0] = v;
    if (p.after) {
      r.outputs = {unique_value_name(g, n.name + "/" + p.reduction)};
      g.value_info[r.outputs[0]] = *y;
    }
    out.push_back(r);
    if (p.after) emit(p.after, {r.outputs[0]}, *y, n.outputs[0]);
    return true;
  });
}

}  // namespace kiln::graph::passes
