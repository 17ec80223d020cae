#include "tuner/features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "ir/functor.h"

namespace kiln::tuner {
namespace {

using ir::Expr;
using ir::ExprKind;
using ir::ForKind;
using ir::VarNode;

float lg(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}
int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floormod(int64_t a, int64_t b) { return b == 0 ? 0 : a - floordiv(a, b) * b; }

// Integer value of an index expression at one point of the loop nest: loop
// variables take the values in `values`, let-bound variables their (lazily
// evaluated) definitions, anything unknown (a loaded value) 0. `lane` picks
// one lane of a vector index. Used to measure strides by finite differences,
// which also gives a sensible average for floordiv/floormod indices.
class IndexEvaluator {
 public:
  std::unordered_map<const VarNode*, int64_t> values;
  std::unordered_map<const VarNode*, Expr> lets;

  int64_t eval(const Expr& e, int lane = 0) {
    if (!e) return 0;
    switch (e.kind()) {
      case ExprKind::IntImm: return e.as<ir::IntImmNode>()->value;
      case ExprKind::FloatImm: return static_cast<int64_t>(e.as<ir::FloatImmNode>()->value);
      case ExprKind::Var: {
        const VarNode* v = e.as<VarNode>();
        if (auto it = values.find(v); it != values.end()) return it->second;
        if (auto it = lets.find(v); it != lets.end()) return eval(it->second, lane);
        return 0;
      }
      case ExprKind::Not: return !eval(e.as<ir::NotNode>()->a, lane);
      case ExprKind::Select: {
        auto* s = e.as<ir::SelectNode>();
        return eval(s->cond, lane) ? eval(s->true_value, lane) : eval(s->false_value, lane);
      }
      case ExprKind::Cast: return eval(e.as<ir::CastNode>()->value, lane);
      case ExprKind::Let: {
        auto* l = e.as<ir::LetNode>();
        int64_t v = eval(l->value, lane);
        auto old = values.find(l->var.get()) != values.end()
                       ? std::optional<int64_t>(values[l->var.get()])
                       : std::nullopt;
        values[l->var.get()] = v;
        int64_t r = eval(l->body, lane);
        if (old)
          values[l->var.get()] = *old;
        else
          values.erase(l->var.get());
        return r;
      }
      case ExprKind::Ramp: {
        auto* r = e.as<ir::RampNode>();
        return sat_add(eval(r->base, lane), sat_mul(eval(r->stride, lane), lane));
      }
      case ExprKind::Broadcast: return eval(e.as<ir::BroadcastNode>()->value, 0);
      case ExprKind::Call:
      case ExprKind::Load:
      case ExprKind::TensorRead:
      case ExprKind::Reduce: return 0;
      default: break;
    }
    auto* b = static_cast<const ir::BinaryNode*>(e.get());
    int64_t x = eval(b->a, lane), y = eval(b->b, lane);
    switch (e.kind()) {
      case ExprKind::Add: return sat_add(x, y);
      case ExprKind::Sub: return sat_add(x, -y);
      case ExprKind::Mul: return sat_mul(x, y);
      case ExprKind::Div: return y == 0 ? 0 : x / y;
      case ExprKind::Mod: return y == 0 ? 0 : x % y;
      case ExprKind::FloorDiv: return floordiv(x, y);
      case ExprKind::FloorMod: return floormod(x, y);
      case ExprKind::Min: return std::min(x, y);
      case ExprKind::Max: return std::max(x, y);
      case ExprKind::EQ: return x == y;
      case ExprKind::NE: return x != y;
      case ExprKind::LT: return x < y;
      case ExprKind::LE: return x <= y;
      case ExprKind::GT: return x > y;
      case ExprKind::GE: return x >= y;
      case ExprKind::And: return x && y;
      case ExprKind::Or: return x || y;
      default: return 0;
    }
  }
};

struct LoopRec {
  int64_t extent = 1;
  ForKind kind = ForKind::Serial;
  int depth = 0, parent = -1;
  double trip = 1;          // product of the extents from the outermost loop down to this one
  int64_t stores = 0;       // store statements in the body (static)
  double body_ops = 0;      // element operations in the body (static)
  int max_store_lanes = 0;  // widest store in the body
  bool has_inner = false;
};

// One load or store, with its index already measured against the loop stack.
struct AccessRec {
  int buffer;  // position in Walker::buffers_
  bool write;
  int lanes;
  double elem_accesses;           // trip count * lanes
  int64_t base;                   // index with every enclosing loop at its first iteration
  int64_t lane_stride;            // element distance between lanes (0: scalar or broadcast)
  std::vector<int> dep_loops;     // enclosing loops the index depends on (LoopRec ids)
  std::vector<int64_t> dep_diff;  // index change over each of those loops' full range
  double inner_stride;            // stride along the innermost enclosing loop (0: invariant)
  int stack_outer = -1, stack_inner = -1;  // outermost / innermost enclosing loop ids
};

struct BufferRec {
  const ir::BufferNode* node;
  double size = -1;  // elements, -1 if unknown
};

enum Arith {
  kFAdd,
  kFMul,
  kFma,
  kFDiv,
  kFMinMax,
  kInt,
  kLogic,
  kIntrin,
  kCast,
  kLoad,
  kStore,
  kFloatAll,
  kVectorOps,
  kScalarFloat,
};

class Walker : public ir::IRVisitor {
 public:
  explicit Walker(const ir::LoweredFunc& f) {
    for (const auto& b : f.args) {
      double n = 1;
      for (const auto& d : b->shape) {
        const int64_t* c = ir::as_const_int(d);
        if (!c) {
          n = -1;
          break;
        }
        n *= static_cast<double>(*c);
      }
      buffer_id(b.get(), n);
    }
  }

