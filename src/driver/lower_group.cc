#include "driver/lower_group.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "ir/functor.h"
#include "ir/simplify.h"
#include "ops/generic_schedule.h"
#include "ops/op_template.h"
#include "schedule/lower.h"

namespace kiln::driver {
namespace {

using graph::Graph;
using graph::Node;

using graph::op_util::shape_exprs;

const graph::TensorType& type_or_throw(const Graph& g, const std::string& value) {
  const graph::TensorType* t = g.type_of(value);
  if (!t) throw std::runtime_error("value '" + value + "' has no inferred type");
  return *t;
}

using graph::is_constant_input;
using graph::is_type_only_input;

ir::Tensor copy_of(const ir::Tensor& t, const std::string& name) {
  return ir::compute(
      t->shape,
      [&](const std::vector<ir::Var>& i) {
        return ir::read(t, std::vector<ir::Expr>(i.begin(), i.end()));
      },
      name);
}

// A kernel output must be a computed stage of its own: an operator whose
// compute returned an input tensor unchanged (Identity) gets a copy.
ir::Tensor ensure_computed(const ir::Tensor& t, const std::string& name) {
  return t->is_placeholder ? copy_of(t, name) : t;
}

}  // namespace

double estimate_flops(const std::vector<ir::Tensor>& outputs) {
  double flops = 0;
  for (const ir::Tensor& t : ir::post_order(outputs)) {
    if (t->is_placeholder) continue;
    double n = 1;
    for (auto& d : t->shape)
      if (const int64_t* v = ir::as_const_int(d)) n *= static_cast<double>(*v);
    for (auto& r : t->reduce_axis)
      if (const int64_t* v = ir::as_const_int(r->dom.extent)) n *= 2.0 * static_cast<double>(*v);
    flops += n;
  }
  return flops;
}

namespace {

int64_t to_int(const ir::Expr& e) {
  const int64_t* v = ir::as_const_int(e);
  if (!v) throw std::runtime_error("kernel shapes must be constant");
  return *v;
}

// t read with the indices of another shape of the same element count (a
// reshape that costs nothing once inlined). When the shapes differ only by
// dimensions of size 1 (batch 1: [1, 128, N] against [128, N]) indices map
// one to one; otherwise through the flat offset, which bound inference
// tracks less precisely.
ir::Tensor reshape_view(const ir::Tensor& t, const std::vector<ir::Expr>& shape,
                        const std::string& name) {
  auto non_unit = [](const std::vector<ir::Expr>& s) {
    std::vector<size_t> dims;
    for (size_t d = 0; d < s.size(); ++d)
      if (to_int(s[d]) != 1) dims.push_back(d);
    return dims;
  };
  std::vector<size_t> from = non_unit(shape), to = non_unit(t->shape);
  bool one_to_one = from.size() == to.size();
  for (size_t i = 0; one_to_one && i < from.size(); ++i)
    one_to_one = to_int(shape[from[i]]) == to_int(t->shape[to[i]]);
  return ir::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> idx(t->shape.size(), ir::Expr(int64_t{0}));
        if (one_to_one) {
          for (size_t k = 0; k < from.size(); ++k) idx[to[k]] = i[from[k]];
          return ir::read(t, idx);
        }
        ir::Expr flat = ir::Expr(int64_t{0});
        for (size_t d = 0; d < i.size(); ++d) flat = flat * shape[d] + i[d];
        for (size_t d = t->shape.size(); d-- > 0;) {
          idx[d] = d == 0 ? flat : ir::floormod(flat, t->shape[d]);
          flat = ir::floordiv(flat, t->shape[d]);
        }
        return ir::read(t, idx);
      },
      name);
}

// Whether two shapes of one element count differ only by dimensions of size
// one (then a reshape between them maps indices one to one).
bool unit_dims_apart(const std::vector<ir::Expr>& a, const std::vector<ir::Expr>& b) {
  auto non_unit = [](const std::vector<ir::Expr>& s) {
    std::vector<int64_t> dims;
    for (const ir::Expr& d : s)
      if (to_int(d) != 1) dims.push_back(to_int(d));
    return dims;
  };
  return non_unit(a) == non_unit(b);
}

bool same_shape(const std::vector<ir::Expr>& a, const std::vector<ir::Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (to_int(a[i]) != to_int(b[i])) return false;
  return true;
}

