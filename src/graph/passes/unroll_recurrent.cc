#include "graph/passes/unroll_recurrent.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/ops/recurrent.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

using op_util::RecurrentKind;
using op_util::RecurrentShape;
using Ints = std::vector<int64_t>;

// Emits the nodes that replace one recurrent node, with their value types.
class Emitter {
 public:
  Emitter(Graph& g, const Node& node, std::vector<Node>& out) : g_(g), node_(node), out_(out) {}

  std::string op(const std::string& type, std::vector<std::string> inputs, const Ints& shape,
                 std::map<std::string, Attribute> attrs = {}) {
    return ops(type, std::move(inputs), {shape}, std::move(attrs))[0];
  }

  std::vector<std::string> ops(const std::string& type, std::vector<std::string> inputs,
                               const std::vector<Ints>& shapes,
                               std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.op_type = type;
    n.name = unique_node_name(type);
    n.inputs = std::move(inputs);
    for (const Ints& s : shapes) {
      std::string v = unique_value_name(g_, node_.name + "/" + type);
      g_.value_info[v] = {"float32", s};
      n.outputs.push_back(v);
    }
    n.attrs = std::move(attrs);
    out_.push_back(std::move(n));
    return out_.back().outputs;
  }

  std::string constant(const std::string& what, Initializer t) {
    std::string v = unique_value_name(g_, node_.name + "/" + what);
    set_initializer(g_, v, std::move(t));
    return v;
  }

  std::string index(int64_t i) {
    Initializer t = int64_tensor({i});
    t.type.shape.clear();  // a scalar index: Gather drops the axis
    return constant("index", std::move(t));
  }

  // The node emitted for this recurrent node that writes `from` writes `to`
  // (one of the recurrent node's outputs) instead; `from` has no other reader.
  void rename_output(const std::string& from, const std::string& to) {
    for (auto it = out_.rbegin(); it != out_.rend(); ++it)
      for (std::string& o : it->outputs)
        if (o == from) {
          g_.value_info.erase(from);
          o = to;
          return;
        }
  }

 private:
  std::string unique_node_name(const std::string& type) {
    return node_.name + "/" + type + "_" + std::to_string(count_++);
  }

  Graph& g_;
  const Node& node_;
  std::vector<Node>& out_;
  int count_ = 0;
};

// The floats of rows [begin, end) of matrix `m` (row-major, `cols` wide), transposed.
std::vector<float> transposed_matrix_rows(const std::vector<float>& m, int64_t cols, int64_t begin,
                                          int64_t end) {
  std::vector<float> t(static_cast<size_t>((end - begin) * cols));
  for (int64_t r = begin; r < end; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<size_t>(c * (end - begin) + r - begin)] = m[static_cast<size_t>(r * cols + c)];
  return t;
}

class Unroller {
 public:
  // masked: sequence_lens may be shorter than the sequence somewhere.
  Unroller(Graph& g, const Node& n, const RecurrentShape& s, bool masked, std::vector<Node>& out)
      : g_(g), n_(n), s_(s), masked_(masked), e_(g, n, out) {}

  void run() {
    const int64_t T = s_.seq, N = s_.batch, H = s_.hidden;
    if (masked_) mask_ = step_mask();
    std::string x = n_.inputs[0];
    if (s_.batch_first) x = e_.op("Transpose", {x}, {T, N, s_.input}, {{"perm", Ints{1, 0, 2}}});
    std::vector<std::string> ys, hs, cs;
    for (int64_t d = 0; d < s_.directions; ++d) {
      Direction dir = run_direction(x, d);
      // [T * N, H] in time order -> [T, 1, N, H].
      std::string y = e_.op("Concat", dir.steps, {T * N, H}, {{"axis", int64_t{0}}});
      ys.push_back(reshape(y, {T, 1, N, H}));
      hs.push_back(reshape(dir.h, {1, N, H}));
      if (!dir.c.empty()) cs.push_back(reshape(dir.c, {1, N, H}));
    }
    emit_output(0, ys, {T, s_.directions, N, H}, 1, Ints{2, 0, 1, 3});
    emit_output(1, hs, {s_.directions, N, H}, 0, Ints{1, 0, 2});
    if (s_.kind == RecurrentKind::kLstm)
      emit_output(2, cs, {s_.directions, N, H}, 0, Ints{1, 0, 2});
  }