  std::vector<LoopRec> loops;
  std::vector<AccessRec> accesses;
  std::vector<BufferRec> buffers;
  double arith[kArithFeatures] = {};
  int64_t static_stores = 0, parallel_loops = 0;
  int max_depth = 0, widest_store = 0;
  double max_parallel_extent = 0, local_bytes = 0, global_bytes = 0, guards = 0;

 protected:
  void visit_for(const ir::ForNode* op) override {
    LoopRec rec;
    int64_t mn = ev_.eval(op->min);
    rec.extent = std::max<int64_t>(1, ev_.eval(op->extent));
    // Rolled is serial to the cost model (its one-hot slots are the first four kinds).
    rec.kind = op->for_kind == ForKind::Rolled ? ForKind::Serial : op->for_kind;
    rec.depth = static_cast<int>(stack_.size());
    rec.parent = stack_.empty() ? -1 : stack_.back();
    rec.trip = trip() * static_cast<double>(rec.extent);
    if (rec.parent >= 0) loops[rec.parent].has_inner = true;
    if (rec.kind == ForKind::Parallel) {
      ++parallel_loops;
      max_parallel_extent = std::max(max_parallel_extent, static_cast<double>(rec.extent));
    }
    max_depth = std::max(max_depth, rec.depth + 1);
    int id = static_cast<int>(loops.size());
    loops.push_back(rec);
    loop_min_.push_back(mn);
    stack_.push_back(id);
    ev_.values[op->var.get()] = mn;
    loop_var_.push_back(op->var.get());
    visit(op->body);
    ev_.values.erase(op->var.get());
    stack_.pop_back();
    // Fold this loop's static totals into its parent.
    if (rec.parent >= 0) {
      LoopRec& p = loops[rec.parent];
      const LoopRec& me = loops[id];
      p.stores += me.stores;
      p.body_ops += me.body_ops;
      p.max_store_lanes = std::max(p.max_store_lanes, me.max_store_lanes);
    }
  }

  void visit_store(const ir::StoreNode* op) override {
    int lanes = op->value.dtype().lanes;
    record_access(op->buffer.get(), /*write=*/true, op->index, lanes);
    count(kStore, lanes);
    ++static_stores;
    widest_store = std::max(widest_store, lanes);
    if (!stack_.empty()) {
      loops[stack_.back()].stores += 1;
      loops[stack_.back()].max_store_lanes = std::max(loops[stack_.back()].max_store_lanes, lanes);
    }
    visit(op->value);
    visit(op->index);
  }

