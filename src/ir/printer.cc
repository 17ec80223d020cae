// Printer: C-like text of expressions and statements, for debugging and tests.
//
// Expressions use the fewest parentheses that keep the tree unambiguous:
// a child is wrapped when it binds looser than its parent, and a right-hand
// child also when it binds equally (so `a - (b - c)` keeps its parentheses).
#include "ir/printer.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "ir/tensor.h"

namespace kiln::ir {

namespace {

// Binding strength of an expression as printed; atoms (calls, literals,
// variables) bind tightest.
int precedence(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Or: return 1;
    case ExprKind::And: return 2;
    case ExprKind::EQ:
    case ExprKind::NE: return 3;
    case ExprKind::LT:
    case ExprKind::LE:
    case ExprKind::GT:
    case ExprKind::GE: return 4;
    case ExprKind::Add:
    case ExprKind::Sub: return 5;
    case ExprKind::Mul:
    case ExprKind::Div:
    case ExprKind::Mod: return 6;
    case ExprKind::Not: return 7;
    case ExprKind::IntImm:
      // A negative literal reads as a unary minus: `x*-1` is fine, but keep
      // it out of the way of a preceding binary minus or multiplication.
      return e.as<IntImmNode>()->value < 0 ? 7 : 10;
    default: return 10;
  }
}

const char* infix_op(ExprKind k) {
  switch (k) {
    case ExprKind::Add: return " + ";
    case ExprKind::Sub: return " - ";
    case ExprKind::Mul: return "*";
    case ExprKind::Div: return " / ";
    case ExprKind::Mod: return " % ";
    case ExprKind::EQ: return " == ";
    case ExprKind::NE: return " != ";
    case ExprKind::LT: return " < ";
    case ExprKind::LE: return " <= ";
    case ExprKind::GT: return " > ";
    case ExprKind::GE: return " >= ";
    case ExprKind::And: return " && ";
    case ExprKind::Or: return " || ";
    default: return nullptr;
  }
}

const char* call_style_op(ExprKind k) {
  switch (k) {
    case ExprKind::FloorDiv: return "floordiv";
    case ExprKind::FloorMod: return "floormod";
    case ExprKind::Min: return "min";
    case ExprKind::Max: return "max";
    default: return nullptr;
  }
}

// Shortest text that reads back as the same value, always recognizably a
// float: "1f", "0.5f" for float32; "1.0", "0.25" for float64.
std::string float_text(double v, DataType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  bool f32 = t.bits == 32 && t.code == TypeCode::Float;
  auto res = f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                 : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (f32) return s + "f";
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (t.bits == 64 && t.code == TypeCode::Float) return s;
  return t.str() + "(" + s + ")";
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(std::ostream& os) : os_(os) {}

  void print(const Expr& e) {
    if (!e) {
      os_ << "<null>";
      return;
    }
    switch (e.kind()) {
      case ExprKind::IntImm: return print_int(e.as<IntImmNode>());
      case ExprKind::FloatImm: {
        auto* f = e.as<FloatImmNode>();
        os_ << float_text(f->value, f->dtype);
        return;
      }
      case ExprKind::Var: os_ << name_of(e.as<VarNode>()); return;
      case ExprKind::Not: return print_not(e);
      case ExprKind::Select: return print_select(e.as<SelectNode>());
      case ExprKind::Cast: return print_cast(e.as<CastNode>());
      case ExprKind::Call: return print_call(e.as<CallNode>());
      case ExprKind::Let: return print_let(e.as<LetNode>());
      case ExprKind::Load: return print_load(e.as<LoadNode>());
      case ExprKind::Ramp: return print_ramp(e.as<RampNode>());
      case ExprKind::Broadcast: return print_broadcast(e.as<BroadcastNode>());
      case ExprKind::TensorRead: return print_tensor_read(e.as<TensorReadNode>());
      case ExprKind::Reduce: return print_reduce(e.as<ReduceNode>());
      default: return print_binary(e);
    }
  }

  void print(const Stmt& s) {
    if (!s) return;
    switch (s.kind()) {
      case StmtKind::For: return print_for(s.as<ForNode>());
      case StmtKind::Store: return print_store(s.as<StoreNode>());
      case StmtKind::Allocate: return print_allocate(s.as<AllocateNode>());
      case StmtKind::LetStmt: return print_let_stmt(s.as<LetStmtNode>());
      case StmtKind::IfThenElse: return print_if(s.as<IfThenElseNode>());
      case StmtKind::Seq:
        for (auto& st : s.as<SeqNode>()->seq) print(st);
        return;
      case StmtKind::Evaluate:
        indent();
        print(s.as<EvaluateNode>()->value);
        os_ << "\n";
        return;
      case StmtKind::TensorStore: return print_tensor_store(s.as<TensorStoreNode>());
      case StmtKind::Realize: return print_realize(s.as<RealizeNode>());
    }
  }

  void print_func(const LoweredFunc& f) {
    os_ << "func " << f.name << "(";
    for (size_t i = 0; i < f.args.size(); ++i) {
      if (i) os_ << ", ";
      print_buffer_decl(f.args[i]);
    }
    os_ << ") {\n";
    ++depth_;
    print(f.body);
    --depth_;
    os_ << "}\n";
  }

 private:
  // Distinct variables that share a name get suffixes (`i`, `i_1`) so the
  // text never suggests two loops use the same variable.
  const std::string& name_of(const VarNode* v) {
    auto it = var_names_.find(v);
    if (it != var_names_.end()) return it->second;
    std::string name = v->name;
    for (int n = 1; used_names_.count(name); ++n) name = v->name + "_" + std::to_string(n);
    used_names_.insert(name);
    return var_names_.emplace(v, name).first->second;
  }

  void print_int(const IntImmNode* op) {
    if (op->dtype.is_bool()) {
      os_ << (op->value ? "true" : "false");
    } else if (op->dtype.is_uint() && op->dtype.bits == 64) {
      os_ << static_cast<uint64_t>(op->value);
    } else {
      os_ << op->value;
    }
  }

  void print_child(const Expr& child, int parent_prec, bool right) {
    int p = precedence(child);
    bool parens = p < parent_prec || (right && p == parent_prec);
    if (parens) os_ << "(";
    print(child);
    if (parens) os_ << ")";
  }

  void print_binary(const Expr& e) {
    auto* op = static_cast<const BinaryNode*>(e.get());
    if (const char* fn = call_style_op(op->kind)) {
      os_ << fn << "(";
      print(op->a);
      os_ << ", ";
      print(op->b);
      os_ << ")";
      return;
    }
    int p = precedence(e);
    print_child(op->a, p, false);
    os_ << infix_op(op->kind);
    print_child(op->b, p, true);
  }

  void print_not(const Expr& e) {
    os_ << "!";
    print_child(e.as<NotNode>()->a, precedence(e), true);
  }

  void print_select(const SelectNode* op) {
    os_ << "select(";
    print(op->cond);
    os_ << ", ";
    print(op->true_value);
    os_ << ", ";
    print(op->false_value);
    os_ << ")";
  }

  void print_cast(const CastNode* op) {
    os_ << op->dtype.str() << "(";
    print(op->value);
    os_ << ")";
  }

  void print_list(const std::vector<Expr>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os_ << ", ";
      print(v[i]);
    }
  }