// Composes a group's tensor expression node by node.
struct GroupBuilder {
  const Graph& g;
  const graph::FusedGroup& group;
  GroupKernel k;
  std::map<std::string, ir::Tensor> tensors;  // value -> TE tensor
  std::vector<ir::Tensor> arg_tensors;
  // Set for an epilogue computed in a template's flat output space (see
  // lower_group_template): the graph's shape of the anchor's value and the
  // template's own [rows, N] shape it is computed in.
  std::vector<int64_t> flat_from, flat_to;
  std::deque<graph::Initializer> flat_constants;  // constants re-shaped for the flat space

  void bind_argument(const std::string& value, const ir::Tensor& t) {
    tensors[value] = t;
    arg_tensors.push_back(t);
    k.args.push_back(value);
  }

  // Whether input i of n is read from the graph's constants at build time
  // and never becomes a kernel argument.
  bool read_as_constant(const graph::OpDef& def, const Node& n, size_t i) const {
    if (!is_constant_input(def, i)) return false;
    if (n.inputs[i].empty() || g.initializers.count(n.inputs[i])) return true;
    // Fed at run time where the operator wants a build-time constant: a
    // compute that ignored it would silently compute something else.
    if (!def.constant_inputs_may_vary)
      throw graph::OpError("node '" + n.name + "' (" + n.op_type + "): input " + std::to_string(i) +
                           " ('" + n.inputs[i] +
                           "') must be a constant at build time, but it is computed at run time");
    return false;
  }

  // A value read from outside the group becomes a kernel argument unless
  // every node reading it wants it as a build-time constant.
  bool needs_argument(const std::string& value) const {
    for (size_t ni : group.nodes) {
      const Node& n = g.nodes[ni];
      const graph::OpDef& def = graph::get_op(n.op_type);
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i] == value && !read_as_constant(def, n, i) && !is_type_only_input(def, i))
          return true;
    }
    return false;
  }

  void bind_external_inputs() {
    for (const std::string& value : group.inputs) {
      if (tensors.count(value) || !needs_argument(value)) continue;
      const graph::TensorType& t = type_or_throw(g, value);
      bind_argument(value, ir::placeholder(shape_exprs(t.shape), ir::DataType::parse(t.dtype),
                                           "arg" + std::to_string(arg_tensors.size())));
      if (!flat_from.empty()) tensors[value] = flat_view(tensors[value]);
    }
  }

  // The shape a value of `shape` has in the flat space: the full shape
  // becomes [rows, N], a trailing broadcast [1, ..., 1, n] becomes [n].
  std::vector<int64_t> flat_shape(const std::vector<int64_t>& shape) const {
    if (shape == flat_from) return flat_to;
    if (shape.empty()) return shape;
    return {shape.back()};
  }

  // A kernel argument read in the flat space (a placeholder: its div/mod
  // index arithmetic costs bound inference nothing).
  ir::Tensor flat_view(const ir::Tensor& t) {
    std::vector<int64_t> shape;
    for (const ir::Expr& d : t->shape) shape.push_back(to_int(d));
    std::vector<int64_t> flat = flat_shape(shape);
    return flat == shape ? t : reshape_view(t, shape_exprs(flat), "flat_view");
  }

  const graph::Initializer* flat_constant(const graph::Initializer* c) {
    if (!c || flat_from.empty()) return c;
    std::vector<int64_t> flat = flat_shape(c->type.shape);
    if (flat == c->type.shape) return c;
    flat_constants.push_back(*c);
    flat_constants.back().type.shape = flat;
    return &flat_constants.back();
  }

  void compute_node(const Node& n) {
    const graph::OpDef& def = graph::get_op(n.op_type);
    if (!def.compute)
      throw std::runtime_error("node '" + n.name + "' (" + n.op_type +
                               ") has no kernel: its inputs were expected to be constants");
    graph::ComputeInputs in;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& v = n.inputs[i];
      auto init = g.initializers.find(v);
      in.constants.push_back(
          flat_constant(!v.empty() && init != g.initializers.end() ? &init->second : nullptr));
      bool omitted = v.empty() || read_as_constant(def, n, i);
      if (!v.empty() && is_type_only_input(def, i) && !tensors.count(v)) {
        // Read for its type only: a placeholder that never becomes an argument.
        const graph::TensorType& t = type_or_throw(g, v);
        in.tensors.push_back(
            ir::placeholder(shape_exprs(t.shape), ir::DataType::parse(t.dtype), "type_of_" + v));
        continue;
      }
      in.tensors.push_back(omitted ? nullptr : tensors.at(v));
    }
    std::vector<graph::TensorType> out_types;
    for (const std::string& o : n.outputs) {
      out_types.push_back(type_or_throw(g, o));
      if (!flat_from.empty()) out_types.back().shape = flat_shape(out_types.back().shape);
    }
    std::vector<ir::Tensor> outs;
    try {
      outs = def.compute(n, in, out_types);
    } catch (const std::exception& e) {
      throw std::runtime_error(graph::op_util::node_error_once(n, e.what()));
    }
    if (outs.size() != n.outputs.size())
      throw std::runtime_error("node '" + n.name + "' (" + n.op_type + "): compute returned " +
                               std::to_string(outs.size()) + " outputs for " +
                               std::to_string(n.outputs.size()));
    for (size_t i = 0; i < outs.size(); ++i) tensors[n.outputs[i]] = outs[i];
    k.op_types.push_back(n.op_type);
  }

  // Drops input arguments the computation never reads (an operator may
  // specialize on a constant, e.g. Pow by 2): lowering rejects unused ones.
  void drop_unread_inputs(const std::vector<ir::Tensor>& outputs) {
    std::vector<ir::Tensor> reachable = ir::post_order(outputs);
    std::vector<ir::Tensor> tensors_kept;
    std::vector<std::string> names_kept;
    for (size_t i = 0; i < arg_tensors.size(); ++i) {
      if (std::find(reachable.begin(), reachable.end(), arg_tensors[i]) == reachable.end())
        continue;
      tensors_kept.push_back(arg_tensors[i]);
      names_kept.push_back(k.args[i]);
    }
    arg_tensors = std::move(tensors_kept);
    k.args = std::move(names_kept);
  }

  std::vector<ir::Tensor> collect_outputs() {
    std::vector<ir::Tensor> outputs;
    for (const std::string& value : group.outputs) {
      ir::Tensor t = ensure_computed(tensors.at(value), "out" + std::to_string(outputs.size()));
      // The same tensor cannot be two outputs of one kernel.
      if (std::find(outputs.begin(), outputs.end(), t) != outputs.end())
        t = copy_of(t, "out" + std::to_string(outputs.size()));
      outputs.push_back(t);
    }
    return outputs;
  }
};

