#include "ir/tensor.h"

#include <functional>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "ir/functor.h"

namespace kiln::ir {

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name) {
  auto t = std::make_shared<TensorNode>();
  t->name = std::move(name);
  t->shape = std::move(shape);
  t->dtype = dtype;
  t->is_placeholder = true;
  return t;
}

Tensor compute(std::vector<Expr> shape, const ComputeFn& fn, std::string name) {
  auto t = std::make_shared<TensorNode>();
  t->name = std::move(name);
  t->is_placeholder = false;
  std::vector<Var> vars;
  static const char* kAxisNames[] = {"i", "j", "k", "l", "m", "n"};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string n = d < 6 ? kAxisNames[d] : "ax" + std::to_string(d);
    auto iv = make_iter_var(Range{make_int(0), shape[d]}, n);
    vars.push_back(iv->var);
    t->axis.push_back(iv);
  }
  t->body = fn(vars);
  if (!t->body) throw std::invalid_argument("compute '" + t->name + "': null body");
  t->dtype = t->body.dtype();
  if (auto* r = t->body.as<ReduceNode>()) t->reduce_axis = r->axes;
  t->shape = std::move(shape);
  return t;
}

IterVar reduce_axis(Expr extent, const std::string& name) {
  return make_iter_var(Range{make_int(0), std::move(extent)}, name, IterKind::Reduce);
}
IterVar reduce_axis(Range dom, const std::string& name) {
  return make_iter_var(std::move(dom), name, IterKind::Reduce);
}

static Expr make_reduce(ReduceOp op, Expr source, std::vector<IterVar> axes) {
  Expr id = reduce_identity(op, source.dtype());
  return make_expr<ReduceNode>(op, std::move(source), std::move(axes), std::move(id));
}
Expr sum(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Sum, std::move(source), std::move(axes));
}
Expr reduce_max(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Max, std::move(source), std::move(axes));
}
Expr reduce_min(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Min, std::move(source), std::move(axes));
}
Expr prod(Expr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Prod, std::move(source), std::move(axes));
}

Expr read(const Tensor& t, std::vector<Expr> indices) {
  if (indices.size() != t->shape.size())
    throw std::invalid_argument("tensor '" + t->name + "' has " + std::to_string(t->shape.size()) +
                                " dimensions, read with " + std::to_string(indices.size()));
  for (auto& i : indices) i = cast(DataType::i64(i.dtype().lanes), i);
  return make_expr<TensorReadNode>(t, std::move(indices));
}

std::vector<Tensor> input_tensors(const Tensor& t) {
  std::vector<Tensor> out;
  if (t->is_placeholder) return out;
  std::unordered_set<const TensorNode*> seen;
  post_order_visit(t->body, [&](const Expr& e) {
    if (auto* r = e.as<TensorReadNode>()) {
      if (seen.insert(r->tensor.get()).second) out.push_back(r->tensor);
    }
  });
  return out;
}

std::vector<Tensor> post_order(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  std::unordered_set<const TensorNode*> visited;
  std::function<void(const Tensor&)> dfs = [&](const Tensor& t) {
    if (!visited.insert(t.get()).second) return;
    for (auto& in : input_tensors(t)) dfs(in);
    order.push_back(t);
  };
  for (auto& t : outputs) dfs(t);
  return order;
}

}  // namespace kiln::ir
