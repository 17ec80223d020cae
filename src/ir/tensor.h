// Tensors defined by placeholders and compute definitions (the "te" level).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln::ir {

// A tensor is its own operation: either a placeholder (an input) or a
// compute definition body(axis...) over `axis`, with `reduce_axis` when the
// body is a Reduce.
struct TensorNode {
  std::string name;
  std::vector<Expr> shape;
  DataType dtype;
  bool is_placeholder = true;
  std::vector<IterVar> axis;         // compute only: one per output dimension
  std::vector<IterVar> reduce_axis;  // compute only: the Reduce's axes
  Expr body;                         // compute only

  size_t ndim() const { return shape.size(); }
};

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name);

using ComputeFn = std::function<Expr(const std::vector<Var>&)>;
Tensor compute(std::vector<Expr> shape, const ComputeFn& fn, std::string name);

// A reduction axis over [0, extent) (or [min, min+extent)).
IterVar reduce_axis(Expr extent, const std::string& name);
IterVar reduce_axis(Range dom, const std::string& name);

Expr sum(Expr source, std::vector<IterVar> axes);
Expr reduce_max(Expr source, std::vector<IterVar> axes);
Expr reduce_min(Expr source, std::vector<IterVar> axes);
Expr prod(Expr source, std::vector<IterVar> axes);

// tensor(i, j, ...) reads an element.
Expr read(const Tensor& t, std::vector<Expr> indices);
template <typename... Idx>
Expr at(const Tensor& t, Idx... idx) {
  return read(t, std::vector<Expr>{Expr(idx)...});
}

// The placeholders and compute tensors `outputs` depend on, inputs first
// (a topological order ending with `outputs`).
std::vector<Tensor> post_order(const std::vector<Tensor>& outputs);
// Tensors read directly by t's body.
std::vector<Tensor> input_tensors(const Tensor& t);

}  // namespace kiln::ir