  void print_call(const CallNode* op) {
    os_ << intrinsic_name(op->op) << "(";
    print_list(op->args);
    os_ << ")";
  }

  void print_let(const LetNode* op) {
    os_ << "(let " << name_of(op->var.get()) << " = ";
    print(op->value);
    os_ << " in ";
    print(op->body);
    os_ << ")";
  }

  void print_load(const LoadNode* op) {
    os_ << op->buffer->name << "[";
    print(op->index);
    print_predicate(op->predicate);
    os_ << "]";
  }

  // " if p" inside the brackets of a predicated load or store.
  void print_predicate(const Expr& p) {
    if (!p) return;
    os_ << " if ";
    print(p);
  }

  void print_ramp(const RampNode* op) {
    os_ << "ramp(";
    print(op->base);
    os_ << ", ";
    print(op->stride);
    os_ << ", " << op->lanes << ")";
  }

  void print_broadcast(const BroadcastNode* op) {
    os_ << "x" << op->lanes << "(";
    print(op->value);
    os_ << ")";
  }

  void print_tensor_read(const TensorReadNode* op) {
    os_ << op->tensor->name << "(";
    print_list(op->indices);
    os_ << ")";
  }

  void print_reduce(const ReduceNode* op) {
    os_ << reduce_name(op->op) << "(";
    print(op->source);
    os_ << ", axis=[";
    for (size_t i = 0; i < op->axes.size(); ++i) {
      if (i) os_ << ", ";
      os_ << name_of(op->axes[i]->var.get());
    }
    os_ << "])";
  }

