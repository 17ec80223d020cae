// find_candidates / make_plan and the quantization arithmetic (plan.h).
#include "quantize/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace kiln::quantize {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// Up to five node labels nearest to `name` (a typo, a different case, a
// prefix of an exporter's long name).
std::string near_matches(const std::string& name, const frontend::OnnxModelSummary& model) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& n : model.nodes) {
    size_t d = edit_distance(name, n.label);
    if (n.label.find(name) != std::string::npos || name.find(n.label) != std::string::npos)
      d = std::min<size_t>(d, 1);
    scored.push_back({d, n.label});
  }
  std::sort(scored.begin(), scored.end());
  std::string out;
  for (size_t i = 0; i < scored.size() && i < 5; ++i) out += (i ? ", " : "") + scored[i].second;
  return out;
}

// Round half to even, as ONNX's QuantizeLinear (std::nearbyint in the default mode).
float round_even(float x) { return std::nearbyint(x); }

}  // namespace

std::optional<size_t> linear_bias_add(const frontend::OnnxModelSummary& model, size_t mm,
                                      int64_t columns) {
  const std::string& y = model.nodes.at(mm).outputs.at(0);
  if (std::find(model.outputs.begin(), model.outputs.end(), y) != model.outputs.end())
    return std::nullopt;
  std::optional<size_t> add;
  for (size_t i = 0; i < model.nodes.size(); ++i)
    for (const std::string& in : model.nodes[i].inputs)
      if (in == y) {
        if (add && *add != i) return std::nullopt;  // a second reader
        add = i;
      }
  if (!add) return std::nullopt;
  const frontend::OnnxNodeSummary& a = model.nodes[*add];
  if (a.op_type != "Add" || a.inputs.size() != 2 || a.outputs.size() != 1 ||
      a.inputs[0] == a.inputs[1])
    return std::nullopt;
  const std::string& c = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
  auto it = model.float_initializers.find(c);
  if (it == model.float_initializers.end() || it->second.shape.empty() ||
      it->second.shape.back() != columns)
    return std::nullopt;
  for (size_t d = 0; d + 1 < it->second.shape.size(); ++d)
    if (it->second.shape[d] != 1) return std::nullopt;  // [M, N]: not one value per column
  return add;
}

const std::vector<std::string>& optional_op_types() {
  static const std::vector<std::string> ops = {"Add", "AveragePool", "GlobalAveragePool", "MaxPool",
                                               "MatMul"};
  return ops;
}