// Lowers sch into k.func within the compile-time budget, keeping what the
// budget did (kiln build --time-report says it).
void lower_within_budget(GroupKernel& k, const schedule::Schedule& sch,
                         const std::vector<ir::Tensor>& args, const std::string& func_name,
                         int64_t vector_lanes) {
  schedule::LowerOptions o;
  o.vector_bits = static_cast<int>(std::max<int64_t>(1, vector_lanes) * 32);
  schedule::LowerReport report;
  o.report = &report;
  k.func = schedule::lower(sch, args, func_name, o);
  k.code_size = report.code_size;
  k.code_size_before = report.code_size_before;
  k.demoted = report.demoted;
}

ir::Buffer buffer_of(const ir::Tensor& t) {
  return ir::make_buffer(t->name, t->dtype, t->shape, ir::MemScope::Global);
}

// A template that builds its own loops (OpTemplate::builds_own_loops), alone
// in its group: its inputs, then the group's output, which is its anchor.
GroupKernel lower_own_loops(GroupBuilder& b, const ops::OpTemplate& t, const ops::Workload& w,
                            const schedule::Config& cfg, const ops::TemplateInstance& inst,
                            const std::string& func_name) {
  const std::string& out_value = b.group.outputs.at(0);
  std::vector<ir::Buffer> args;
  for (const ir::Tensor& x : inst.inputs) args.push_back(buffer_of(x));
  args.push_back(buffer_of(inst.anchor));
  b.k.args.push_back(out_value);
  b.k.outputs.push_back(out_value);
  b.k.workload = w.key();
  b.k.flops = t.flops(w);
  b.k.func = ir::LoweredFunc{func_name, args, t.build_loops(w, cfg, args, nullptr)};
  return b.k;
}

// The epilogue of a template that builds its own loops, as each of its
// parallel tasks runs it (OpTemplate::TaskEpilogue). It is lowered once over
// the anchor's flat rows: the output's leading dims fused into one serial
// loop `row`, the last one split by the vector width and vectorized (what
// the generic schedule does to an injective stage, less its parallel loop:
// the template's task loop is the parallel one). Each task then gets a copy
// of it with the row loop cut to its rows [row0, row0 + rows) and the
// whole-output accumulator `acc` it was lowered against replaced by the
// task's own (rows x N from offset 0): the epilogue reads the rows the tiles
// have just stored, in L1/L2, and no [rows, N] accumulator exists.
struct RowEpilogue {
  ir::Stmt body;   // the lowered epilogue over every row
  ir::Var row;     // its row loop's variable
  ir::Buffer acc;  // the whole-output accumulator it reads (a lowering argument)
  int64_t total_rows = 0, N = 0;