  void visit_load(const ir::LoadNode* op) override {
    record_access(op->buffer.get(), /*write=*/false, op->index, op->dtype.lanes);
    count(kLoad, op->dtype.lanes);
    visit(op->index);
  }

  void visit_binary(const ir::BinaryNode* op) override {
    int lanes = op->dtype.lanes;
    bool fl = op->a.dtype().is_float();
    switch (op->kind) {
      case ExprKind::Add:
      case ExprKind::Sub:
        if (fl) {
          count(kFAdd, lanes);
          if (is_float_mul(op->a) || is_float_mul(op->b)) count_only(kFma, lanes);
        } else {
          count(kInt, lanes);
        }
        break;
      case ExprKind::Mul: count(fl ? kFMul : kInt, lanes); break;
      case ExprKind::Div:
      case ExprKind::Mod:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod: count(fl ? kFDiv : kInt, lanes); break;
      case ExprKind::Min:
      case ExprKind::Max: count(fl ? kFMinMax : kInt, lanes); break;
      default: count(kLogic, lanes); break;  // comparisons, and, or
    }
    IRVisitor::visit_binary(op);
  }

  void visit_not(const ir::NotNode* op) override {
    count(kLogic, op->dtype.lanes);
    IRVisitor::visit_not(op);
  }
  void visit_select(const ir::SelectNode* op) override {
    count(kLogic, op->dtype.lanes);
    IRVisitor::visit_select(op);
  }
  void visit_cast(const ir::CastNode* op) override {
    count(kCast, op->dtype.lanes);
    IRVisitor::visit_cast(op);
  }
  void visit_call(const ir::CallNode* op) override {
    count(kIntrin, op->dtype.lanes);
    IRVisitor::visit_call(op);
  }
  void visit_let(const ir::LetNode* op) override {
    visit(op->value);
    auto saved = bind_let(op->var.get(), op->value);
    visit(op->body);
    unbind_let(op->var.get(), saved);
  }

  void visit_let_stmt(const ir::LetStmtNode* op) override {
    visit(op->value);
    auto saved = bind_let(op->var.get(), op->value);
    visit(op->body);
    unbind_let(op->var.get(), saved);
  }

  void visit_if(const ir::IfThenElseNode* op) override {
    guards += trip();
    IRVisitor::visit_if(op);
  }

  void visit_allocate(const ir::AllocateNode* op) override {
    double n = static_cast<double>(std::max<int64_t>(0, ev_.eval(op->size)));
    double bytes = n * op->buffer->dtype.bytes();
    (op->buffer->scope == ir::MemScope::Local ? local_bytes : global_bytes) += bytes;
    buffer_id(op->buffer.get(), n);
    IRVisitor::visit_allocate(op);
  }

 private:
  double trip() const { return stack_.empty() ? 1.0 : loops[stack_.back()].trip; }

  static bool is_float_mul(const Expr& e) {
    return e && e.kind() == ExprKind::Mul && e.dtype().is_float();
  }

  // Trip-weighted element count for one operation, plus the static count
  // that picks the hottest loop; float arithmetic also feeds the totals.
  void count(Arith a, int lanes) {
    count_only(a, lanes);
    double w = trip();
    bool flop = a == kFAdd || a == kFMul || a == kFDiv || a == kFMinMax || a == kIntrin;
    if (flop) {
      arith[kFloatAll] += w * lanes;
      if (lanes == 1) arith[kScalarFloat] += w;
    }
    if (lanes > 1) arith[kVectorOps] += w;
    if ((flop || a == kLoad || a == kStore) && !stack_.empty())
      loops[stack_.back()].body_ops += lanes;
  }
  void count_only(Arith a, int lanes) { arith[a] += trip() * lanes; }

  std::optional<Expr> bind_let(const VarNode* v, const Expr& value) {
    std::optional<Expr> old;
    if (auto it = ev_.lets.find(v); it != ev_.lets.end()) old = it->second;
    ev_.lets[v] = value;
    return old;
  }
  void unbind_let(const VarNode* v, const std::optional<Expr>& old) {
    if (old)
      ev_.lets[v] = *old;
    else
      ev_.lets.erase(v);
  }