std::vector<Candidate> find_candidates(const frontend::OnnxModelSummary& model,
                                       const std::vector<std::string>& keep_float,
                                       const std::vector<std::string>& optional_ops) {
  // Quantizing twice would stack a second QDQ layer on the first one's.
  for (const auto& n : model.nodes)
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear" ||
        n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul" ||
        n.op_type == "DynamicQuantizeLinear" || n.op_type == "ConvInteger" ||
        n.op_type == "MatMulInteger")
      throw std::invalid_argument(model.name() + " is already quantized (node " + n.label + ", " +
                                  n.op_type + "): quantize the float model");
  std::set<std::string> keep;
  for (const std::string& name : keep_float) {
    bool found = std::any_of(model.nodes.begin(), model.nodes.end(),
                             [&](const frontend::OnnxNodeSummary& n) { return n.label == name; });
    if (!found)
      throw std::invalid_argument("--keep-float: " + model.name() + " has no node '" + name +
                                  "' (nearest: " + near_matches(name, model) + ")");
    keep.insert(name);
  }
  std::set<std::string> optional;
  for (const std::string& op : optional_ops) {
    const auto& valid = optional_op_types();
    if (std::find(valid.begin(), valid.end(), op) == valid.end()) {
      std::string list;
      for (const std::string& v : valid) list += (list.empty() ? "" : ", ") + v;
      throw std::invalid_argument("--quantize-also: '" + op +
                                  "' is not an operator kiln can add to the quantized ones (" +
                                  list + ")");
    }
    optional.insert(op);
  }
  auto float_init = [&](const std::string& t) -> const frontend::FloatInitializer* {
    auto it = model.float_initializers.find(t);
    return it == model.float_initializers.end() ? nullptr : &it->second;
  };
  std::map<std::string, std::vector<size_t>> consumers;
  for (size_t i = 0; i < model.nodes.size(); ++i)
    for (const std::string& in : model.nodes[i].inputs) consumers[in].push_back(i);
  const std::set<std::string> graph_outputs(model.outputs.begin(), model.outputs.end());
  // The range that quantizes `t`: that of the Relu that is its only reader, if any.
  auto range_tensor = [&](const std::string& t) {
    if (auto it = consumers.find(t);
        it != consumers.end() && it->second.size() == 1 && !graph_outputs.count(t)) {
      const frontend::OnnxNodeSummary& next = model.nodes[it->second[0]];
      if (next.op_type == "Relu" && !next.outputs.empty()) return next.outputs[0];
    }
    return t;
  };
  std::set<size_t> bias_adds;  // Adds quantized as part of their MatMul (linear_bias_add)
  std::vector<Candidate> out;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const frontend::OnnxNodeSummary& n = model.nodes[i];
    if (bias_adds.count(i)) continue;
    // --quantize-also MatMul: a MatMul of two activations (attention's Q K^T
    // and P V) gets both inputs and its output quantized, per tensor.
    const bool activation_matmul = n.op_type == "MatMul" && optional.count("MatMul") &&
                                   n.inputs.size() == 2 && !float_init(n.inputs[1]) &&
                                   !model.initializers.count(n.inputs[1]);
    const bool weighted =
        (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm") && !activation_matmul;
    if (!weighted && !optional.count(n.op_type)) continue;
    Candidate c;
    c.index = i;
    auto why = [&](const std::string& reason) {
      if (c.why_not.empty()) c.why_not = reason;
    };
    if (keep.count(n.label)) why("--keep-float");
    const size_t activation_inputs = n.op_type == "Add" || activation_matmul ? 2 : 1;
    if (n.inputs.size() < (weighted ? 2 : activation_inputs) || n.outputs.empty()) {
      why("too few inputs");
      out.push_back(c);
      continue;
    }
    c.activations.assign(n.inputs.begin(), n.inputs.begin() + activation_inputs);
    for (const std::string& a : c.activations)
      if (model.initializers.count(a)) why("input '" + a + "' is a constant");
    if (!weighted && n.outputs.size() > 1) why("more than one output (MaxPool's indices)");
    c.output = n.outputs[0];
    c.output_range = range_tensor(c.output);
    if (!weighted) {
      out.push_back(c);
      continue;
    }
    c.weight = n.inputs[1];
    if (n.inputs.size() > 2) c.bias = n.inputs[2];
    const frontend::FloatInitializer* w = float_init(c.weight);
    if (!w) {
      why("the weight '" + c.weight + "' is not a float32 initializer");
    } else if (n.op_type == "Conv") {
      c.weight_axis = 0;
      if (w->shape.size() < 3) why("the weight is not a convolution kernel");
    } else if (n.op_type == "MatMul") {
      c.weight_axis = 1;
      if (w->shape.size() != 2) why("the weight is not 2-D");
    } else {  // Gemm
      auto attr_f = [&](const char* k) {
        auto it = n.float_attrs.find(k);
        return it == n.float_attrs.end() ? 1.0f : it->second;
      };
      auto attr_i = [&](const char* k) {
        auto it = n.int_attrs.find(k);
        return it == n.int_attrs.end() ? int64_t{0} : it->second;
      };
      c.weight_axis = attr_i("transB") ? 0 : 1;
      if (attr_f("alpha") != 1.0f || attr_f("beta") != 1.0f) why("alpha or beta is not 1");
      if (w->shape.size() != 2) why("the weight is not 2-D");
    }
    if (!c.bias.empty() && w && c.why_not.empty()) {
      const frontend::FloatInitializer* b = float_init(c.bias);
      const int64_t channels = w->shape[static_cast<size_t>(c.weight_axis)];
      if (!b || b->shape.size() != 1 || b->shape[0] != channels)
        why("the bias '" + c.bias + "' is not a float32 initializer of " +
            std::to_string(channels) + " values");
    }
    // MatMul -> Add(bias): the Add's output is quantized instead of the
    // MatMul's (a Q between them would keep the bias out of the integer
    // product). Not when the user keeps that Add in float32.
    if (n.op_type == "MatMul" && w && c.why_not.empty())
      if (std::optional<size_t> add = linear_bias_add(model, i, w->shape[1]);
          add && !keep.count(model.nodes[*add].label)) {
        c.bias_add = add;
        c.output = model.nodes[*add].outputs[0];
        c.output_range = range_tensor(c.output);
        bias_adds.insert(*add);
      }
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> observed_tensors(const std::vector<Candidate>& candidates) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Candidate& c : candidates) {
    if (!c.why_not.empty()) continue;
    std::vector<std::string> tensors = c.activations;
    tensors.push_back(c.output_range);
    for (const std::string& t : tensors)
      if (seen.insert(t).second) out.push_back(t);
  }
  return out;
}

