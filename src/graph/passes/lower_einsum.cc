#include "graph/passes/lower_einsum.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/ops/einsum.h"
#include "graph/ops/op_util.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

using Ints = std::vector<int64_t>;

// An operand on its way through the rewrite: its value and one letter per axis.
struct Operand {
  std::string value;
  std::string letters;
};

class EinsumRewriter {
 public:
  EinsumRewriter(Graph& g, const Node& n, std::vector<Node>& out)
      : g_(g), n_(n), out_(out), dtype_(g.type_of(n.inputs[0])->dtype) {}

  void run() {
    std::vector<Ints> shapes;
    for (const std::string& in : n_.inputs) shapes.push_back(g_.type_of(in)->shape);
    spec_ = op_util::parse_einsum(n_, shapes);
    std::vector<Operand> ops;
    for (size_t k = 0; k < n_.inputs.size(); ++k) ops.push_back({n_.inputs[k], spec_.inputs[k]});
    for (size_t k = 0; k < ops.size(); ++k) ops[k] = prepare(ops[k], needed_besides(ops, k));
    Operand acc = ops[0];
    for (size_t k = 1; k < ops.size(); ++k) {
      std::vector<Operand> rest(ops.begin() + static_cast<long>(k) + 1, ops.end());
      acc = contract(acc, ops[k], needed_after(rest));
    }
    acc = sum_out(acc, std::set<char>(spec_.output.begin(), spec_.output.end()));
    finish(acc);
  }

 private:
  // The letters operand k must keep: the output's and every other operand's.
  std::set<char> needed_besides(const std::vector<Operand>& ops, size_t k) const {
    std::set<char> keep(spec_.output.begin(), spec_.output.end());
    for (size_t j = 0; j < ops.size(); ++j)
      if (j != k) keep.insert(ops[j].letters.begin(), ops[j].letters.end());
    return keep;
  }

  std::set<char> needed_after(const std::vector<Operand>& rest) const {
    std::set<char> keep(spec_.output.begin(), spec_.output.end());
    for (const Operand& o : rest) keep.insert(o.letters.begin(), o.letters.end());
    return keep;
  }

  Ints shape_of(const std::string& value) const { return g_.type_of(value)->shape; }

  std::string fresh(const std::string& what, const Ints& shape) {
    std::string v = unique_value_name(g_, n_.name + "/" + what);
    g_.value_info[v] = {dtype_, shape};
    return v;
  }

  std::string constant(const std::string& what, const Initializer& t) {
    std::string v = unique_value_name(g_, n_.name + "/" + what);
    set_initializer(g_, v, t);
    return v;
  }

  void emit(const std::string& op, const std::string& what, std::vector<std::string> inputs,
            const std::string& output, std::map<std::string, Attribute> attrs = {}) {
    Node m{op, "", unique_node_name(what), std::move(inputs), {output}, std::move(attrs)};
    out_.push_back(std::move(m));
    ++emitted_;
  }

  std::string unique_node_name(const std::string& what) {
    return n_.name + "/" + what + "_" + std::to_string(count_++);
  }

  Operand transpose(const Operand& a, const std::string& order) {
    if (order == a.letters) return a;
    Ints perm, shape;
    const Ints in = shape_of(a.value);
    for (char c : order) {
      perm.push_back(static_cast<int64_t>(a.letters.find(c)));
      shape.push_back(in[static_cast<size_t>(perm.back())]);
    }
    std::string v = fresh("transposed", shape);
    emit("Transpose", "transpose", {a.value}, v, {{"perm", perm}});
    return {v, order};
  }

  std::string reshape(const std::string& value, const Ints& shape) {
    if (shape_of(value) == shape) return value;
    std::string v = fresh("reshaped", shape);
    emit("Reshape", "reshape", {value, constant("shape", int64_tensor(shape))}, v);
    return v;
  }

  // A letter repeated in one operand: keep the diagonal (Transpose the two
  // axes last, merge them, Gather every (n+1)-th element).
  Operand take_diagonal(Operand a, char c) {
    const size_t p = a.letters.find(c), q = a.letters.find(c, p + 1);
    std::string order;
    for (size_t d = 0; d < a.letters.size(); ++d)
      if (d != p && d != q) order += a.letters[d];
    Ints perm;
    for (char l : order) perm.push_back(static_cast<int64_t>(a.letters.find(l)));
    perm.push_back(static_cast<int64_t>(p));
    perm.push_back(static_cast<int64_t>(q));
    const Ints in = shape_of(a.value);
    const int64_t n = in[p];
    if (in[q] != n)
      op_util::fail(n_, "the diagonal of letter '" + std::string(1, c) + "' is not square");
    Ints moved, merged;
    for (int64_t d : perm) moved.push_back(in[static_cast<size_t>(d)]);
    merged.assign(moved.begin(), moved.end() - 2);
    merged.push_back(n * n);
    std::string t = fresh("diag_moved", moved);
    emit("Transpose", "transpose", {a.value}, t, {{"perm", perm}});
    std::string flat = reshape(t, merged);
    Ints idx(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) idx[static_cast<size_t>(k)] = k * (n + 1);
    Ints diag = merged;
    diag.back() = n;
    std::string v = fresh("diagonal", diag);
    emit("Gather", "diagonal", {flat, constant("diagonal_index", int64_tensor(idx))}, v,
         {{"axis", int64_t{-1}}});
    return {v, order + c};
  }