  int buffer_id(const ir::BufferNode* b, double size = -1) {
    auto it = buffer_ids_.find(b);
    if (it != buffer_ids_.end()) {
      if (size >= 0) buffers[it->second].size = size;
      return it->second;
    }
    int id = static_cast<int>(buffers.size());
    buffers.push_back({b, size});
    buffer_ids_.emplace(b, id);
    return id;
  }

  // Measures the index against every enclosing loop by finite differences:
  // the change of the index over a loop's full range, the others at their
  // first iteration (their current value in ev_).
  void record_access(const ir::BufferNode* b, bool write, const Expr& index, int lanes) {
    AccessRec a;
    a.buffer = buffer_id(b);
    a.write = write;
    a.lanes = lanes;
    a.elem_accesses = trip() * lanes;
    a.base = ev_.eval(index, 0);
    a.lane_stride = lanes > 1 ? ev_.eval(index, 1) - a.base : 0;
    a.inner_stride = 0;
    for (size_t k = 0; k < stack_.size(); ++k) {
      int id = stack_[k];
      const LoopRec& l = loops[id];
      if (l.extent <= 1) continue;
      const VarNode* v = loop_var_[id];
      ev_.values[v] = loop_min_[id] + l.extent - 1;
      int64_t diff = ev_.eval(index, 0) - a.base;
      ev_.values[v] = loop_min_[id];
      if (diff == 0) continue;
      a.dep_loops.push_back(id);
      a.dep_diff.push_back(diff);
      if (k + 1 == stack_.size())
        a.inner_stride = static_cast<double>(diff) / static_cast<double>(l.extent - 1);
    }
    if (!stack_.empty()) {
      a.stack_outer = stack_.front();
      a.stack_inner = stack_.back();
    }
    accesses.push_back(std::move(a));
  }

  IndexEvaluator ev_;
  std::vector<int> stack_;                // enclosing loops, outermost first (LoopRec ids)
  std::vector<int64_t> loop_min_;         // per LoopRec id
  std::vector<const VarNode*> loop_var_;  // per LoopRec id
  std::unordered_map<const ir::BufferNode*, int> buffer_ids_;
};

struct BufferSummary {
  int id = 0;
  bool read = false, write = false;
  double elem_accesses = 0, distinct = 0, per_outer = 0, inner = 0;
  const AccessRec* main = nullptr;
};

// Per buffer: distinct elements touched, estimated per group of accesses
// that move alike (same loops, same strides, same lanes) as the footprint of
// one access times the number of distinct starting offsets in the group, so
// that the unrolled copies of a register tile count once per row they touch
// and not once per copy; summed over groups and capped at the buffer size.
std::vector<BufferSummary> summarize_buffers(const Walker& w) {
  std::vector<BufferSummary> out(w.buffers.size());
  struct Group {
    double whole = 0, per_outer = 0, inner = 0;
    std::set<int64_t> offsets;
  };
  std::vector<std::map<std::vector<int64_t>, Group>> groups(w.buffers.size());
  for (const AccessRec& a : w.accesses) {
    BufferSummary& s = out[a.buffer];
    s.id = a.buffer;
    (a.write ? s.write : s.read) = true;
    s.elem_accesses += a.elem_accesses;
    if (!s.main || a.elem_accesses > s.main->elem_accesses) s.main = &a;

    double lanes_fp = a.lane_stride != 0 ? a.lanes : 1;
    double whole = lanes_fp, per_outer = lanes_fp, inner = lanes_fp;
    std::vector<int64_t> key = {a.lanes, a.lane_stride};
    for (size_t k = 0; k < a.dep_loops.size(); ++k) {
      const LoopRec& l = w.loops[a.dep_loops[k]];
      whole *= static_cast<double>(l.extent);
      if (a.dep_loops[k] != a.stack_outer) per_outer *= static_cast<double>(l.extent);
      if (a.dep_loops[k] == a.stack_inner) inner *= static_cast<double>(l.extent);
      key.push_back(a.dep_loops[k]);
      key.push_back(a.dep_diff[k]);
    }
    Group& g = groups[a.buffer][key];
    g.whole = whole;
    g.per_outer = per_outer;
    g.inner = inner;
    g.offsets.insert(a.base);
  }
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].id = static_cast<int>(b);
    for (const auto& [key, g] : groups[b]) {
      double n = static_cast<double>(g.offsets.size());
      out[b].distinct += g.whole * n;
      out[b].per_outer += g.per_outer * n;
      out[b].inner += g.inner * n;
    }
    double cap = w.buffers[b].size;
    if (cap >= 0) {
      out[b].distinct = std::min(out[b].distinct, cap);
      out[b].per_outer = std::min(out[b].per_outer, cap);
      out[b].inner = std::min(out[b].inner, cap);
    }
  }
  return out;
}