 private:
  struct Direction {
    std::vector<std::string> steps;  // each step's hidden state [N, H], in time order
    std::string h, c;                // the final states
  };

  // [T, N, 1] bool: whether step t is within batch entry n's sequence_lens.
  std::string step_mask() {
    const int64_t T = s_.seq, N = s_.batch;
    std::vector<float> iota(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) iota[static_cast<size_t>(t)] = static_cast<float>(t);
    const int64_t to_float = 1;  // ONNX's FLOAT
    std::string lens = e_.op("Cast", {n_.inputs[4]}, {N}, {{"to", to_float}});
    std::string within =
        e_.op("Less", {e_.constant("steps", float_tensor({T, 1}, iota)), lens}, {T, N});
    g_.value_info[within].dtype = "bool";
    return as_bool(reshape(within, {T, N, 1}));
  }

  // Marks value v (emitted as float32) bool.
  std::string as_bool(const std::string& v) {
    g_.value_info[v].dtype = "bool";
    return v;
  }

  // `next` where m ([N, 1]) is true, else `prev`: Where keeps the values exact.
  std::string select_state(const std::string& m, const std::string& next, const std::string& prev) {
    return e_.op("Where", {m, next, prev}, {s_.batch, s_.hidden});
  }

  bool present(size_t i) const { return i < n_.inputs.size() && !n_.inputs[i].empty(); }

  // Input i's initializer, or nullptr when it is absent or computed at run time.
  const Initializer* constant_input(size_t i) const {
    return present(i) ? constant_of(g_, n_.inputs[i]) : nullptr;
  }

  // Rows [begin, end) of direction d of the [D, rows, cols] weight input i
  // (W or R), transposed to [cols, end - begin]. A constant is transposed
  // here, at build time; a run-time weight by Gather, Slice and Transpose nodes.
  std::string transposed_rows(size_t i, int64_t d, int64_t begin, int64_t end, int64_t cols,
                              const std::string& what) {
    const int64_t rows = s_.gates() * s_.hidden;
    if (const Initializer* c = constant_input(i))
      return e_.constant(what,
                         float_tensor({cols, end - begin},
                                      transposed_matrix_rows(c->as<float>(), cols, d * rows + begin,
                                                             d * rows + end)));
    std::string m =
        e_.op("Gather", {n_.inputs[i], e_.index(d)}, {rows, cols}, {{"axis", int64_t{0}}});
    if (begin != 0 || end != rows) m = slice(m, 0, begin, end, {end - begin, cols});
    return e_.op("Transpose", {m}, {cols, end - begin}, {{"perm", Ints{1, 0}}});
  }

  // Elements [begin, end) of direction d of the [D, len] vector input i (B
  // or P): zeros when the input is absent, a constant when it is one, else
  // Gather and Slice nodes.
  std::string vector_part(size_t i, int64_t d, int64_t begin, int64_t end,
                          const std::string& what) {
    if (!present(i) || constant_input(i))
      return e_.constant(what, float_tensor({end - begin}, constant_part(i, d, begin, end)));
    const int64_t len = g_.type_of(n_.inputs[i])->shape.at(1);
    std::string row = e_.op("Gather", {n_.inputs[i], e_.index(d)}, {len}, {{"axis", int64_t{0}}});
    return begin == 0 && end == len ? row : slice(row, 0, begin, end, {end - begin});
  }

  // The floats of vector_part when it is a constant (zeros when absent).
  std::vector<float> constant_part(size_t i, int64_t d, int64_t begin, int64_t end) const {
    const Initializer* c = constant_input(i);
    if (!c) return std::vector<float>(static_cast<size_t>(end - begin), 0.f);
    const std::vector<float> all = c->as<float>();
    const int64_t len = c->type.shape.at(1);
    return std::vector<float>(all.begin() + d * len + begin, all.begin() + d * len + end);
  }