  ir::Stmt operator()(const ir::Expr& row0, int64_t rows, const ir::Buffer& task_acc) const {
    class Retarget : public ir::IRMutator {
     public:
      Retarget(const RowEpilogue& e, const ir::Expr& row0, int64_t rows, const ir::Buffer& task_acc)
          : e_(e), row0_(row0), rows_(rows), task_acc_(task_acc) {}
      int loops = 0;

     protected:
      ir::Stmt mutate_for(const ir::Stmt& s, const ir::ForNode* op) override {
        if (op->var.get() != e_.row.get()) return ir::IRMutator::mutate_for(s, op);
        ++loops;
        ir::Var r("r", ir::DataType::i64());
        ir::Stmt body = ir::substitute(mutate(op->body), {{e_.row, row0_ + r}});
        return ir::make_for(r, ir::make_int(0), ir::make_int(rows_), ir::ForKind::Serial, body);
      }
      // acc[row * N + n] of the whole output is task_acc[(row - row0) * N + n].
      ir::Expr mutate_load(const ir::Expr& ex, const ir::LoadNode* op) override {
        ir::Expr i = mutate(op->index), p = mutate(op->predicate);
        if (op->buffer != e_.acc)
          return i.same_as(op->index) && p.same_as(op->predicate) ? ex : ir::load(op->buffer, i, p);
        ir::Expr shift = row0_ * ir::make_int(e_.N);
        if (const auto* ramp = i.as<ir::RampNode>())
          i = ir::ramp(ramp->base - shift, ramp->stride, ramp->lanes);
        else if (i.dtype().lanes > 1)
          i = i - ir::broadcast(shift, i.dtype().lanes);
        else
          i = i - shift;
        return ir::load(task_acc_, i, p);
      }

     private:
      const RowEpilogue& e_;
      ir::Expr row0_;
      int64_t rows_;
      ir::Buffer task_acc_;
    };
    // One row in all (a classifier's [1, N]): lowering dropped the loop of
    // extent 1 and the only task starts at row 0, so nothing needs moving.
    Retarget retarget(*this, total_rows == 1 ? ir::make_int(0) : row0, rows, task_acc);
    ir::Stmt s = retarget.mutate(body);
    if (retarget.loops == 0 && total_rows != 1)
      throw std::logic_error("the epilogue's row loop '" + row.name() +
                             "' is missing from its lowering");
    bool reads_whole_acc = false;
    ir::post_order_visit(s, [&](const ir::Expr& x) {
      if (const auto* l = x.as<ir::LoadNode>()) reads_whole_acc |= l->buffer == acc;
    });
    if (reads_whole_acc)
      throw std::logic_error("the epilogue still reads the whole-output accumulator");
    return ir::simplify(s);
  }
};