  // Sums the axes whose letters are not in `keep`.
  Operand sum_out(const Operand& a, const std::set<char>& keep) {
    Ints axes, shape;
    std::string kept;
    const Ints in = shape_of(a.value);
    for (size_t d = 0; d < a.letters.size(); ++d) {
      if (keep.count(a.letters[d])) {
        kept += a.letters[d];
        shape.push_back(in[d]);
      } else {
        axes.push_back(static_cast<int64_t>(d));
      }
    }
    if (axes.empty()) return a;
    std::string v = fresh("summed", shape);
    emit("ReduceSum", "sum", {a.value}, v, {{"axes", axes}, {"keepdims", int64_t{0}}});
    return {v, kept};
  }

  Operand prepare(Operand a, const std::set<char>& keep) {
    for (size_t d = 0; d < a.letters.size(); ++d)
      if (a.letters.find(a.letters[d], d + 1) != std::string::npos) {
        a = take_diagonal(a, a.letters[d]);
        d = static_cast<size_t>(-1);  // the letters moved: start over
      }
    return sum_out(a, keep);
  }

  // a x b over their shared letters: one MatMul on [batch, M, K] x [batch, K, N].
  Operand contract(const Operand& a, const Operand& b, const std::set<char>& keep) {
    std::string batch, contracted, a_only, b_only;
    for (char c : a.letters) {
      if (b.letters.find(c) == std::string::npos)
        a_only += c;
      else
        (keep.count(c) ? batch : contracted) += c;
    }
    for (char c : b.letters)
      if (a.letters.find(c) == std::string::npos) b_only += c;
    Operand at = transpose(a, batch + a_only + contracted);
    Operand bt = transpose(b, batch + contracted + b_only);
    const Ints as = shape_of(at.value), bs = shape_of(bt.value);
    auto extent = [&](const std::string& letters) {
      int64_t n = 1;
      for (char c : letters) n *= spec_.extent.at(c);
      return n;
    };
    const size_t nb = batch.size();
    Ints a_shape(as.begin(), as.begin() + static_cast<long>(nb));
    Ints b_shape(bs.begin(), bs.begin() + static_cast<long>(nb));
    a_shape.push_back(extent(a_only));
    a_shape.push_back(extent(contracted));
    b_shape.push_back(extent(contracted));
    b_shape.push_back(extent(b_only));
    Ints mm_shape;
    for (char c : batch) mm_shape.push_back(spec_.extent.at(c));
    mm_shape.push_back(extent(a_only));
    mm_shape.push_back(extent(b_only));
    std::string mm = fresh("matmul", mm_shape);
    emit("MatMul", "matmul", {reshape(at.value, a_shape), reshape(bt.value, b_shape)}, mm);
    Ints out_shape;
    for (char c : batch + a_only + b_only) out_shape.push_back(spec_.extent.at(c));
    return {reshape(mm, out_shape), batch + a_only + b_only};
  }

  // The result in the output's order, under the Einsum's output name.
  void finish(const Operand& a) {
    Operand t = transpose(a, spec_.output);
    const Ints want = g_.type_of(n_.outputs[0])->shape;
    std::string v = t.value;
    if (shape_of(v) != want) v = reshape(v, want);      // an axis of extent 1 that broadcast
    if (emitted_ > 0 && out_.back().outputs[0] == v) {  // the last node writes the output
      out_.back().outputs[0] = n_.outputs[0];
      g_.value_info.erase(v);
    } else {  // nothing to do ("ij->ij"): a copy under the output's name
      emit("Identity", "output", {v}, n_.outputs[0]);
    }
  }

  Graph& g_;
  const Node& n_;
  std::vector<Node>& out_;
  std::string dtype_;
  op_util::EinsumSpec spec_;
  int count_ = 0;
  int emitted_ = 0;  // nodes this rewrite appended to out_
};

}  // namespace

int lower_einsum(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    if (n.op_type != "Einsum" || !(n.domain.empty() || n.domain == "ai.onnx")) return false;
    for (const std::string& in : n.inputs)
      if (in.empty() || !g.type_of(in)) op_util::fail(n, "an operand's type is unknown");
    EinsumRewriter(g, n, out).run();
    return true;
  });
}

}  // namespace kiln::graph::passes