  // Activation j of direction d applied to v ([N, H]), its input clipped
  // first when the node has clip (graph/ops/recurrent.h).
  std::string activate(int64_t d, int64_t j, std::string v, bool clip = true) {
    const Ints nh = {s_.batch, s_.hidden};
    if (clip && s_.clip)
      v = e_.op("Clip", {v, scalar("clip_min", -*s_.clip), scalar("clip_max", *s_.clip)}, nh);
    const op_util::Activation& a = s_.activation(d, j);
    if (a.name == "Affine")
      return e_.op("Add", {e_.op("Mul", {v, scalar("alpha", a.alpha)}, nh), scalar("beta", a.beta)},
                   nh);
    if (a.name == "ScaledTanh") {
      std::string t = e_.op("Tanh", {e_.op("Mul", {v, scalar("beta", a.beta)}, nh)}, nh);
      return e_.op("Mul", {t, scalar("alpha", a.alpha)}, nh);
    }
    // The others are ONNX operators of the same name and attributes.
    std::map<std::string, Attribute> attrs;
    if (a.name == "LeakyRelu" || a.name == "ThresholdedRelu" || a.name == "Elu" ||
        a.name == "HardSigmoid")
      attrs["alpha"] = a.alpha;
    if (a.name == "HardSigmoid") attrs["beta"] = a.beta;
    return e_.op(a.name, {v}, nh, std::move(attrs));
  }

  std::string scalar(const std::string& what, float v) {
    Initializer t = float_tensor({1}, {v});
    t.type.shape.clear();
    return e_.constant(what, std::move(t));
  }

  std::string slice(const std::string& v, int64_t axis, int64_t begin, int64_t end,
                    const Ints& shape) {
    return e_.op(
        "Slice",
        {v, e_.constant("starts", int64_tensor({begin})), e_.constant("ends", int64_tensor({end})),
         e_.constant("axes", int64_tensor({axis}))},
        shape);
  }

  std::string reshape(const std::string& v, const Ints& shape) {
    return e_.op("Reshape", {v, e_.constant("shape", int64_tensor(shape))}, shape);
  }

  // Output k (if the model reads it): the directions' parts concatenated on
  // `axis`, transposed to the batch-first layout when asked.
  void emit_output(size_t k, const std::vector<std::string>& parts, const Ints& shape, int64_t axis,
                   const Ints& batch_first_perm) {
    if (k >= n_.outputs.size() || n_.outputs[k].empty()) return;
    // One direction's part is already the whole output (a Reshape's, read by nothing else).
    std::string v = parts.size() > 1 ? e_.op("Concat", parts, shape, {{"axis", axis}}) : parts[0];
    if (s_.batch_first) {
      Ints t(shape.size());
      for (size_t i = 0; i < t.size(); ++i) t[i] = shape[static_cast<size_t>(batch_first_perm[i])];
      v = e_.op("Transpose", {v}, t, {{"perm", batch_first_perm}});
    }
    e_.rename_output(v, n_.outputs[k]);
  }

  // The initial state input `i` for direction d, or zeros.
  std::string initial_state(size_t i, int64_t d) {
    const int64_t N = s_.batch, H = s_.hidden;
    if (i < n_.inputs.size() && !n_.inputs[i].empty())
      return e_.op("Gather", {n_.inputs[i], e_.index(d)}, {N, H},
                   {{"axis", int64_t{s_.batch_first ? 1 : 0}}});
    return e_.constant("zeros", float_tensor({N, H}, std::vector<float>(N * H, 0.f)));
  }

  // Direction d's weights as values: constants where the node's inputs are.
  struct Weights {
    int64_t d;                      // the direction
    std::string wt, xbias;          // W^T [I, G * H] and the bias added to X W^T
    std::string rt, rbias;          // R^T [H, rows] and its bias (GRU)
    std::string rt_h, rbias_h;      // GRU without linear_before_reset: the h gate's rows
    std::vector<std::string> peep;  // LSTM's peepholes i, o, f [H], when given
  };

  // GRU without linear_before_reset multiplies r * h by the h gate's rows alone.
  bool split_r() const { return s_.kind == RecurrentKind::kGru && !s_.linear_before_reset; }