// The innermost loop (no loop inside) with the most element operations
// weighted by its trip count; -1 when the kernel has no loop.
int hottest_innermost(const std::vector<LoopRec>& loops) {
  int best = -1;
  double best_score = -1;
  for (size_t i = 0; i < loops.size(); ++i) {
    if (loops[i].has_inner) continue;
    double score = loops[i].trip * loops[i].body_ops;
    if (score > best_score) {
      best_score = score;
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace

std::vector<float> extract_features(const ir::LoweredFunc& f) {
  Walker w(f);
  w.visit(f.body);
  std::vector<float> out(kLoweredFeatures, 0.0f);

  // Loops around the hottest innermost loop, innermost first.
  int hot = hottest_innermost(w.loops);
  int slot = 0;
  for (int id = hot; id >= 0 && slot < kLoopSlots; id = w.loops[id].parent, ++slot) {
    const LoopRec& l = w.loops[id];
    float* p = &out[kLoopOffset + slot * kLoopFeatures];
    p[0] = lg(static_cast<double>(l.extent));
    p[1 + static_cast<int>(l.kind)] = 1.0f;
    p[5] = static_cast<float>(l.depth);
    p[6] = lg(l.trip);
    p[7] = lg(static_cast<double>(l.stores));
  }

  // Buffers, most bytes touched first.
  std::vector<BufferSummary> bufs = summarize_buffers(w);
  auto bytes = [&](const BufferSummary& s, double elems) {
    return elems * w.buffers[s.id].node->dtype.bytes();
  };
  std::vector<BufferSummary> order;
  double total_bytes = 0;
  for (const auto& s : bufs) {
    if (!s.main) continue;  // an argument the kernel never touches
    order.push_back(s);
    total_bytes += bytes(s, s.distinct);
  }
  std::stable_sort(order.begin(), order.end(), [&](const BufferSummary& a, const BufferSummary& b) {
    double ba = bytes(a, a.distinct), bb = bytes(b, b.distinct);
    if (ba != bb) return ba > bb;
    return a.elem_accesses > b.elem_accesses;
  });
  for (int i = 0; i < kBufferSlots && i < static_cast<int>(order.size()); ++i) {
    const BufferSummary& s = order[i];
    float* p = &out[kBufferOffset + i * kBufferFeatures];
    p[0] = s.read;
    p[1] = s.write;
    p[2] = lg(bytes(s, s.distinct));
    p[3] = lg(s.elem_accesses);
    p[4] = lg(s.distinct > 0 ? s.elem_accesses / s.distinct : 0);
    p[5] = lg(std::fabs(static_cast<double>(s.main->lane_stride)));
    p[6] = lg(std::fabs(s.main->inner_stride));
    p[7] = lg(bytes(s, s.per_outer));
    p[8] = lg(bytes(s, s.inner));
    p[9] = w.buffers[s.id].node->scope == ir::MemScope::Local;
    p[10] = static_cast<float>(std::log2(static_cast<double>(std::max(1, s.main->lanes))));
  }

  for (int i = 0; i < kArithFeatures; ++i) out[kArithOffset + i] = lg(w.arith[i]);

  float* k = &out[kKernelOffset];
  k[0] = static_cast<float>(w.widest_store);
  k[1] = static_cast<float>(hot >= 0 ? w.loops[hot].max_store_lanes : w.widest_store);
  k[2] = lg(w.max_parallel_extent);
  k[3] = static_cast<float>(w.parallel_loops);
  k[4] = lg(static_cast<double>(w.loops.size()));
  k[5] = static_cast<float>(w.max_depth);
  k[6] = lg(static_cast<double>(w.static_stores));
  k[7] = lg(w.local_bytes);
  k[8] = lg(w.global_bytes);
  k[9] = lg(hot >= 0 ? w.loops[hot].trip : 0);
  k[10] = lg(total_bytes > 0 ? w.arith[kFloatAll] / total_bytes : 0);
  k[11] = lg(w.guards);
  return out;
}

std::vector<float> knob_features(const schedule::Config& cfg) {
  std::vector<float> out(kKnobFeatures, 0.0f);
  const std::vector<int64_t>& choices = cfg.choice_indices();
  if (choices.empty()) return out;
  // ordered_json keeps the knobs in definition order, matching choices.
  auto root = nlohmann::ordered_json::parse(cfg.to_json());
  int slot = 0;
  for (const auto& [name, value] : root.at("knobs").items()) {
    if (slot >= kKnobSlots) break;
    float* p = &out[slot * kKnobSlotFeatures];
    auto put = [&](int i, const nlohmann::ordered_json& v) {
      double x = 0;
      if (v.is_number()) {
        x = v.get<double>();
      } else if (v.is_string()) {
        const std::string s = v.get<std::string>();
        x = s == "unroll" ? 1 : s == "vec" ? 2 : 0;
      }
      p[i] = lg(std::fabs(x));
    };
    if (value.is_array()) {
      for (int i = 0; i < 4 && i < static_cast<int>(value.size()); ++i) put(i, value[i]);
    } else {
      put(0, value);
    }
    p[4] = lg(static_cast<double>(choices[slot]));
    ++slot;
  }
  return out;
}

std::vector<float> combined_features(const ir::LoweredFunc& f, const schedule::Config& cfg) {
  std::vector<float> out = extract_features(f);
  std::vector<float> knobs = knob_features(cfg);
  out.insert(out.end(), knobs.begin(), knobs.end());
  return out;
}

std::vector<std::string> feature_names() {
  std::vector<std::string> names;
  const char* loop[kLoopFeatures] = {"extent",   "serial", "parallel", "vectorized",
                                     "unrolled", "depth",  "trip",     "stores"};
  for (int s = 0; s < kLoopSlots; ++s)
    for (const char* n : loop) names.push_back("loop" + std::to_string(s) + "." + n);
  const char* buf[kBufferFeatures] = {"read",        "write",       "bytes",        "accesses",
                                      "reuse",       "lane_stride", "inner_stride", "outer_bytes",
                                      "inner_bytes", "local",       "lanes"};
  for (int s = 0; s < kBufferSlots; ++s)
    for (const char* n : buf) names.push_back("buf" + std::to_string(s) + "." + n);
  const char* arith[kArithFeatures] = {"fadd",   "fmul",  "fma",        "fdiv",        "fminmax",
                                       "int",    "logic", "intrin",     "cast",        "loads",
                                       "stores", "flops", "vector_ops", "scalar_flops"};
  for (const char* n : arith) names.push_back(std::string("arith.") + n);
  const char* kern[kKernelFeatures] = {
      "widest_store", "hot_lanes",   "parallel_extent", "parallel_loops", "loops",     "max_depth",
      "store_stmts",  "local_bytes", "global_bytes",    "hot_trip",       "intensity", "guards"};
  for (const char* n : kern) names.push_back(std::string("kernel.") + n);
  for (int s = 0; s < kKnobSlots; ++s) {
    for (int i = 0; i < 4; ++i)
      names.push_back("knob" + std::to_string(s) + ".v" + std::to_string(i));
    names.push_back("knob" + std::to_string(s) + ".choice");
  }
  return names;
}

}  // namespace kiln::tuner