frontend::ActivationQuant activation_quant(Range r) {
  frontend::ActivationQuant a;
  a.min = r.min;
  a.max = r.max;
  // The range always holds 0, so that 0 (padding, ReLU's floor) is exact.
  const float lo = std::min(r.min, 0.0f), hi = std::max(r.max, 0.0f);
  if (hi - lo <= 0) {
    a.scale = 1;
    a.zero_point = 0;
    return a;
  }
  a.scale = (hi - lo) / 255.0f;
  a.zero_point = static_cast<uint8_t>(std::clamp(round_even(-lo / a.scale), 0.0f, 255.0f));
  return a;
}

frontend::WeightQuant quantize_weight(const std::string& name, const frontend::FloatInitializer& w,
                                      int64_t axis, int qmax) {
  if (qmax < 1 || qmax > kWeightMax)
    throw std::invalid_argument("quantize_weight: qmax " + std::to_string(qmax) +
                                " is not in [1, 127]");
  frontend::WeightQuant q;
  q.tensor = name;
  q.axis = axis;
  q.shape = w.shape;
  const size_t ax = static_cast<size_t>(axis);
  const int64_t channels = w.shape.at(ax);
  int64_t inner = 1;
  for (size_t i = ax + 1; i < w.shape.size(); ++i) inner *= w.shape[i];
  const size_t n = w.data.size();
  auto channel_of = [&](size_t i) { return static_cast<int64_t>(i) / inner % channels; };
  std::vector<float> amax(static_cast<size_t>(channels), 0);
  for (size_t i = 0; i < n; ++i) {
    float& m = amax[static_cast<size_t>(channel_of(i))];
    m = std::max(m, std::fabs(w.data[i]));
  }
  q.scales.resize(amax.size());
  // An all-zero channel still needs a positive scale (DequantizeLinear's) and
  // one small enough for its bias's int32 step: 1/qmax is that of |w| = 1.
  const float top = static_cast<float>(qmax);
  for (size_t c = 0; c < amax.size(); ++c) q.scales[c] = amax[c] > 0 ? amax[c] / top : 1 / top;
  q.data.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float s = q.scales[static_cast<size_t>(channel_of(i))];
    q.data[i] = static_cast<int8_t>(std::clamp(round_even(w.data[i] / s), -top, top));
  }
  return q;
}

frontend::BiasQuant quantize_bias(const std::string& name, const frontend::FloatInitializer& b,
                                  float x_scale, const std::vector<float>& w_scales) {
  frontend::BiasQuant q;
  q.tensor = name;
  q.scales.resize(w_scales.size());
  q.data.resize(w_scales.size());
  // Saturating: a bias beyond 2^31 steps of x_scale * w_scale cannot be
  // represented (it would need a scale far coarser than its node's output).
  const double lim = static_cast<double>(std::numeric_limits<int32_t>::max());
  for (size_t c = 0; c < w_scales.size(); ++c) {
    q.scales[c] = x_scale * w_scales[c];
    const double v = std::nearbyint(static_cast<double>(b.data[c]) / q.scales[c]);
    q.data[c] = static_cast<int32_t>(std::clamp(v, -lim - 1, lim));
  }
  return q;
}

frontend::QuantPlan make_plan(const frontend::OnnxModelSummary& model,
                              const std::vector<Candidate>& candidates,
                              const std::map<std::string, Range>& ranges, int weight_max) {
  frontend::QuantPlan plan;
  auto range_of = [&](const std::string& t) {
    auto it = ranges.find(t);
    if (it == ranges.end()) throw std::logic_error("make_plan: no range for '" + t + "'");
    return it->second;
  };
  for (const Candidate& c : candidates) {
    const frontend::OnnxNodeSummary& n = model.nodes[c.index];
    if (!c.why_not.empty()) {
      plan.kept_float[n.label] = c.why_not;
      continue;
    }
    for (const std::string& a : c.activations)
      if (!plan.activations.count(a)) plan.activations[a] = activation_quant(range_of(a));
    if (!plan.activations.count(c.output))
      plan.activations[c.output] = activation_quant(range_of(c.output_range));
    frontend::NodeQuant q;
    q.index = c.index;
    q.label = n.label;
    q.op_type = n.op_type;
    q.activations = c.activations;
    q.output = c.output;
    q.bias_add = c.bias_add;
    if (!c.weight.empty()) {
      q.weight = quantize_weight(c.weight, model.float_initializers.at(c.weight), c.weight_axis,
                                 weight_max);
      if (!c.bias.empty())
        q.bias = quantize_bias(c.bias, model.float_initializers.at(c.bias),
                               plan.activations.at(c.activations[0]).scale, q.weight->scales);
    }
    plan.nodes.push_back(std::move(q));
  }
  return plan;
}

}  // namespace kiln::quantize