  Weights weights(int64_t d) {
    const int64_t H = s_.hidden, GH = s_.gates() * H;
    const bool lstm = s_.kind == RecurrentKind::kLstm;
    Weights w;
    w.d = d;
    w.wt = transposed_rows(1, d, 0, GH, s_.input, "W");
    w.rt = transposed_rows(2, d, 0, split_r() ? 2 * H : GH, H, "R");
    if (split_r()) w.rt_h = transposed_rows(2, d, 2 * H, 3 * H, H, "R");
    if (s_.kind != RecurrentKind::kGru) {  // R's bias folds into the input projection's
      if (present(3) && !constant_input(3)) {
        w.xbias = e_.op(
            "Add", {vector_part(3, d, 0, GH, "Wb"), vector_part(3, d, GH, 2 * GH, "Rb")}, {GH});
      } else {
        std::vector<float> b = constant_part(3, d, 0, GH);
        const std::vector<float> rb = constant_part(3, d, GH, 2 * GH);
        for (size_t k = 0; k < b.size(); ++k) b[k] += rb[k];
        w.xbias = e_.constant("B", float_tensor({GH}, b));
      }
    } else {
      w.xbias = vector_part(3, d, 0, GH, "B");
      w.rbias = vector_part(3, d, GH, split_r() ? GH + 2 * H : 2 * GH, "Rb");
      if (split_r()) w.rbias_h = vector_part(3, d, GH + 2 * H, 2 * GH, "Rbh");
    }
    if (lstm && present(7))
      for (int64_t j = 0; j < 3; ++j) w.peep.push_back(vector_part(7, d, j * H, (j + 1) * H, "P"));
    return w;
  }

  Direction run_direction(const std::string& x, int64_t d) {
    const int64_t T = s_.seq, N = s_.batch, GH = s_.gates() * s_.hidden;
    const Weights w = weights(d);
    // Every step's input projection at once.
    std::string xw = e_.op("MatMul", {x, w.wt}, {T, N, GH});
    xw = e_.op("Add", {xw, w.xbias}, {T, N, GH});
    std::string h = initial_state(5, d);
    std::string c = s_.kind == RecurrentKind::kLstm ? initial_state(6, d) : "";
    std::vector<std::string> steps(static_cast<size_t>(T));
    for (int64_t step = 0; step < T; ++step) {
      const int64_t t = op_util::runs_backwards(s_, d) ? T - 1 - step : step;
      std::string xt = e_.op("Gather", {xw, e_.index(t)}, {N, GH}, {{"axis", int64_t{0}}});
      const std::string h_prev = h, c_prev = c;
      if (s_.kind == RecurrentKind::kLstm)
        lstm_step(w, xt, h, c);
      else if (s_.kind == RecurrentKind::kGru)
        gru_step(w, xt, h);
      else
        rnn_step(w, xt, h);
      steps[static_cast<size_t>(t)] = h;
      if (masked_) {  // past its length, a batch entry keeps its states and writes zeros
        std::string m =
            as_bool(e_.op("Gather", {mask_, e_.index(t)}, {N, 1}, {{"axis", int64_t{0}}}));
        steps[static_cast<size_t>(t)] = select_state(m, h, scalar("zero", 0.f));
        h = select_state(m, h, h_prev);
        if (!c.empty()) c = select_state(m, c, c_prev);
      }
    }
    return {steps, h, c};
  }

  void lstm_step(const Weights& w, const std::string& xt, std::string& h, std::string& c) {
    const int64_t N = s_.batch, H = s_.hidden;
    const Ints nh = {N, H};
    std::string gates = e_.op("Add", {xt, e_.op("MatMul", {h, w.rt}, {N, 4 * H})}, {N, 4 * H});
    std::vector<std::string> ifoc =
        e_.ops("Split", {gates}, {nh, nh, nh, nh}, {{"axis", int64_t{1}}});
    std::string i = ifoc[0], o = ifoc[1], f = ifoc[2], cc = ifoc[3];
    if (!w.peep.empty()) {
      i = e_.op("Add", {i, e_.op("Mul", {w.peep[0], c}, nh)}, nh);
      f = e_.op("Add", {f, e_.op("Mul", {w.peep[2], c}, nh)}, nh);
    }
    const std::string input_gate = activate(w.d, 0, i);
    // input_forget couples the gates: f = 1 - i (as ONNX Runtime computes it).
    const std::string forget_gate =
        s_.input_forget ? e_.op("Sub", {scalar("one", 1.f), input_gate}, nh) : activate(w.d, 0, f);
    std::string kept = e_.op("Mul", {forget_gate, c}, nh);
    std::string added = e_.op("Mul", {input_gate, activate(w.d, 1, cc)}, nh);
    c = e_.op("Add", {kept, added}, nh);
    if (!w.peep.empty()) o = e_.op("Add", {o, e_.op("Mul", {w.peep[1], c}, nh)}, nh);
    h = e_.op("Mul", {activate(w.d, 0, o), activate(w.d, 2, c, /*clip=*/false)}, nh);
  }

