#include "schedule/storage_flatten.h"

#include <optional>
#include <stdexcept>

#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

struct Layout {
  Buffer buffer;
  std::vector<Expr> min;
  std::vector<Expr> stride;
};

class Flattener : public IRMutator {
 public:
  explicit Flattener(const std::map<const TensorNode*, Buffer>& args) {
    for (auto& [t, buf] : args) layouts_[t] = row_major(buf, buf->shape, {});
  }

 protected:
  Stmt mutate_realize(const Stmt& s, const RealizeNode* op) override {
    std::vector<Expr> shape, mins;
    Expr size = make_int(1);
    for (auto& r : op->bounds) {
      shape.push_back(r.extent);
      mins.push_back(r.min);
      size = size * r.extent;
    }
    Buffer buf = make_buffer(op->tensor->name, op->tensor->dtype, shape, op->scope);
    const TensorNode* key = op->tensor.get();
    auto saved =
        layouts_.find(key) != layouts_.end() ? std::optional<Layout>(layouts_[key]) : std::nullopt;
    layouts_[key] = row_major(buf, shape, mins);
    Stmt body = mutate(op->body);
    if (saved)
      layouts_[key] = *saved;
    else
      layouts_.erase(key);
    return make_stmt<AllocateNode>(buf, size, body);
  }

  Stmt mutate_tensor_store(const Stmt& s, const TensorStoreNode* op) override {
    const Layout& l = layout(op->tensor);
    std::vector<Expr> idx;
    for (auto& i : op->indices) idx.push_back(mutate(i));
    return make_store(l.buffer, mutate(op->value), flat_index(l, idx));
  }

  Expr mutate_tensor_read(const Expr& e, const TensorReadNode* op) override {
    const Layout& l = layout(op->tensor);
    std::vector<Expr> idx;
    for (auto& i : op->indices) idx.push_back(mutate(i));
    return load(l.buffer, flat_index(l, idx));
  }

  Expr mutate_reduce(const Expr& e, const ReduceNode*) override {
    throw std::logic_error("storage_flatten: a Reduce survived loop-nest construction");
  }

 private:
  static Layout row_major(const Buffer& buf, const std::vector<Expr>& shape,
                          std::vector<Expr> mins) {
    Layout l{buf, std::move(mins), std::vector<Expr>(shape.size())};
    Expr stride = make_int(1);
    for (size_t d = shape.size(); d-- > 0;) {
      l.stride[d] = stride;
      stride = stride * shape[d];
    }
    return l;
  }

  static Expr flat_index(const Layout& l, const std::vector<Expr>& idx) {
    Expr flat;
    for (size_t d = 0; d < idx.size(); ++d) {
      Expr i = l.min.empty() ? idx[d] : idx[d] - l.min[d];
      Expr term = i * l.stride[d];
      flat = flat ? flat + term : term;
    }
    return flat ? flat : make_int(0);
  }

  const Layout& layout(const Tensor& t) const {
    auto it = layouts_.find(t.get());
    if (it == layouts_.end())
      throw std::invalid_argument("tensor '" + t->name +
                                  "' is used but is neither an argument nor computed here");
    return it->second;
  }

  std::map<const TensorNode*, Layout> layouts_;
};

}  // namespace

Stmt storage_flatten(const Stmt& s, const std::map<const TensorNode*, Buffer>& args) {
  Flattener f(args);
  return f.mutate(s);
}

}  // namespace kiln::schedule