// The same with an epilogue (kiln.Requantize, Relu, a residual Add, a bias,
// ...): each of the template's parallel tasks writes its rows into an
// accumulator of its own and runs the epilogue on them right after its tile
// GEMM (RowEpilogue), as oneDNN's brgemm applies post-ops per block. The
// tile loops are not a schedule that an epilogue could be attached to, hence
// the hook (OpTemplate::TaskEpilogue) rather than compute_at.
GroupKernel lower_own_loops_with_epilogue(GroupBuilder& b, const ops::OpTemplate& t,
                                          const ops::Workload& w, const schedule::Config& cfg,
                                          const ops::TemplateInstance& inst, const ir::Tensor& acc,
                                          ir::Tensor out, const std::string& func_name,
                                          int64_t vector_lanes) {
  const std::string& anchor_name = b.g.nodes[static_cast<size_t>(b.group.anchor)].name;
  // The template's inputs are the first arguments; the epilogue reads the
  // others. (No fused node reads them: apply_templates' epilogues read the
  // accumulator, constants and other values.)
  const size_t n_inputs = inst.inputs.size();
  for (const ir::Tensor& x : ir::post_order({out}))
    if (std::find(inst.inputs.begin(), inst.inputs.end(), x) != inst.inputs.end())
      throw std::runtime_error("node '" + anchor_name + "': an epilogue fused after " + t.name() +
                               " reads the template's input '" + x->name + "'");
  if (out->is_placeholder) out = copy_of(out, "out");  // an epilogue of reshapes only
  std::vector<std::string> input_values(b.k.args.begin(), b.k.args.begin() + n_inputs);
  b.arg_tensors.erase(b.arg_tensors.begin(), b.arg_tensors.begin() + n_inputs);
  b.k.args.erase(b.k.args.begin(), b.k.args.begin() + n_inputs);
  b.drop_unread_inputs({out});
  std::vector<ir::Tensor> epilogue_args = b.arg_tensors;
  epilogue_args.push_back(acc);
  epilogue_args.push_back(out);
  GroupKernel& k = b.k;
  k.args.push_back(b.group.outputs.at(0));
  k.outputs.push_back(b.group.outputs.at(0));
  k.workload = w.key();
  k.flops = t.flops(w);

  // Every fused stage inlined into the output (fuse_ops fuses only
  // elementwise nodes after an anchor): a task computes its rows alone.
  schedule::Schedule sch = schedule::create_schedule({out});
  for (const schedule::Stage& s : sch.stages()) {
    if (s->is_placeholder() || s->is_output) continue;
    if (!s->op->reduce_axis.empty())
      throw std::runtime_error("node '" + anchor_name + "': the epilogue fused after " + t.name() +
                               " has a reduction ('" + s->op->name +
                               "'), which its tasks cannot compute on their rows");
    s->compute_inline();
  }
  schedule::Stage o = sch[out];
  const std::vector<ir::IterVar> axis = o->op->axis;
  if (!o->op->reduce_axis.empty() || axis.size() < 2)
    throw std::runtime_error("node '" + anchor_name + "': the epilogue fused after " + t.name() +
                             " must be elementwise on its [rows, N] output");
  std::vector<ir::IterVar> leading(axis.begin(), axis.end() - 1);
  RowEpilogue ep;
  ep.row = (leading.size() == 1 ? leading[0] : o->fuse(leading))->var;
  if (to_int(axis.back()->dom.extent) >= vector_lanes)
    o->vectorize(o->split(axis.back(), vector_lanes).second);
  lower_within_budget(k, sch, epilogue_args, func_name, vector_lanes);

  // The epilogue's arguments: [its inputs..., acc, out]; acc is replaced by
  // the tasks' own accumulators, the template's inputs come first.
  std::vector<ir::Buffer> eargs = k.func.args;
  ep.body = k.func.body;
  ep.acc = eargs.at(eargs.size() - 2);
  ep.N = to_int(acc->shape.back());
  ep.total_rows = 1;
  for (size_t d = 0; d + 1 < acc->shape.size(); ++d) ep.total_rows *= to_int(acc->shape[d]);
  std::vector<ir::Buffer> args;
  for (const ir::Tensor& x : inst.inputs) args.push_back(buffer_of(x));
  ir::Stmt body = t.build_loops(w, cfg, args, ep);
  args.insert(args.end(), eargs.begin(), eargs.end() - 2);
  args.push_back(eargs.back());
  k.func = ir::LoweredFunc{func_name, args, body};
  k.args.insert(k.args.begin(), input_values.begin(), input_values.end());
  return k;
}