  void rnn_step(const Weights& w, const std::string& xt, std::string& h) {
    const Ints nh = {s_.batch, s_.hidden};
    h = activate(w.d, 0, e_.op("Add", {xt, e_.op("MatMul", {h, w.rt}, nh)}, nh));
  }

  void gru_step(const Weights& w, const std::string& xt, std::string& h) {
    const int64_t N = s_.batch, H = s_.hidden;
    const Ints nh = {N, H};
    const int64_t rows = split_r() ? 2 * H : 3 * H;
    std::vector<std::string> xs = e_.ops("Split", {xt}, {nh, nh, nh}, {{"axis", int64_t{1}}});
    std::string hr = e_.op("MatMul", {h, w.rt}, {N, rows});
    hr = e_.op("Add", {hr, w.rbias}, {N, rows});
    std::vector<std::string> hs =
        e_.ops("Split", {hr}, split_r() ? std::vector<Ints>{nh, nh} : std::vector<Ints>{nh, nh, nh},
               {{"axis", int64_t{1}}});
    std::string z = activate(w.d, 0, e_.op("Add", {xs[0], hs[0]}, nh));
    std::string reset = activate(w.d, 0, e_.op("Add", {xs[1], hs[1]}, nh));
    std::string recurrent;
    if (split_r()) {
      recurrent = e_.op("MatMul", {e_.op("Mul", {reset, h}, nh), w.rt_h}, nh);
      recurrent = e_.op("Add", {recurrent, w.rbias_h}, nh);
    } else {
      recurrent = e_.op("Mul", {reset, hs[2]}, nh);
    }
    std::string candidate = activate(w.d, 1, e_.op("Add", {xs[2], recurrent}, nh));
    // (1 - z) * candidate + z * h = candidate + z * (h - candidate)
    std::string toward = e_.op("Mul", {z, e_.op("Sub", {h, candidate}, nh)}, nh);
    h = e_.op("Add", {candidate, toward}, nh);
  }

  Graph& g_;
  const Node& n_;
  const RecurrentShape& s_;
  const bool masked_;
  Emitter e_;
  std::string mask_;  // step_mask(), when masked_
};

}  // namespace

int unroll_recurrent(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    const bool recurrent = (n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "RNN") &&
                           (n.domain.empty() || n.domain == "ai.onnx");
    if (!recurrent) return false;
    const TensorType* x = g.type_of(n.inputs.at(0));
    const TensorType* w = g.type_of(n.inputs.at(1));
    const TensorType* r = g.type_of(n.inputs.at(2));
    if (!x || !w || !r || x->dtype != "float32" || w->dtype != "float32" || r->dtype != "float32")
      throw std::runtime_error("node '" + n.name + "' (" + n.op_type +
                               "): only float32 inputs of known shape can be unrolled");
    const RecurrentShape s = op_util::recurrent_shape(n, x->shape, w->shape, r->shape);
    // sequence_lens known to equal the sequence length everywhere needs no mask.
    bool masked = n.inputs.size() > 4 && !n.inputs[4].empty();
    if (const Initializer* lens = masked ? constant_of(g, n.inputs[4]) : nullptr;
        lens && lens->type.dtype == "int32") {
      masked = false;
      for (int32_t l : lens->as<int32_t>()) masked = masked || l != s.seq;
    }
    Unroller(g, n, s, masked, out).run();
    return true;
  });
}

}  // namespace kiln::graph::passes
