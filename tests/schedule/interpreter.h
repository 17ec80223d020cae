// A slow, obviously-correct interpreter of flat loop IR, for testing
// lowering without code generation: every value is a vector of doubles
// (one per lane; integers stay exact below 2^53), every buffer a float array
// (float32 kernels only).
#pragma once

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "ir/function.h"
#include "ir/stmt.h"

namespace kiln::test {

class Interpreter {
 public:
  using Value = std::vector<double>;

  void run(const ir::LoweredFunc& f, const std::vector<float*>& args) {
    for (size_t i = 0; i < f.args.size(); ++i) {
      mem_[f.args[i].get()] = args[i];
      int64_t n = 1;
      for (auto& d : f.args[i]->shape) n *= *ir::as_const_int(d);
      sizes_[f.args[i].get()] = n;
    }
    exec(f.body);
  }

 private:
  static double scalar_binary(ir::ExprKind k, double a, double b, bool is_int) {
    using K = ir::ExprKind;
    switch (k) {
      case K::Add: return a + b;
      case K::Sub: return a - b;
      case K::Mul: return a * b;
      case K::Div: return is_int ? std::trunc(a / b) : a / b;
      case K::Mod: return is_int ? a - std::trunc(a / b) * b : std::fmod(a, b);
      case K::FloorDiv: return std::floor(a / b);
      case K::FloorMod: return a - std::floor(a / b) * b;
      case K::Min: return std::min(a, b);
      case K::Max: return std::max(a, b);
      case K::EQ: return a == b;
      case K::NE: return a != b;
      case K::LT: return a < b;
      case K::LE: return a <= b;
      case K::GT: return a > b;
      case K::GE: return a >= b;
      case K::And: return a != 0 && b != 0;
      case K::Or: return a != 0 || b != 0;
      default: throw std::logic_error("not binary");
    }
  }

  static double intrinsic(ir::Intrinsic op, double x, double y) {
    using I = ir::Intrinsic;
    switch (op) {
      case I::Exp: return std::exp(x);
      case I::Log: return std::log(x);
      case I::Sqrt: return std::sqrt(x);
      case I::Rsqrt: return 1.0 / std::sqrt(x);
      case I::Tanh: return std::tanh(x);
      case I::Erf: return std::erf(x);
      case I::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case I::Fabs: return std::fabs(x);
      case I::Pow: return std::pow(x, y);
      case I::Floor: return std::floor(x);
      case I::Ceil: return std::ceil(x);
      case I::Round: return std::nearbyint(x);
    }
    return 0;
  }

  // Values are rounded to float32 where the IR type is float32, as the kernel would.
  static Value typed(Value v, ir::DataType t) {
    if (t.is_float() && t.bits == 32)
      for (auto& x : v) x = static_cast<float>(x);
    return v;
  }

