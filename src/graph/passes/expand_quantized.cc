// expand_quantized_ops: the quantized operators as DequantizeLinear -> float
// op -> QuantizeLinear (see fold_qdq.h), so that the float templates run them
// until int8 templates take QLinearConv / QLinearMatMul over. The constant
// DequantizeLinear of weights and biases that this leaves folds into float
// constants in fold_constants.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/ops/op_util.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

using Shape = std::vector<int64_t>;

class Expander {
 public:
  Expander(Graph& g, const std::function<bool(const Node&)>& keep) : g_(g), keep_(keep) {
    for (const Node& n : g.nodes) names_.insert(n.name);
  }

  int run() {
    int count = 0;
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& n : nodes) {
      // Kept nodes stay visible to unique_value_name while new ones are made.
      bool qlinear = n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul";
      if (qlinear && keep_ && keep_(n)) {
        g_.nodes.push_back(std::move(n));
        continue;
      }
      if (n.op_type == "QLinearConv" || n.op_type == "ConvInteger") {
        expand_conv(n);
      } else if (n.op_type == "QLinearMatMul" || n.op_type == "MatMulInteger") {
        expand_matmul(n);
      } else if (n.op_type == "DynamicQuantizeLinear") {
        expand_dynamic_quantize(n);
      } else {
        g_.nodes.push_back(std::move(n));
        continue;
      }
      ++count;
    }
    fuse_quantize_dequantize();
    return count;
  }

 private:
  const TensorType& type(const Node& n, const std::string& v) const {
    const TensorType* t = g_.type_of(v);
    if (!t) op_util::fail(n, "no type for '" + v + "'");
    return *t;
  }

  static std::string in(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : ""; }

  // Adds a node of `op` reading `inputs`; its one output is `out` (a new value
  // of type `t` when empty). Returns the output name.
  std::string add(const Node& from, const std::string& op, const std::string& suffix,
                  std::vector<std::string> inputs, const TensorType& t, std::string out = "",
                  std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.op_type = op;
    n.name = from.name + "/" + suffix;
    while (names_.count(n.name)) n.name += "_";
    names_.insert(n.name);
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    if (out.empty()) out = unique_value_name(g_, from.name + "/" + suffix);
    g_.value_info[out] = t;
    n.outputs = {out};
    g_.nodes.push_back(std::move(n));
    return out;
  }

  std::string constant(const std::string& base, Initializer v) {
    std::string name = unique_value_name(g_, base);
    set_initializer(g_, name, std::move(v));
    return name;
  }

  // A float scale of 1 shaped like the zero point `zp` (scalar when omitted):
  // DQ(x, 1, zp) is exactly float(x - zp), the integer ops' operand.
  std::string unit_scale(const Node& n, const std::string& zp) {
    Shape s = zp.empty() ? Shape{} : type(n, zp).shape;
    return constant(
        n.name + "/unit_scale",
        float_tensor(s, std::vector<float>(static_cast<size_t>(num_elements(s)), 1.0f)));
  }

  std::string dequantize(const Node& n, const std::string& suffix, const std::string& x,
                         const std::string& scale, const std::string& zp, int64_t axis) {
    TensorType t{"float32", type(n, x).shape};
    return add(n, "DequantizeLinear", suffix, {x, scale, zp}, t, "", {{"axis", axis}});
  }

  // QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B].
  // ConvInteger: x, w[, x_zp[, w_zp]].
  void expand_conv(const Node& n) {
    bool qlinear = n.op_type == "QLinearConv";
    std::string x = in(n, 0), w = in(n, qlinear ? 3 : 1);
    std::string xzp = in(n, qlinear ? 2 : 2), wzp = in(n, qlinear ? 5 : 3);
    std::string xs = qlinear ? in(n, 1) : unit_scale(n, xzp);
    std::string ws = qlinear ? in(n, 4) : unit_scale(n, wzp);
    std::string xf = dequantize(n, "dq_x", x, xs, xzp, 1);
    std::string wf = dequantize(n, "dq_w", w, ws, wzp, 0);
    std::vector<std::string> conv_in = {xf, wf};
    if (qlinear && !in(n, 8).empty()) {
      // The int32 bias is in units of x_scale * w_scale[c] (float32, as ONNX Runtime).
      Shape bs = op_util::broadcast_shapes(n, {type(n, xs).shape, type(n, ws).shape});
      std::string scale = add(n, "Mul", "bias_scale", {xs, ws}, {"float32", bs});
      conv_in.push_back(dequantize(n, "dq_b", in(n, 8), scale, "", 0));
    }
    const TensorType& yt = type(n, n.outputs[0]);
    std::string yf = add(n, "Conv", "conv", conv_in, {"float32", yt.shape}, "", n.attrs);
    finish(n, yf, qlinear, qlinear ? in(n, 6) : "", qlinear ? in(n, 7) : "", 1);
  }

  // QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp[, B (kiln's)].
  // MatMulInteger: a, b[, a_zp[, b_zp]]. A 1-D a parameter runs along a's
  // rows (axis -2), a 1-D b or y parameter along the columns (axis -1).
  void expand_matmul(const Node& n) {
    bool qlinear = n.op_type == "QLinearMatMul";
    std::string a = in(n, 0), b = in(n, qlinear ? 3 : 1);
    std::string azp = in(n, 2), bzp = in(n, qlinear ? 5 : 3);
    std::string as = qlinear ? in(n, 1) : unit_scale(n, azp);
    std::string bs = qlinear ? in(n, 4) : unit_scale(n, bzp);
    int64_t ra = static_cast<int64_t>(type(n, a).shape.size());
    int64_t rb = static_cast<int64_t>(type(n, b).shape.size());
    if (ra < 2 || rb < 2) op_util::fail(n, "operands of rank < 2 are not supported");
    std::string af = dequantize(n, "dq_a", a, as, azp, ra - 2);
    std::string bf = dequantize(n, "dq_b", b, bs, bzp, rb - 1);
    const TensorType& yt = type(n, n.outputs[0]);
    std::string yf = add(n, "MatMul", "matmul", {af, bf}, {"float32", yt.shape});
    if (qlinear && !in(n, 8).empty()) {
      // kiln's int32 bias [N] (fold_qdq), in units of a_scale * b_scale[n].
      Shape bs_shape = op_util::broadcast_shapes(n, {type(n, as).shape, type(n, bs).shape});
      std::string scale = add(n, "Mul", "bias_scale", {as, bs}, {"float32", bs_shape});
      std::string bias = dequantize(n, "dq_bias", in(n, 8), scale, "", 0);
      yf = add(n, "Add", "bias_add", {yf, bias}, {"float32", yt.shape});
    }
    finish(n, yf, qlinear, qlinear ? in(n, 6) : "", qlinear ? in(n, 7) : "",
           static_cast<int64_t>(yt.shape.size()) - 1);
  }

  // The float result yf becomes the node's output: QuantizeLinear for the
  // QLinear ops, a Cast to int32 for the integer ones (whose float sums of
  // integer products are integers, exact while below 2^24).
  void finish(const Node& n, const std::string& yf, bool qlinear, const std::string& ys,
              const std::string& yzp, int64_t axis) {
    const TensorType& yt = type(n, n.outputs[0]);
    if (qlinear)
      add(n, "QuantizeLinear", "q_y", {yf, ys, yzp}, yt, n.outputs[0], {{"axis", axis}});
    else
      add(n, "Cast", "to_int32", {yf}, yt, n.outputs[0], {{"to", int64_t{6}}});
  }

  // y, y_scale, y_zero_point = DynamicQuantizeLinear(x), with ONNX Runtime's
  // arithmetic: the range [min(x, 0), max(x, 0)], scale = range / 255 (1 for
  // an all-zero x), zero point = saturate(round(-min / scale)).
  void expand_dynamic_quantize(const Node& n) {
    std::string x = in(n, 0);
    TensorType scalar{"float32", {}};
    std::map<std::string, Attribute> all = {{"keepdims", int64_t{0}}};
    std::string zero = constant(n.name + "/zero", float_tensor({}, {0.0f}));
    std::string one = constant(n.name + "/one", float_tensor({}, {1.0f}));
    std::string levels = constant(n.name + "/levels", float_tensor({}, {255.0f}));
    // kiln has no ReduceMin: -min(x, 0) = max(ReduceMax(-x), 0), exactly
    // (negation is exact), and range = max + (-min) is the same IEEE sum as max - min.
    std::string neg_x = add(n, "Neg", "neg_x", {x}, {"float32", type(n, x).shape});
    std::string neg_mn = add(n, "ReduceMax", "neg_min", {neg_x}, scalar, "", all);
    std::string mx = add(n, "ReduceMax", "max", {x}, scalar, "", all);
    std::string neg_lo = add(n, "Max", "neg_lo", {neg_mn, zero}, scalar);
    std::string hi = add(n, "Max", "hi", {mx, zero}, scalar);
    std::string range = add(n, "Add", "range", {hi, neg_lo}, scalar);
    std::string step = add(n, "Div", "step", {range, levels}, scalar);
    std::string empty = add(n, "Equal", "empty_range", {range, zero}, {"bool", {}});
    auto out = [&](size_t i) { return i < n.outputs.size() ? n.outputs[i] : std::string(); };
    std::string scale = add(n, "Where", "scale", {empty, one, step}, scalar, out(1));
    std::string zpf = add(n, "Div", "zp_float", {neg_lo, scale}, scalar);
    std::string u8zero = constant(n.name + "/zero_u8", op_util::make_tensor("uint8", {}));
    std::string zp = add(n, "QuantizeLinear", "zp", {zpf, one, u8zero}, {"uint8", {}}, out(2));
    add(n, "QuantizeLinear", "q", {x, scale, zp}, {"uint8", type(n, x).shape}, out(0));
  }

  // The value of a scalar constant, or nullopt.
  std::optional<double> scalar(const std::string& v) const {
    const Initializer* c = v.empty() ? nullptr : constant_of(g_, v);
    if (!c || c->type.num_elements() != 1) return std::nullopt;
    return op_util::to_doubles(Node{}, *c)[0];
  }

  // A QuantizeLinear whose every reader is a DequantizeLinear with the same
  // per-tensor scale and zero point (what ORT's QDQ format puts between two
  // float ops) becomes one kiln.QuantizeDequantize per reader: exactly
  // DQ(Q(x)), but float to float, so that it runs in the blocked layout and
  // inside the producing template's epilogue (graph/ops/quantize.cc).
  void fuse_quantize_dequantize() {
    std::map<std::string, std::vector<size_t>> readers = consumers_of(g_);
    std::vector<bool> removed(g_.nodes.size(), false);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& q = g_.nodes[i];
      if (q.op_type != "QuantizeLinear" || q.outputs.size() != 1 ||
          is_graph_output(g_, q.outputs[0]))
        continue;
      const TensorType* x = g_.type_of(in(q, 0));
      std::optional<double> s = scalar(in(q, 1));
      std::optional<double> z = in(q, 2).empty() ? std::optional<double>(0.0) : scalar(in(q, 2));
      if (!x || x->dtype != "float32" || !s || !z ||
          constant_of(g_, in(q, 1))->type.dtype != "float32")
        continue;
      auto r = readers.find(q.outputs[0]);
      if (r == readers.end()) continue;
      bool all_dq = true;
      for (size_t k : r->second) {
        const Node& d = g_.nodes[k];
        std::optional<double> dz = in(d, 2).empty() ? std::optional<double>(0.0) : scalar(in(d, 2));
        all_dq = all_dq && d.op_type == "DequantizeLinear" && in(d, 0) == q.outputs[0] &&
                 in(d, 1) != q.outputs[0] && in(d, 2) != q.outputs[0] && scalar(in(d, 1)) == s &&
                 dz == z;
      }
      if (!all_dq) continue;
      const std::string& qtype = g_.type_of(q.outputs[0])->dtype;
      std::string zf =
          constant(q.name + "/zero_point_f32", float_tensor({}, {static_cast<float>(*z)}));
      for (size_t k : r->second) {
        Node& d = g_.nodes[k];
        Node f;
        f.op_type = "kiln.QuantizeDequantize";
        f.name = d.name;
        f.inputs = {in(q, 0), in(q, 1), zf};
        f.attrs = {{"qmin", int64_t{qtype == "int8" ? -128 : 0}},
                   {"qmax", int64_t{qtype == "int8" ? 127 : 255}}};
        f.outputs = d.outputs;
        d = std::move(f);
      }
      removed[i] = true;
    }
    erase_nodes(g_, removed);
  }

  Graph& g_;
  const std::function<bool(const Node&)>& keep_;
  std::set<std::string> names_;
};

}  // namespace

int expand_quantized_ops(Graph& g, const std::function<bool(const Node&)>& keep) {
  return Expander(g, keep).run();
}

}  // namespace kiln::graph::passes
