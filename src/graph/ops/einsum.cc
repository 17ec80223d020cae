// Einsum's equation and reference evaluation (plain loops over every letter,
// accumulating in double or int64). No compute: lower_einsum rewrites it.
#include "graph/ops/einsum.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace op_util {
namespace {

std::string strip_spaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// A term's explicit letters, and how many axes its "..." covers (-1: none).
struct Term {
  std::string before, after;
  int ellipsis = -1;
};

Term parse_term(const Node& node, const std::string& term, int64_t rank) {
  Term t;
  const size_t e = term.find("...");
  t.before = e == std::string::npos ? term : term.substr(0, e);
  t.after = e == std::string::npos ? "" : term.substr(e + 3);
  for (char c : t.before + t.after)
    if (!std::isalpha(static_cast<unsigned char>(c)))
      fail(node, "equation term '" + term + "' has '" + std::string(1, c) + "' (letters only)");
  const int64_t letters = static_cast<int64_t>(t.before.size() + t.after.size());
  if (e != std::string::npos && rank < 0) {  // the output: an ellipsis, of whatever rank
    t.ellipsis = 0;
  } else if (e != std::string::npos) {
    if (rank < letters)
      fail(node, "equation term '" + term + "' has more letters than its operand's rank " +
                     std::to_string(rank));
    t.ellipsis = static_cast<int>(rank - letters);
  } else if (rank >= 0 && letters != rank) {
    fail(node, "equation term '" + term + "' has " + std::to_string(letters) +
                   " letters for an operand of rank " + std::to_string(rank));
  }
  return t;
}

// The letters of the last `n` of `total` ellipsis axes.
std::string ellipsis_letters(int n, int total) {
  std::string s;
  for (int k = total - n; k < total; ++k) s += static_cast<char>('0' + k);
  return s;
}

}  // namespace

EinsumSpec parse_einsum(const Node& node, const std::vector<std::vector<int64_t>>& shapes) {
  const std::string eq = strip_spaces(attr_string(node, "equation", ""));
  if (eq.empty()) fail(node, "the equation attribute is missing");
  const size_t arrow = eq.find("->");
  const std::vector<std::string> terms = split(eq.substr(0, arrow), ',');
  if (terms.size() != shapes.size())
    fail(node, "the equation names " + std::to_string(terms.size()) + " operands but it has " +
                   std::to_string(shapes.size()) + " inputs");
  std::vector<Term> parsed;
  int ellipsis = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    parsed.push_back(parse_term(node, terms[i], static_cast<int64_t>(shapes[i].size())));
    ellipsis = std::max(ellipsis, parsed.back().ellipsis);
  }
  if (ellipsis > 10) fail(node, "an ellipsis covers more than 10 axes");
  EinsumSpec spec;
  std::map<char, int> count;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Term& t = parsed[i];
    std::string letters =
        t.before + (t.ellipsis > 0 ? ellipsis_letters(t.ellipsis, ellipsis) : "") + t.after;
    for (size_t d = 0; d < letters.size(); ++d) {
      const char c = letters[d];
      const int64_t n = shapes[i][d];
      auto [it, fresh] = spec.extent.emplace(c, n);
      if (!fresh && it->second != n) {
        if (it->second != 1 && n != 1)
          fail(node, "letter '" + std::string(1, c) + "' has extents " +
                         std::to_string(it->second) + " and " + std::to_string(n));
        it->second = std::max(it->second, n);
      }
      if (std::isalpha(static_cast<unsigned char>(c))) ++count[c];
    }
    spec.inputs.push_back(letters);
  }
  if (arrow == std::string::npos) {
    spec.output = ellipsis_letters(ellipsis, ellipsis);
    for (const auto& [c, n] : count)
      if (n == 1) spec.output += c;  // std::map: sorted
  } else {
    const Term out = parse_term(node, eq.substr(arrow + 2), -1);
    spec.output =
        out.before + (out.ellipsis >= 0 ? ellipsis_letters(ellipsis, ellipsis) : "") + out.after;
  }
  std::set<char> seen;
  for (char c : spec.output) {
    if (!seen.insert(c).second)
      fail(node, "output letter '" + std::string(1, c) + "' appears twice");
    if (!spec.extent.count(c))
      fail(node, "output letter '" + std::string(1, c) + "' is in no operand");
  }
  return spec;
}

namespace {

// out[o] = sum over the letters not in the output of the operands' product.
template <typename T>
Initializer einsum_eval(const EinsumSpec& spec, const std::vector<const Initializer*>& ins) {
  std::string letters = spec.output;
  for (const std::string& in : spec.inputs)
    for (char c : in)
      if (letters.find(c) == std::string::npos) letters += c;
  std::vector<int64_t> ext;
  for (char c : letters) ext.push_back(spec.extent.at(c));
  Shape out_shape(ext.begin(), ext.begin() + static_cast<long>(spec.output.size()));
  // stride[k][l]: step of operand k's offset per step of letter l (0 where the
  // operand has no such axis, or broadcasts it).
  std::vector<std::vector<int64_t>> stride(ins.size(), std::vector<int64_t>(letters.size(), 0));
  for (size_t k = 0; k < ins.size(); ++k) {
    const Shape& s = ins[k]->type.shape;
    Shape st = strides_of(s);
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] != 1) stride[k][letters.find(spec.inputs[k][d])] += st[d];
  }
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  Initializer out = make_tensor(dtype_of<T>(), out_shape);
  T* o = data_of<T>(out);
  const int64_t n_out = numel(out_shape);
  Shape inner(ext.begin() + static_cast<long>(spec.output.size()), ext.end());
  const int64_t n_inner = numel(inner);
  std::vector<int64_t> idx(letters.size(), 0);
  for (int64_t i = 0; i < n_out; ++i) {
    Acc acc = 0;
    for (int64_t j = 0; j < n_inner; ++j) {
      int64_t rem = j;
      for (size_t l = letters.size(); l-- > spec.output.size();) {
        idx[l] = rem % ext[l];
        rem /= ext[l];
      }
      Acc prod = 1;
      for (size_t k = 0; k < ins.size(); ++k) {
        int64_t off = 0;
        for (size_t l = 0; l < letters.size(); ++l) off += idx[l] * stride[k][l];
        prod *= static_cast<Acc>(data_of<T>(*ins[k])[off]);
      }
      acc += prod;
    }
    o[i] = static_cast<T>(acc);
    for (size_t l = spec.output.size(); l-- > 0;) {  // next output index
      if (++idx[l] < ext[l]) break;
      idx[l] = 0;
    }
  }
  return out;
}

std::vector<Initializer> evaluate_einsum(const Node& node,
                                         const std::vector<const Initializer*>& ins) {
  if (ins.empty()) fail(node, "no inputs");
  std::vector<Shape> shapes;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Initializer& t = required_input(node, ins, k);
    if (t.type.dtype != ins[0]->type.dtype) fail(node, "operands have different dtypes");
    shapes.push_back(t.type.shape);
  }
  const EinsumSpec spec = parse_einsum(node, shapes);
  return {visit_dtype(node, ins[0]->type.dtype, [&](auto tag) -> Initializer {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      fail(node, "bool operands are not supported");
    else
      return einsum_eval<T>(spec, ins);
  })};
}

}  // namespace
}  // namespace op_util

void register_einsum_ops() {
  register_op({"Einsum", OpPattern::kOpaque, op_util::evaluate_einsum, nullptr, {}});
}

}  // namespace kiln::graph
