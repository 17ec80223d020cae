#include "graph/passes/lower_signal.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "graph/ops/op_util.h"
#include "graph/ops/signal.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

using Ints = std::vector<int64_t>;

// Emits the nodes that replace one DFT or STFT node, each value named after it.
class SignalRewriter {
 public:
  SignalRewriter(Graph& g, const Node& n, std::vector<Node>& out)
      : g_(g), n_(n), out_(out), dtype_(g.type_of(n.inputs[0])->dtype) {}

  void dft() {
    const Initializer* length = optional_constant(1, "dft_length");
    const Ints x_shape = shape_of(n_.inputs[0]);
    const op_util::DftSpec s = op_util::dft_spec(n_, x_shape, dtype_, length);
    const size_t rank = x_shape.size(), axis = static_cast<size_t>(s.axis);
    std::string v = n_.inputs[0];
    const int64_t rows = std::min(s.length, s.n);
    if (s.length > s.n) {  // only the first dft_length values are the signal
      Ints idx(static_cast<size_t>(rows));
      std::iota(idx.begin(), idx.end(), int64_t{0});
      Ints cut = x_shape;
      cut[axis] = rows;
      v = emit("Gather", {v, constant("first", int64_tensor(idx))}, cut,
               {{"axis", static_cast<int64_t>(axis)}});
    }
    // The axis just before the channels: [rest..., rows, channels].
    Ints perm;
    for (size_t d = 0; d + 1 < rank; ++d)
      if (d != axis) perm.push_back(static_cast<int64_t>(d));
    perm.push_back(static_cast<int64_t>(axis));
    perm.push_back(static_cast<int64_t>(rank - 1));
    Ints moved, rest;
    for (int64_t d : perm) moved.push_back(shape_of(v)[static_cast<size_t>(d)]);
    rest.assign(moved.begin(), moved.end() - 2);
    v = transpose(v, perm, moved);
    const int64_t lines = num_elements(rest);
    v = reshape(v, {lines, rows * s.channels});
    std::string w = twiddles(rows, s.channels, s.n, s.bins, s.inverse, nullptr);
    v = emit("MatMul", {v, w}, {lines, s.bins * 2});
    Ints spectrum = rest;
    spectrum.push_back(s.bins);
    spectrum.push_back(2);
    v = reshape(v, spectrum);
    // Back: the bins at the axis.
    Ints back(rank);
    for (size_t p = 0, r = 0; p + 1 < rank; ++p)
      back[p] = p == axis ? static_cast<int64_t>(rank - 2) : static_cast<int64_t>(r++);
    back[rank - 1] = static_cast<int64_t>(rank - 1);
    v = transpose(v, back, s.out);
    finish(v);
  }

  void stft() {
    const Initializer* step = optional_constant(1, "frame_step");
    if (!step) op_util::fail(n_, "frame_step is required");
    const Initializer* frame_length = optional_constant(3, "frame_length");
    const bool has_window = n_.inputs.size() > 2 && !n_.inputs[2].empty();
    const Ints window_shape = has_window ? shape_of(n_.inputs[2]) : Ints{};
    const op_util::StftSpec s =
        op_util::stft_spec(n_, shape_of(n_.inputs[0]), dtype_, *step,
                           has_window ? &window_shape : nullptr, frame_length);
    // Frame t holds samples t * step + [0, frame_length).
    Ints idx(static_cast<size_t>(s.frames * s.frame));
    for (int64_t t = 0; t < s.frames; ++t)
      for (int64_t f = 0; f < s.frame; ++f)
        idx[static_cast<size_t>(t * s.frame + f)] = t * s.step + f;
    Initializer frame_index = int64_tensor(idx);
    frame_index.type.shape = {s.frames, s.frame};
    std::string v = emit("Gather", {n_.inputs[0], constant("frame_index", frame_index)},
                         {s.batch, s.frames, s.frame, s.channels}, {{"axis", int64_t{1}}});
    const Initializer* window = has_window ? constant_of(g_, n_.inputs[2]) : nullptr;
    std::vector<double> window_values;
    if (window) {
      window_values = op_util::to_doubles(n_, *window);
    } else if (has_window) {  // fed at run time: multiply each frame
      if (g_.type_of(n_.inputs[2])->dtype != dtype_)
        op_util::fail(
            n_, "the window is " + g_.type_of(n_.inputs[2])->dtype + " but the signal " + dtype_);
      std::string column = reshape(n_.inputs[2], {s.frame, 1});
      v = emit("Mul", {v, column}, {s.batch, s.frames, s.frame, s.channels});
    }
    v = reshape(v, {s.batch, s.frames, s.frame * s.channels});
    std::string w =
        twiddles(s.frame, s.channels, s.frame, s.bins, false, window ? &window_values : nullptr);
    v = emit("MatMul", {v, w}, {s.batch, s.frames, s.bins * 2});
    finish(reshape(v, s.out));
  }