  Value eval(const ir::Expr& e) {
    using namespace kiln::ir;
    int lanes = e.dtype().lanes;
    if (auto* i = e.as<IntImmNode>()) return Value(lanes, double(i->value));
    if (auto* f = e.as<FloatImmNode>()) return typed(Value(lanes, f->value), e.dtype());
    if (auto* v = e.as<VarNode>()) return vars_.at(v);
    if (is_binary(e.kind())) {
      auto* b = static_cast<const BinaryNode*>(e.get());
      Value a = eval(b->a), c = eval(b->b);
      bool is_int = !b->a.dtype().is_float();
      Value r(lanes);
      for (int l = 0; l < lanes; ++l) r[l] = scalar_binary(e.kind(), a[l], c[l], is_int);
      return typed(r, e.dtype());
    }
    if (auto* n = e.as<NotNode>()) {
      Value a = eval(n->a);
      for (auto& x : a) x = x == 0;
      return a;
    }
    if (auto* s = e.as<SelectNode>()) {
      Value c = eval(s->cond), t = eval(s->true_value), f = eval(s->false_value);
      for (int l = 0; l < lanes; ++l) t[l] = c[l] != 0 ? t[l] : f[l];
      return t;
    }
    if (auto* c = e.as<CastNode>()) {
      Value v = eval(c->value);
      if (!e.dtype().is_float() && c->value.dtype().is_float())
        for (auto& x : v) x = std::trunc(x);
      return typed(v, e.dtype());
    }
    if (auto* c = e.as<CallNode>()) {
      Value x = eval(c->args[0]);
      Value y = c->args.size() > 1 ? eval(c->args[1]) : Value(lanes, 0);
      for (int l = 0; l < lanes; ++l) x[l] = intrinsic(c->op, x[l], y[l]);
      return typed(x, e.dtype());
    }
    if (auto* r = e.as<RampNode>()) {
      double b = eval(r->base)[0], s = eval(r->stride)[0];
      Value v(lanes);
      for (int l = 0; l < lanes; ++l) v[l] = b + s * l;
      return v;
    }
    if (auto* b = e.as<BroadcastNode>()) return Value(lanes, eval(b->value)[0]);
    if (auto* ld = e.as<LoadNode>()) {
      Value idx = eval(ld->index);
      Value on = ld->predicate ? eval(ld->predicate) : Value(lanes, 1.0);
      float* base = mem_.at(ld->buffer.get());
      Value v(lanes, 0.0);  // a lane the predicate leaves out reads 0 and no memory
      for (int l = 0; l < lanes; ++l)
        if (on[l] != 0) v[l] = base[check(ld->buffer, idx[l])];
      return v;
    }
    throw std::logic_error("interpreter: unsupported expression");
  }

  int64_t check(const ir::Buffer& b, double idx) {
    auto it = sizes_.find(b.get());
    if (it != sizes_.end() && (idx < 0 || idx >= double(it->second)))
      throw std::out_of_range("out-of-bounds access to " + b->name + " at " + std::to_string(idx));
    return static_cast<int64_t>(idx);
  }

  void exec(const ir::Stmt& s) {
    using namespace kiln::ir;
    if (!s) return;
    if (auto* f = s.as<ForNode>()) {
      int64_t mn = int64_t(eval(f->min)[0]), ext = int64_t(eval(f->extent)[0]);
      for (int64_t i = mn; i < mn + ext; ++i) {
        vars_[f->var.get()] = Value(1, double(i));
        exec(f->body);
      }
      vars_.erase(f->var.get());
    } else if (auto* st = s.as<StoreNode>()) {
      Value idx = eval(st->index), v = eval(st->value);
      Value on = st->predicate ? eval(st->predicate) : Value(idx.size(), 1.0);
      float* base = mem_.at(st->buffer.get());
      for (size_t l = 0; l < idx.size(); ++l)
        if (on[l] != 0) base[check(st->buffer, idx[l])] = float(v[l]);
    } else if (auto* a = s.as<AllocateNode>()) {
      int64_t n = int64_t(eval(a->size)[0]);
      std::vector<float> storage(n, NAN);  // NaN: reading before writing shows up
      mem_[a->buffer.get()] = storage.data();
      sizes_[a->buffer.get()] = n;
      exec(a->body);
      mem_.erase(a->buffer.get());
      sizes_.erase(a->buffer.get());
    } else if (auto* l = s.as<LetStmtNode>()) {
      vars_[l->var.get()] = eval(l->value);
      exec(l->body);
      vars_.erase(l->var.get());
    } else if (auto* i = s.as<IfThenElseNode>()) {
      if (eval(i->cond)[0] != 0)
        exec(i->then_case);
      else
        exec(i->else_case);
    } else if (auto* q = s.as<SeqNode>()) {
      for (auto& x : q->seq) exec(x);
    } else if (s.as<EvaluateNode>()) {
    } else {
      throw std::logic_error("interpreter: unflattened statement");
    }
  }

  std::map<const ir::BufferNode*, float*> mem_;
  std::map<const ir::BufferNode*, int64_t> sizes_;
  std::map<const ir::VarNode*, Value> vars_;
};

}  // namespace kiln::test
