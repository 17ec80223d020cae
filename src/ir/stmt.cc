#include "ir/stmt.h"

namespace kiln::ir {

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial: return "for";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::Rolled: return "rolled";
  }
  return "?";
}

Stmt make_for(Var v, Expr min, Expr extent, ForKind kind, Stmt body) {
  return make_stmt<ForNode>(std::move(v), std::move(min), std::move(extent), kind, std::move(body));
}

Stmt make_store(Buffer buf, Expr value, Expr index, Expr predicate) {
  return make_stmt<StoreNode>(std::move(buf), std::move(value), std::move(index),
                              std::move(predicate));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  return make_stmt<IfThenElseNode>(std::move(cond), std::move(then_case), std::move(else_case));
}

Stmt make_seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s) continue;
    if (auto* seq = s.as<SeqNode>()) {
      flat.insert(flat.end(), seq->seq.begin(), seq->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) return make_stmt<SeqNode>(std::vector<Stmt>{});
  if (flat.size() == 1) return flat[0];
  return make_stmt<SeqNode>(std::move(flat));
}

}  // namespace kiln::ir