 private:
  Ints shape_of(const std::string& value) const { return g_.type_of(value)->shape; }

  // Input i's constant value, nullptr when the input is absent; an error when
  // it is given but computed at run time (the shapes would depend on it).
  const Initializer* optional_constant(size_t i, const std::string& what) const {
    if (i >= n_.inputs.size() || n_.inputs[i].empty()) return nullptr;
    const Initializer* c = constant_of(g_, n_.inputs[i]);
    if (!c) op_util::fail(n_, what + " must be a constant (it sets the output's shape)");
    return c;
  }

  std::string fresh(const std::string& what, const Ints& shape) {
    std::string v = unique_value_name(g_, n_.name + "/" + what);
    g_.value_info[v] = {dtype_, shape};
    return v;
  }

  std::string constant(const std::string& what, const Initializer& t) {
    std::string v = unique_value_name(g_, n_.name + "/" + what);
    set_initializer(g_, v, t);
    return v;
  }

  std::string emit(const std::string& op, std::vector<std::string> inputs, const Ints& shape,
                   std::map<std::string, Attribute> attrs = {}) {
    std::string lower = op;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string v = fresh(lower, shape);
    out_.push_back({op,
                    "",
                    n_.name + "/" + lower + "_" + std::to_string(count_++),
                    std::move(inputs),
                    {v},
                    std::move(attrs)});
    return v;
  }

  std::string transpose(const std::string& v, const Ints& perm, const Ints& shape) {
    bool identity = true;
    for (size_t d = 0; d < perm.size(); ++d) identity &= perm[d] == static_cast<int64_t>(d);
    return identity ? v : emit("Transpose", {v}, shape, {{"perm", perm}});
  }

  std::string reshape(const std::string& v, const Ints& shape) {
    if (shape_of(v) == shape) return v;
    return emit("Reshape", {v, constant("shape", int64_tensor(shape))}, shape);
  }

  // The twiddle matrix as a constant of the signal's dtype.
  std::string twiddles(int64_t rows, int64_t channels, int64_t n, int64_t bins, bool inverse,
                       const std::vector<double>* window) {
    std::vector<double> w = op_util::dft_matrix(rows, channels, n, bins, inverse, window);
    Initializer t = op_util::make_tensor(dtype_, {rows * channels, bins * 2});
    for (size_t k = 0; k < w.size(); ++k) {
      if (dtype_ == "float64")
        op_util::data_of<double>(t)[k] = w[k];
      else
        op_util::data_of<float>(t)[k] = static_cast<float>(w[k]);
    }
    return constant("twiddles", t);
  }

  // The last value under the node's output name.
  void finish(const std::string& v) {
    if (!out_.empty() && count_ > 0 && out_.back().outputs[0] == v) {
      out_.back().outputs[0] = n_.outputs[0];
      g_.value_info.erase(v);
    } else {
      out_.push_back({"Identity", "", n_.name + "/output", {v}, {n_.outputs[0]}, {}});
    }
  }

  Graph& g_;
  const Node& n_;
  std::vector<Node>& out_;
  std::string dtype_;
  int count_ = 0;
};

}  // namespace

int lower_signal(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    if (!onnx || (n.op_type != "DFT" && n.op_type != "STFT")) return false;
    if (n.inputs.empty() || n.inputs[0].empty() || !g.type_of(n.inputs[0]))
      op_util::fail(n, "the input's type is unknown");
    SignalRewriter r(g, n, out);
    if (n.op_type == "DFT")
      r.dft();
    else
      r.stft();
    return true;
  });
}

}  // namespace kiln::graph::passes