GroupKernel lower_group_template(const Graph& g, const graph::FusedGroup& group,
                                 const std::string& func_name, int64_t vector_lanes,
                                 const graph::ParallelSplit& split) {
  const Node& anchor = g.nodes[static_cast<size_t>(group.anchor)];
  const ops::OpTemplate& t = ops::get_template(*anchor.attr<std::string>("template"));
  ops::Workload w = ops::Workload::parse(*anchor.attr<std::string>("workload"));
  schedule::Config cfg =
      schedule::Config::from_json(t.space(w), *anchor.attr<std::string>("config"));
  ops::TemplateInstance inst = t.compute(w, cfg);
  if (split.rows) inst.facts[ops::kSplitRows] = 1;
  if (split.input_rows) inst.facts[ops::kInputSplitRows] = 1;

  GroupBuilder b{g, group, {}, {}, {}};
  // Template inputs take the graph values' memory as is (same element count,
  // possibly another shape: a free reshape).
  for (size_t i = 0; i < anchor.inputs.size(); ++i)
    b.bind_argument(anchor.inputs[i], inst.inputs.at(i));
  const graph::TensorType& yt = type_or_throw(g, anchor.outputs.at(0));
  std::vector<ir::Expr> graph_shape = shape_exprs(yt.shape);
  // The anchor alone writes its own shape into the graph value's memory (a
  // free reshape): a view there and back would hide from bound inference
  // that the register tile is a tile, not the whole output.
  // An epilogue behind a reshape that is more than unit dims (a dense on a
  // [B, S, C] activation writes [B*S, N]) is computed in the template's flat
  // space: reading the anchor through div/mod index arithmetic would hide
  // the register tile from bound inference. fuse_ops only fuses epilogues
  // whose inputs can be read there (graph::flat_epilogue_input).
  const bool anchor_only = group.nodes.size() == 1;
  const bool flat = !anchor_only && !same_shape(graph_shape, inst.anchor->shape) &&
                    !unit_dims_apart(graph_shape, inst.anchor->shape);
  if (flat) {
    b.flat_from = yt.shape;
    for (const ir::Expr& d : inst.anchor->shape) b.flat_to.push_back(to_int(d));
  }
  // A template that builds its own loops (tile instructions: AMX) writes its
  // anchor into accumulators of its own, one per task; the epilogue is
  // written against a placeholder `acc` of the whole anchor that each task
  // then swaps for its own (RowEpilogue).
  const bool own_loops = t.builds_own_loops();
  if (own_loops && anchor_only) {
    b.k.op_types.push_back(t.name());
    return lower_own_loops(b, t, w, cfg, inst, func_name);
  }
  ir::Tensor acc =
      own_loops ? ir::placeholder(inst.anchor->shape, inst.anchor->dtype, "acc") : inst.anchor;
  b.tensors[anchor.outputs[0]] = anchor_only || flat || same_shape(graph_shape, inst.anchor->shape)
                                     ? acc
                                     : reshape_view(acc, graph_shape, "anchor_view");
  b.k.op_types.push_back(t.name());
  b.bind_external_inputs();
  for (size_t ni : group.nodes)
    if (static_cast<int64_t>(ni) != group.anchor) b.compute_node(g.nodes[ni]);

  if (group.outputs.size() != 1)
    throw std::runtime_error("node '" + anchor.name + "': a template group has one output");
  ir::Tensor out = b.tensors.at(group.outputs[0]);
  if (out != inst.anchor && !same_shape(out->shape, inst.anchor->shape))
    out = reshape_view(out, inst.anchor->shape, "out_view");
  if (own_loops)
    return lower_own_loops_with_epilogue(b, t, w, cfg, inst, acc, out, func_name, vector_lanes);
  b.drop_unread_inputs({out});
  b.arg_tensors.push_back(out);
  b.k.args.push_back(group.outputs[0]);
  b.k.outputs.push_back(group.outputs[0]);

  schedule::Schedule sch = schedule::create_schedule({out});
  t.schedule(sch, inst, out, cfg);
  b.k.workload = w.key();
  b.k.flops = t.flops(w);
  lower_within_budget(b.k, sch, b.arg_tensors, func_name, vector_lanes);
  return b.k;
}

}  // namespace

GroupKernel lower_group_generic(const Graph& g, const graph::FusedGroup& group,
                                const std::string& func_name, int64_t vector_lanes,
                                const graph::ParallelSplit& split) {
  GroupBuilder b{g, group, {}, {}, {}};
  b.bind_external_inputs();
  for (size_t ni : group.nodes) b.compute_node(g.nodes[ni]);
  std::vector<ir::Tensor> outputs = b.collect_outputs();
  b.drop_unread_inputs(outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    b.arg_tensors.push_back(outputs[i]);
    b.k.args.push_back(group.outputs[i]);
    b.k.outputs.push_back(group.outputs[i]);
  }
  b.k.flops = estimate_flops(outputs);
  schedule::Schedule sch = ops::schedule_generic(outputs, vector_lanes, split.rows);
  lower_within_budget(b.k, sch, b.arg_tensors, func_name, vector_lanes);
  return b.k;
}

GroupKernel lower_group(const Graph& g, const graph::FusedGroup& group,
                        const std::string& func_name, int64_t vector_lanes,
                        const graph::ParallelSplit& split) {
  if (group.anchor >= 0 && g.nodes[static_cast<size_t>(group.anchor)].op_type == "kiln.Template")
    return lower_group_template(g, group, func_name, vector_lanes, split);
  return lower_group_generic(g, group, func_name, vector_lanes, split);
}

}  // namespace kiln::driver
