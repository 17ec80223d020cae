// fold_qdq: QDQ patterns -> QLinearConv / QLinearMatMul (see fold_qdq.h).
#include "graph/passes/fold_qdq.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

using op_util::attr_float;
using op_util::attr_int;
using Shape = std::vector<int64_t>;

bool is_q8(const std::string& dtype) { return dtype == "uint8" || dtype == "int8"; }

// The quantization of one DequantizeLinear input or QuantizeLinear output.
struct QTensor {
  std::string q;      // the quantized value (DQ's input, Q's output)
  std::string scale;  // a constant
  std::string zp;     // a constant, or "" when omitted
  int64_t axis = -1;  // the channel axis of a per-channel scale, -1 per tensor
};

class Folder {
 public:
  explicit Folder(Graph& g) : g_(g), consumers_(consumers_of(g)), producers_(producers_of(g)) {
    for (const Node& n : g.nodes) node_names_.insert(n.name);
  }

  int run() {
    removed_.assign(g_.nodes.size(), false);
    int count = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const std::string& op = g_.nodes[i].op_type;
      if (removed_[i]) continue;
      if (op == "MaxPool" ? fold_max_pool(i)
                          : (op == "Conv" || op == "MatMul" || op == "Gemm") && fold(i))
        ++count;
    }
    erase_nodes(g_, removed_);
    return count;
  }

 private:
  const Node* producer(const std::string& value) const {
    auto it = producers_.find(value);
    return it == producers_.end() ? nullptr : &g_.nodes[it->second];
  }

  // The one node that reads `value`, when nothing else (graph outputs
  // included) does.
  std::optional<size_t> sole_consumer(const std::string& value) const {
    auto it = consumers_.find(value);
    if (it == consumers_.end() || it->second.size() != 1 || is_graph_output(g_, value))
      return std::nullopt;
    return it->second[0];
  }

  // The value of `v`: an initializer, or a small value computed from
  // initializers only by nodes other than Q/DQ, evaluated here (PyTorch's
  // exporter writes zero points as Cast(ConstantOfShape)); nullptr otherwise.
  // fold_constants would fold those later, but it would fold the weights'
  // DequantizeLinear too, so this pass runs before it.
  const Initializer* constant(const std::string& v, int depth = 0) const {
    if (v.empty()) return nullptr;
    if (const Initializer* c = constant_of(g_, v)) return c;
    if (auto it = evaluated_.find(v); it != evaluated_.end()) return &it->second;
    const Node* n = producer(v);
    const TensorType* t = g_.type_of(v);
    if (!n || !t || depth > 4 || t->num_elements() > (int64_t{1} << 16) ||
        n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear" || !n->domain.empty())
      return nullptr;
    const OpDef* def = find_op(n->op_type);
    if (!def || !def->evaluate) return nullptr;
    std::vector<const Initializer*> args;
    for (const std::string& in : n->inputs) {
      if (in.empty()) {
        args.push_back(nullptr);
        continue;
      }
      const Initializer* c = constant(in, depth + 1);
      if (!c) return nullptr;
      args.push_back(c);
    }
    std::vector<Initializer> outs;
    try {
      outs = def->evaluate(*n, args);
    } catch (const std::exception&) {
      return nullptr;  // left to the passes that report it
    }
    for (size_t i = 0; i < outs.size() && i < n->outputs.size(); ++i)
      if (!n->outputs[i].empty()) evaluated_[n->outputs[i]] = std::move(outs[i]);
    auto it = evaluated_.find(v);
    return it == evaluated_.end() ? nullptr : &it->second;
  }

  // A name for constant(v) that a new node can read: v itself when it is an
  // initializer, else a new initializer holding the evaluated value.
  std::string materialize(const std::string& v) {
    if (v.empty() || constant_of(g_, v)) return v;
    auto it = materialized_.find(v);
    if (it != materialized_.end()) return it->second;
    std::string name = unique_value_name(g_, v + "/value");
    set_initializer(g_, name, *constant(v));
    materialized_[v] = name;
    return name;
  }

  // A DQ/Q node's constant parameters: per tensor, or (allow_axis) 1-D per channel.
  std::optional<QTensor> params(const Node& n, const Shape& shape, bool allow_axis) const {
    QTensor t;
    t.scale = n.inputs.size() > 1 ? n.inputs[1] : "";
    t.zp = n.inputs.size() > 2 ? n.inputs[2] : "";
    const Initializer* s = constant(t.scale);
    if (!s || s->type.dtype != "float32") return std::nullopt;
    if (!t.zp.empty() && !constant(t.zp)) return std::nullopt;
    if (s->type.num_elements() != 1) {
      if (!allow_axis || s->type.shape.size() != 1 || shape.empty()) return std::nullopt;
      int64_t rank = static_cast<int64_t>(shape.size());
      int64_t axis = attr_int(n, "axis", 1);
      if (axis < -rank || axis >= rank) return std::nullopt;
      t.axis = axis < 0 ? axis + rank : axis;
    }
    return t;
  }

  // DQ(x_q) feeding `value`: x_q uint8/int8 with per-tensor parameters.
  std::optional<QTensor> dq_activation(const std::string& value) const {
    const Node* dq = producer(value);
    if (!dq || dq->op_type != "DequantizeLinear" || dq->inputs.empty()) return std::nullopt;
    const TensorType* t = g_.type_of(dq->inputs[0]);
    if (!t || !is_q8(t->dtype)) return std::nullopt;
    std::optional<QTensor> q = params(*dq, t->shape, false);
    if (q) q->q = dq->inputs[0];
    return q;
  }

  // DQ(w_q) feeding `value`, w_q a uint8/int8 constant (or Q of a float
  // constant, quantized here), per tensor or per channel along `axis`.
  std::optional<QTensor> dq_weight(const std::string& value, int64_t axis) {
    const Node* dq = producer(value);
    if (!dq || dq->op_type != "DequantizeLinear" || dq->inputs.empty()) return std::nullopt;
    std::string wq = dq->inputs[0];
    if (!constant(wq)) {
      const Node* q = producer(wq);
      if (!q || q->op_type != "QuantizeLinear" || !constant(q->inputs[0])) return std::nullopt;
      for (size_t k = 1; k < q->inputs.size(); ++k)
        if (!q->inputs[k].empty() && !constant(q->inputs[k])) return std::nullopt;
      std::vector<const Initializer*> args;
      for (const std::string& in : q->inputs) args.push_back(constant(in));
      Initializer v = get_op("QuantizeLinear").evaluate(*q, args).at(0);
      wq = unique_value_name(g_, q->outputs[0] + "/folded");
      set_initializer(g_, wq, std::move(v));
    }
    const Initializer* w = constant(wq);
    if (!is_q8(w->type.dtype)) return std::nullopt;
    std::optional<QTensor> q = params(*dq, w->type.shape, true);
    if (!q || (q->axis >= 0 && q->axis != axis)) return std::nullopt;
    if (q->zp.size() && constant(q->zp)->type.dtype != w->type.dtype) return std::nullopt;
    q->q = wq;
    return q;
  }

  // The scale at channel c (per tensor: the one value).
  static float scale_at(const Initializer& s, int64_t c) {
    std::vector<float> v = s.as<float>();
    return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
  }

  // Whether `shape` holds one value per channel of m: [m], or [1, .., 1, m]
  // (a bias that an Add or a Gemm broadcasts over the rows).
  static bool is_channel_vector(const Shape& shape, int64_t m) {
    if (shape.empty() || shape.back() != m) return false;
    for (size_t i = 0; i + 1 < shape.size(); ++i)
      if (shape[i] != 1) return false;
    return true;
  }

  // `v` (an int32 constant of m values) as a 1-D [m] initializer.
  std::string as_vector(const std::string& v, int64_t m) {
    const Initializer& c = *constant(v);
    if (c.type.shape == Shape{m} && constant_of(g_, v)) return v;
    Initializer t = c;
    t.type.shape = {m};
    std::string name = unique_value_name(g_, v + "/vector");
    set_initializer(g_, name, std::move(t));
    return name;
  }

  // DQ(b_i32) with zero point 0 and scale x_scale * w_scale[c]: the int32
  // constant, else "".
  std::string dq_bias(const std::string& value, const QTensor& x, const QTensor& w, int64_t m) {
    const Node* dq = producer(value);
    if (!dq || dq->op_type != "DequantizeLinear" || dq->inputs.size() < 2) return "";
    const Initializer* b = constant(dq->inputs[0]);
    const Initializer* bs = constant(dq->inputs[1]);
    if (!b || !bs || b->type.dtype != "int32" || !is_channel_vector(b->type.shape, m)) return "";
    if (bs->type.dtype != "float32" || (bs->type.num_elements() != 1 && bs->type.shape != Shape{m}))
      return "";
    if (dq->inputs.size() > 2 && !dq->inputs[2].empty()) {
      const Initializer* z = constant(dq->inputs[2]);
      if (!z || z->type.dtype != "int32") return "";
      for (int32_t v : z->as<int32_t>())
        if (v != 0) return "";
    }
    float xs = scale_at(*constant(x.scale), 0);
    const Initializer& ws = *constant(w.scale);
    for (int64_t c = 0; c < m; ++c) {
      float want = xs * scale_at(ws, c), got = scale_at(*bs, c);
      if (std::fabs(got - want) > 1e-6f * std::fabs(want)) return "";
    }
    return as_vector(dq->inputs[0], m);
  }

  // A float32 constant bias of m values (not produced by DQ: a Gemm's C or
  // the Add an exporter writes after MatMul for a Linear layer) quantized to
  // int32 at scale x_scale * w_scale[c], round half to even: the bias that
  // ONNX Runtime's quantizer writes as DQ(int32) for the same layer, so that
  // the whole layer stays integer. The rounding moves the pre-requantization
  // value by at most half a step of x_scale * w_scale[c], i.e. at most
  // M[c] / 2 output units (M[c] = x_scale * w_scale[c] / y_scale, well below
  // 1 for any layer of more than a few inputs). "" when a value does not fit
  // in int32 (the float path keeps it).
  std::string float_bias(const std::string& value, const QTensor& x, const QTensor& w, int64_t m) {
    const Initializer* b = constant(value);
    if (!b || b->type.dtype != "float32" || !is_channel_vector(b->type.shape, m)) return "";
    std::vector<float> bv = b->as<float>();
    float xs = scale_at(*constant(x.scale), 0);
    const Initializer& ws = *constant(w.scale);
    std::vector<int32_t> q(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) {
      float step = xs * scale_at(ws, c);  // float32, as the quantizers compute it
      double v = std::nearbyint(static_cast<double>(bv[static_cast<size_t>(c)]) / step);
      if (!std::isfinite(v) || v < -2147483648.0 || v > 2147483647.0) return "";
      q[static_cast<size_t>(c)] = static_cast<int32_t>(v);
    }
    Initializer t = op_util::make_tensor("int32", {m});
    std::copy(q.begin(), q.end(), reinterpret_cast<int32_t*>(t.data.data()));
    std::string name = unique_value_name(g_, value + "/int32");
    set_initializer(g_, name, std::move(t));
    return name;
  }

  // The bias `value` as an int32 [m] constant in units of x_scale *
  // w_scale[c]: DQ(int32) with that scale as it is, a float constant
  // quantized (float_bias); "" when it is neither.
  std::string int32_bias(const std::string& value, const QTensor& x, const QTensor& w, int64_t m) {
    std::string b = dq_bias(value, x, w, m);
    return b.empty() ? float_bias(value, x, w, m) : b;
  }

  // MatMul's output read only by Add(mm, c) or Add(c, mm) with c a bias of n
  // values that keeps mm's rank: c, else "" (`add` gets the Add's index).
  std::string add_bias_after(const Node& mm, int64_t n, size_t* add) const {
    std::optional<size_t> next = sole_consumer(mm.outputs[0]);
    if (!next) return "";
    const Node& a = g_.nodes[*next];
    if (a.op_type != "Add" || a.inputs.size() != 2 || a.outputs.size() != 1) return "";
    std::string c = a.inputs[0] == mm.outputs[0] ? a.inputs[1] : a.inputs[0];
    if (c == mm.outputs[0]) return "";
    const TensorType* ct = g_.type_of(c);
    const TensorType* yt = g_.type_of(mm.outputs[0]);
    if (!ct || !yt || ct->shape.size() > yt->shape.size() || !is_channel_vector(ct->shape, n))
      return "";
    *add = *next;
    return c;
  }

  // Q's output and parameters when `value` reaches a per-tensor Q through at
  // most one Relu/Clip that Q's saturation makes redundant; the nodes passed
  // go to *chain.
  std::optional<QTensor> q_after(const std::string& value, std::vector<size_t>* chain) const {
    std::optional<size_t> next = sole_consumer(value);
    if (!next) return std::nullopt;
    const Node* act = nullptr;
    if (g_.nodes[*next].op_type == "Relu" || g_.nodes[*next].op_type == "Clip") {
      act = &g_.nodes[*next];
      chain->push_back(*next);
      next = sole_consumer(act->outputs[0]);
      if (!next) return std::nullopt;
    }
    const Node& q = g_.nodes[*next];
    if (q.op_type != "QuantizeLinear" || q.inputs[0] != (act ? act->outputs[0] : value))
      return std::nullopt;
    const TensorType* t = g_.type_of(q.outputs[0]);
    if (!t) return std::nullopt;
    std::optional<QTensor> p = params(q, t->shape, false);
    if (!p) return std::nullopt;
    p->q = q.outputs[0];
    if (act && !saturation_covers(*act, q)) return std::nullopt;
    chain->push_back(*next);
    return p;
  }

  // Whether Q(act(v)) == Q(v) for every v: Q(lower bound) is Q's qmin and
  // Q(upper bound) its qmax (computed with Q's own arithmetic).
  bool saturation_covers(const Node& act, const Node& q) const {
    std::optional<double> lo, hi;
    if (act.op_type == "Relu") {
      lo = 0.0;
    } else {
      auto bound = [&](size_t i, const char* attr) -> std::optional<double> {
        if (auto a = act.attr<float>(attr)) return *a;
        if (i >= act.inputs.size() || act.inputs[i].empty()) return std::nullopt;
        const Initializer* c = constant(act.inputs[i]);
        if (!c || c->type.num_elements() != 1) return std::nullopt;
        return op_util::to_doubles(act, *c)[0];
      };
      lo = bound(1, "min");
      hi = bound(2, "max");
      bool lo_given = act.attrs.count("min") || (act.inputs.size() > 1 && !act.inputs[1].empty());
      bool hi_given = act.attrs.count("max") || (act.inputs.size() > 2 && !act.inputs[2].empty());
      if ((lo_given && !lo) || (hi_given && !hi)) return false;  // a bound that is not constant
    }
    auto quantize = [&](double v) {
      std::vector<const Initializer*> args;
      Initializer x = float_tensor({}, {static_cast<float>(v)});
      args.push_back(&x);
      for (size_t k = 1; k < q.inputs.size(); ++k) args.push_back(constant(q.inputs[k]));
      Initializer y = get_op("QuantizeLinear").evaluate(q, args).at(0);
      return op_util::to_doubles(q, y)[0];
    };
    std::string qt = g_.type_of(q.outputs[0])->dtype;
    double qmin = qt == "int8" ? -128 : 0, qmax = qt == "int8" ? 127 : 255;
    return (!lo || quantize(*lo) == qmin) && (!hi || quantize(*hi) == qmax);
  }

  // A zero point value of dtype `dtype` and `shape` (for omitted ones).
  std::string zero_point(const std::string& dtype, const Shape& shape) {
    std::string name = unique_value_name(g_, "qdq/zero_" + dtype);
    set_initializer(g_, name, op_util::make_tensor(dtype, shape));
    return name;
  }

  std::string zp_or_zero(const QTensor& t, const std::string& dtype) {
    if (!t.zp.empty()) return t.zp;
    return zero_point(dtype, constant(t.scale)->type.shape);
  }

  std::string node_name(const std::string& base) {
    std::string name = base;
    while (node_names_.count(name)) name += "_";
    node_names_.insert(name);
    return name;
  }

  bool fold(size_t i) {
    const Node& op = g_.nodes[i];
    const std::string& type = op.op_type;
    if (op.inputs.size() < 2 || op.outputs.size() != 1) return false;
    const TensorType* wt = g_.type_of(op.inputs[1]);
    const TensorType* xt = g_.type_of(op.inputs[0]);
    if (!wt || !xt) return false;
    bool trans_b = false;
    int64_t w_axis = 0;
    if (type == "Conv") {
      if (wt->shape.size() != 4) return false;
    } else if (type == "MatMul") {
      if (wt->shape.size() < 2 || xt->shape.size() < 2) return false;
      w_axis = 1;
    } else {  // Gemm: C is a bias (beta 1) of N values, broadcast over the rows
      if (attr_float(op, "alpha", 1.0f) != 1.0f || attr_int(op, "transA", 0) != 0) return false;
      if (op.inputs.size() > 2 && !op.inputs[2].empty() && attr_float(op, "beta", 1.0f) != 1.0f)
        return false;
      if (wt->shape.size() != 2) return false;
      trans_b = attr_int(op, "transB", 0) != 0;
      w_axis = trans_b ? 0 : 1;
    }
    std::optional<QTensor> x = dq_activation(op.inputs[0]);
    if (!x) return false;
    // A MatMul's right operand may be an activation too (attention's Q K^T
    // and P V): per tensor, no bias.
    std::optional<QTensor> w;
    if (wt->shape.size() == 2 || type != "MatMul") w = dq_weight(op.inputs[1], w_axis);
    bool b_activation = false;
    if (!w && type == "MatMul") {
      w = dq_activation(op.inputs[1]);
      b_activation = w.has_value();
    }
    if (!w) return false;
    int64_t channels = wt->shape[b_activation ? wt->shape.size() - 1 : static_cast<size_t>(w_axis)];
    // The bias: Conv's B (DQ(int32) only, as before), Gemm's C, or the
    // constant of an Add right after a MatMul (a Linear layer as exporters
    // write it for inputs of rank > 2); the Add then joins the pattern.
    std::string bias, result = op.outputs[0];
    std::vector<size_t> chain;
    if (type == "Conv" && op.inputs.size() > 2 && !op.inputs[2].empty()) {
      bias = dq_bias(op.inputs[2], *x, *w, channels);
      if (bias.empty()) return false;
    } else if (type == "Gemm" && op.inputs.size() > 2 && !op.inputs[2].empty()) {
      bias = int32_bias(op.inputs[2], *x, *w, channels);
      if (bias.empty()) return false;
    } else if (type == "MatMul" && !b_activation) {
      size_t add = 0;
      std::string c = add_bias_after(op, channels, &add);
      if (!c.empty()) {
        bias = int32_bias(c, *x, *w, channels);
        if (bias.empty()) return false;
        chain.push_back(add);
        result = g_.nodes[add].outputs[0];
      }
    }
    std::optional<QTensor> y = q_after(result, &chain);
    if (!y) return false;

    std::string x_dtype = g_.type_of(x->q)->dtype;
    std::string w_dtype = b_activation ? g_.type_of(w->q)->dtype : constant(w->q)->type.dtype;
    std::string y_dtype = g_.type_of(y->q)->dtype;
    std::string wq = w->q, ws = w->scale, wzp = zp_or_zero(*w, w_dtype);
    if (trans_b) transpose_weight(&wq);

    Node n;
    n.op_type = type == "Conv" ? "QLinearConv" : "QLinearMatMul";
    n.name = node_name(op.name + "/qlinear");
    n.inputs = {x->q, x->scale, zp_or_zero(*x, x_dtype), wq, ws,
                wzp,  y->scale, zp_or_zero(*y, y_dtype)};
    if (!bias.empty()) n.inputs.push_back(bias);
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (k != 3 || !b_activation) n.inputs[k] = materialize(n.inputs[k]);
    if (type == "Conv") n.attrs = op.attrs;
    n.outputs = {y->q};
    // The Q is the pattern's last node: the QLinear node takes its place so
    // that the graph stays topologically sorted.
    size_t last = chain.back();
    g_.nodes[last] = std::move(n);
    removed_[i] = true;
    for (size_t k : chain)
      if (k != last) removed_[k] = true;
    return true;
  }

  // DQ(x_q) -> MaxPool -> Q, Q's scale and zero point equal to DQ's (ORT's
  // quantizer gives a MaxPool's output its input's parameters), becomes
  // MaxPool(x_q) on the 8-bit values: exact, since DQ is increasing (scale >
  // 0), so max(DQ(x)) = DQ(max(x)), and Q(DQ(v)) = v. ResNet's stem then
  // writes uint8 from its convolution and pools a quarter of the bytes.
  bool fold_max_pool(size_t i) {
    const Node& pool = g_.nodes[i];
    if (pool.inputs.size() != 1 || pool.outputs.size() != 1) return false;
    std::optional<QTensor> x = dq_activation(pool.inputs[0]);
    std::optional<size_t> next = sole_consumer(pool.outputs[0]);
    if (!x || !next) return false;
    const Node& q = g_.nodes[*next];
    if (q.op_type != "QuantizeLinear" || q.inputs[0] != pool.outputs[0]) return false;
    const TensorType* xt = g_.type_of(x->q);
    const TensorType* yt = g_.type_of(q.outputs[0]);
    if (!xt || !yt || xt->dtype != yt->dtype) return false;
    std::optional<QTensor> y = params(q, yt->shape, false);
    if (!y || !same_parameters(q, *x, *y)) return false;
    Node n = pool;
    n.inputs = {x->q};
    n.outputs = {q.outputs[0]};
    g_.nodes[*next] = std::move(n);  // Q's place: the graph stays sorted
    removed_[i] = true;
    return true;
  }

  // Per-tensor parameters with the same positive scale and the same zero
  // point (an omitted one is 0); `q` names the node in errors.
  bool same_parameters(const Node& q, const QTensor& a, const QTensor& b) const {
    float sa = scale_at(*constant(a.scale), 0), sb = scale_at(*constant(b.scale), 0);
    auto zp = [&](const QTensor& t) {
      return t.zp.empty() ? 0.0 : op_util::to_doubles(q, *constant(t.zp))[0];
    };
    return sa > 0 && sa == sb && zp(a) == zp(b);
  }

  // A transB=1 Gemm weight [N, K] as QLinearMatMul's [K, N]; its per-channel
  // parameters then run along axis 1 (they are 1-D, unchanged).
  void transpose_weight(std::string* wq) {
    const Initializer& w = *constant(*wq);
    int64_t n = w.type.shape[0], k = w.type.shape[1];
    Initializer t = op_util::make_tensor(w.type.dtype, {k, n});
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)  // one byte per element (uint8 / int8)
        t.data[static_cast<size_t>(c * n + r)] = w.data[static_cast<size_t>(r * k + c)];
    std::string name = unique_value_name(g_, *wq + "/transposed");
    set_initializer(g_, name, std::move(t));
    *wq = name;
  }

  Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producers_;
  std::set<std::string> node_names_;
  std::vector<bool> removed_;
  mutable std::map<std::string, Initializer> evaluated_;  // constant()'s computed values
  std::map<std::string, std::string> materialized_;
};

}  // namespace

int fold_qdq(Graph& g) { return Folder(g).run(); }

}  // namespace kiln::graph::passes
