// Schedules: how the computations of a tensor expression become loops.
//
// A Schedule holds one Stage per computation. A stage starts with one loop per
// axis of its tensor (its root iteration variables, reduce axes last) and is
// reshaped by primitives (split, fuse, reorder, ...) into its leaf iteration
// variables, one loop each, outermost first. As in TVM, primitives record
// relations between iteration variables; lowering derives the loop nest and
// the index arithmetic from them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace kiln::schedule {

using ir::Expr;
using ir::IterVar;
using ir::MemScope;
using ir::Tensor;

enum class IterAnnotation { None, Parallel, Vectorize, Unroll, KeepRolled };

// parent = outer * factor + inner (Split), or fused = outer * |inner| + inner (Fuse).
struct IterRelation {
  enum Kind { Split, Fuse } kind;
  IterVar parent, outer, inner, fused;
  int64_t factor = 0;  // Split by factor (inner extent)
  int64_t nparts = 0;  // Split by number of parts (outer extent)
};

enum class AttachKind { Root, Inline, At };

struct StageNode;
using Stage = std::shared_ptr<StageNode>;

struct StageNode {
  Tensor origin;  // the tensor readers refer to (stable handle of this stage)
  Tensor op;      // its current definition (cache_write/cache_read may rewrite it)
  std::vector<IterVar> root_iter_vars;  // op->axis then op->reduce_axis
  std::vector<IterVar> leaf_iter_vars;
  std::vector<IterRelation> relations;
  std::map<const ir::IterVarNode*, IterAnnotation> annotations;
  AttachKind attach = AttachKind::Root;
  std::weak_ptr<StageNode> attach_stage;
  IterVar attach_ivar;
  bool is_output = false;
  bool scope_set = false;  // scope chosen explicitly (cache_write/cache_read/set_scope)
  MemScope scope = MemScope::Global;

  bool is_placeholder() const { return op->is_placeholder; }

  // ---- loop-shaping primitives (each checks that its iteration variables
  // are current leaves of this stage and throws std::invalid_argument if not)
  std::pair<IterVar, IterVar> split(const IterVar& iv, int64_t factor);
  std::pair<IterVar, IterVar> split_nparts(const IterVar& iv, int64_t nparts);
  // Splits x and y; returns {x.outer, y.outer, x.inner, y.inner} in that loop order.
  std::vector<IterVar> tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy);
  // Puts the given leaves, in this order, in the positions they occupy now.
  void reorder(const std::vector<IterVar>& order);
  // Fuses two adjacent leaves (outer directly before inner) into one.
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  IterVar fuse(const std::vector<IterVar>& adjacent);
  void vectorize(const IterVar& iv);
  void unroll(const IterVar& iv);
  // A serial loop that the code generator asks LLVM not to unroll.
  void keep_rolled(const IterVar& iv);
  void parallel(const IterVar& iv);
  // Computes this stage inside `parent`'s loop `ivar`, for the region that
  // iteration needs.
  void compute_at(const Stage& parent, const IterVar& ivar);
  // Substitutes this stage's definition into its readers; it gets no loops.
  void compute_inline();
  void compute_root();
  void set_scope(MemScope s);

  // Axis d of the current definition (root iteration variable).
  const IterVar& axis(size_t d) const;
  const IterVar& reduce_axis(size_t d) const;

 private:
  size_t leaf_position(const IterVar& iv) const;
};

class Schedule {
 public:
  explicit Schedule(std::vector<Tensor> outputs);

  // The stage of a tensor, as handed out by compute/placeholder or returned by
  // cache_write/cache_read.
  Stage operator[](const Tensor& t) const;
  const std::vector<Stage>& stages() const { return stages_; }  // producers first
  const std::vector<Tensor>& outputs() const { return outputs_; }

  // Computes t into a new stage `t.<scope>` and makes t's stage copy it out.
  // Must come before other primitives on t's stage. Returns the new tensor.
  Tensor cache_write(const Tensor& t, MemScope scope);
  // A new stage copying t, read by `readers` instead of t. Returns it.
  Tensor cache_read(const Tensor& t, MemScope scope, const std::vector<Tensor>& readers);

  // Stages whose definitions read `t` (by origin).
  std::vector<Stage> readers_of(const Tensor& t) const;

 private:
  Stage add_stage(const Tensor& origin, const Tensor& op, size_t position);
  std::vector<Tensor> outputs_;
  std::vector<Stage> stages_;
  std::map<const ir::TensorNode*, Stage> by_tensor_;
};

// A schedule with every stage at its default: root, one serial loop per axis.
Schedule create_schedule(std::vector<Tensor> outputs);

}  // namespace kiln::schedule