  // ---- statements -------------------------------------------------------------

  void indent() {
    for (int i = 0; i < depth_; ++i) os_ << "  ";
  }

  void print_block(const Stmt& body) {
    ++depth_;
    print(body);
    --depth_;
  }

  void print_for(const ForNode* op) {
    indent();
    os_ << for_kind_name(op->for_kind) << " (" << name_of(op->var.get()) << ", ";
    print(op->min);
    os_ << ", ";
    print(op->extent);
    os_ << ") {\n";
    print_block(op->body);
    indent();
    os_ << "}\n";
  }

  void print_store(const StoreNode* op) {
    indent();
    os_ << op->buffer->name << "[";
    print(op->index);
    print_predicate(op->predicate);
    os_ << "] = ";
    print(op->value);
    os_ << "\n";
  }

  static const char* scope_name(MemScope s) { return s == MemScope::Local ? "local" : "global"; }

  void print_allocate(const AllocateNode* op) {
    indent();
    os_ << "allocate " << op->buffer->name << "[" << op->buffer->dtype.str() << " * ";
    print(op->size);
    os_ << "] " << scope_name(op->buffer->scope) << " {\n";
    print_block(op->body);
    indent();
    os_ << "}\n";
  }

  void print_let_stmt(const LetStmtNode* op) {
    indent();
    os_ << "let " << name_of(op->var.get()) << " = ";
    print(op->value);
    os_ << "\n";
    print(op->body);
  }

  void print_if(const IfThenElseNode* op) {
    indent();
    os_ << "if (";
    print(op->cond);
    os_ << ") {\n";
    print_block(op->then_case);
    indent();
    if (op->else_case) {
      os_ << "} else {\n";
      print_block(op->else_case);
      indent();
    }
    os_ << "}\n";
  }

  void print_tensor_store(const TensorStoreNode* op) {
    indent();
    os_ << op->tensor->name << "(";
    print_list(op->indices);
    os_ << ") = ";
    print(op->value);
    os_ << "\n";
  }

  void print_realize(const RealizeNode* op) {
    indent();
    os_ << "realize " << op->tensor->name << "(";
    for (size_t i = 0; i < op->bounds.size(); ++i) {
      if (i) os_ << ", ";
      os_ << "[";
      print(op->bounds[i].min);
      os_ << ", ";
      print(op->bounds[i].extent);
      os_ << "]";
    }
    os_ << ")";
    if (op->scope == MemScope::Local) os_ << " local";
    os_ << " {\n";
    print_block(op->body);
    indent();
    os_ << "}\n";
  }

  void print_buffer_decl(const Buffer& b) {
    os_ << b->name << ": " << b->dtype.str() << "[";
    print_list(b->shape);
    os_ << "]";
  }

  std::ostream& os_;
  int depth_ = 0;
  std::map<const VarNode*, std::string> var_names_;
  std::set<std::string> used_names_;
};

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  Printer(os).print(e);
  return os.str();
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  Printer(os).print(s);
  return os.str();
}

std::string to_string(const LoweredFunc& f) {
  std::ostringstream os;
  Printer(os).print_func(f);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  Printer(os).print(e);
  return os;
}

std::ostream& operator<<(std::ostream& os, const Stmt& s) {
  Printer(os).print(s);
  return os;
}

}  // namespace kiln::ir
